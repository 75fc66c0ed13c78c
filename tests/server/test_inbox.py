"""The approvals inbox in a real headless Chromium (the Debian package), driven by
Playwright with that system browser: a pause appears without a reload, a click approves it,
the client waiting on its request completes, the tool ran once, and a second reviewer's
stale page is told the pause was decided already.

Set BEAMFILTER_SCREENSHOTS=docs/images to refresh the screenshots of docs/serve.md.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from _support import require
from peers._peer import Peer
from server._serve import API_KEY, REVIEWER_KEY, Gateway, refunds, scenario

pytestmark = [pytest.mark.peers, pytest.mark.packages]

CHROMIUM = shutil.which("chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require(CHROMIUM is not None, "chromium is not installed; run ./run setup (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed; run ./run setup (requirements-dev.txt)")
        raise
    with sync_playwright() as playwright:
        # the system browser: Playwright downloads none
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


def reviewer_page(browser: Any, gateway: Gateway, name: str) -> Any:
    context = browser.new_context(
        http_credentials={"username": name, "password": REVIEWER_KEY}, viewport={"width": 1000, "height": 700}
    )
    page = context.new_page()
    page.goto(gateway.url + "/inbox")
    return page


def shoot(page: Any, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("BEAMFILTER_SCREENSHOTS") or tmp_path)
    page.screenshot(path=str(folder / name), full_page=True)


def ask_and_wait(gateway: Gateway, text: str, conversation: str, got: list[Any]) -> threading.Thread:
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=API_KEY, max_retries=0, timeout=90)

    def ask() -> None:
        answer = client.chat.completions.create(
            model="assistant",
            messages=[{"role": "user", "content": text}],
            extra_headers={"Beamfilter-Wait": "60", "Beamfilter-Conversation": conversation},
        )
        got.append(answer)

    thread = threading.Thread(target=ask)
    thread.start()
    return thread


def test_a_click_approves_once_and_the_waiting_client_completes(
    browser: Any, tools_gateway: Gateway, llmock: Peer, tmp_path: Path
) -> None:
    gateway, folder = tools_gateway, tools_gateway.folder
    before = len(refunds(folder))
    ada = reviewer_page(browser, gateway, "ada")
    bob = reviewer_page(browser, gateway, "bob")
    assert ada.locator("h1").inner_text().startswith("beamfilter inbox")
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "refund", "arguments": {"order": 42, "amount": 120}}]},
        {"type": "reply", "text": "Refunded 120 on order 42."},
    )
    got: list[Any] = []
    waiting = ask_and_wait(gateway, "Refund order 42", "ticket-42", got)
    # both open pages reload by themselves when the pause arrives
    for page in (ada, bob):
        page.locator("section.pause").wait_for(timeout=30_000)
    section = ada.locator("section.pause")
    assert "conversation ticket-42" in section.locator(".meta").first.inner_text()
    assert "'refund' is a sensitive tool: a human decides" in section.inner_text()
    assert '"amount": 120' in section.locator("textarea").input_value()
    shoot(ada, "serve-inbox.png", tmp_path)
    assert waiting.is_alive()
    # bob is typing a reason: his page does not reload under him
    bob.locator("input[name^='reason:']").fill("checking")
    ada.get_by_role("button", name="Approve all").click()
    ada.wait_for_url("**/inbox?done=*")
    assert ada.get_by_role("status").inner_text().endswith(": decided; its turn completed.")
    waiting.join(60)
    assert not waiting.is_alive()
    assert got[0].choices[0].message.content == "Refunded 120 on order 42."
    assert refunds(folder)[before:] == [{"order": 42, "amount": 120}]
    # bob's page still shows the pause: his click is refused, nothing runs again
    assert bob.locator("section.pause").count() == 1
    bob.get_by_role("button", name="Approve all").click()
    assert bob.locator("h1").inner_text() == "Already decided"
    assert bob.get_by_role("status").inner_text().startswith("already decided by ada: pause ")
    shoot(bob, "serve-inbox-already-decided.png", tmp_path)
    assert refunds(folder)[before:] == [{"order": 42, "amount": 120}]
    ada.context.close()
    bob.context.close()


def test_a_reviewer_edits_the_arguments_or_rejects_with_a_reason(
    browser: Any, tools_gateway: Gateway, llmock: Peer, tmp_path: Path
) -> None:
    gateway, folder = tools_gateway, tools_gateway.folder
    before = len(refunds(folder))
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "refund", "arguments": {"order": 43, "amount": 900}}]},
        {"type": "reply", "text": "Refunded 90 on order 43."},
    )
    got: list[Any] = []
    waiting = ask_and_wait(gateway, "Refund order 43", "ticket-43", got)
    page = reviewer_page(browser, gateway, "ada")
    page.locator("section.pause").wait_for(timeout=30_000)
    page.locator("input[value=approve]").check()
    page.locator("textarea").fill('{"order": 43, "amount": 90}')
    page.get_by_role("button", name="Submit decisions").click()
    # the edit is confirmed on a page that shows what changed
    assert page.locator("h1").inner_text() == "Confirm the edited arguments"
    assert page.locator("table.diff tr").nth(1).inner_text().split("\t") == ["amount", "900", "90"]
    shoot(page, "serve-inbox-confirm-edit.png", tmp_path)
    page.get_by_role("button", name="Approve with these arguments").click()
    page.wait_for_url("**/inbox?done=*")
    # the gate judges the edited call again: it waits as edited, and one more approval runs it
    assert '"amount": 90' in page.locator("section.pause textarea").input_value()
    assert refunds(folder)[before:] == []
    assert waiting.is_alive()
    page.get_by_role("button", name="Approve all").click()
    page.wait_for_url("**/inbox?done=*")
    waiting.join(60)
    assert got[0].choices[0].message.content == "Refunded 90 on order 43."
    assert refunds(folder)[before:] == [{"order": 43, "amount": 90}]
    # a rejection with a reason: the model reads it, the tool never runs
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "refund", "arguments": {"order": 44, "amount": 5}}]},
        {"type": "reply", "text": "The refund was declined."},
    )
    llmock.delete("/_llmock/requests")
    got.clear()
    waiting = ask_and_wait(gateway, "Refund order 44", "ticket-44", got)
    page.locator("section.pause").wait_for(timeout=30_000)
    page.locator("input[value=reject]").check()
    page.locator("input[name^='reason:']").fill("order 44 was never paid")
    page.get_by_role("button", name="Submit decisions").click()
    page.wait_for_url("**/inbox?done=*")
    waiting.join(60)
    assert got[0].choices[0].message.content == "The refund was declined."
    sent = llmock.get("/_llmock/requests")["requests"][-1]["body"]["messages"]
    assert sent[-1]["content"] == "The call to 'refund' was rejected: order 44 was never paid"
    assert refunds(folder)[before:] == [{"order": 43, "amount": 90}]
    page.context.close()


def test_the_inbox_needs_a_reviewer_key_and_a_fresh_form(tools_gateway: Gateway) -> None:
    url = tools_gateway.url
    assert httpx.get(url + "/inbox", timeout=10).status_code == 401
    assert httpx.get(url + "/inbox", auth=("eve", API_KEY), timeout=10).status_code == 401
    assert httpx.get(url + "/inbox", auth=("ada", REVIEWER_KEY), timeout=10).status_code == 200
    forged = httpx.post(
        url + "/inbox/abc/decide",
        content=b"token=forged&all=approve",
        auth=("ada", REVIEWER_KEY),
        headers={"Origin": url},
        timeout=10,
    )
    assert forged.status_code == 403
    assert "The form is stale or not yours" in forged.text
    cross_site = httpx.post(
        url + "/inbox/abc/decide",
        content=b"all=approve",
        auth=("ada", REVIEWER_KEY),
        headers={"Origin": "https://evil.example"},
        timeout=10,
    )
    assert cross_site.status_code == 403
    assert "The form came from another site (or without its Origin)." in cross_site.text
