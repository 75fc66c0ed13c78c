"""The reviewer's browser attacked, in a real headless Chromium (the Debian package) driven
by Playwright: a page on another site auto-submits a ``text/plain`` form to the JSON decision
API while the reviewer's browser holds the inbox's Basic credentials, or posts the inbox's own
form; the form starts with no decision chosen; characters that hide or reorder text are
shown escaped."""

from __future__ import annotations

import http.server
import json
from collections.abc import Iterator
from html import escape
from typing import Any

import httpx
import pytest
from _support import http_server
from peers._peer import Peer
from server._serve import API_KEY, Gateway, refunds, reviewer, scenario
from server.test_inbox import browser, reviewer_page  # noqa: F401  # the Chromium fixture

pytestmark = [pytest.mark.peers, pytest.mark.packages]


class _Evil:
    """A site on another origin (``localhost``, another port) serving one page."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.page = ""


@pytest.fixture
def evil() -> Iterator[_Evil]:
    site: _Evil

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the http.server hook
            body = site.page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    with http_server(Handler) as server:
        site = _Evil(f"http://localhost:{server.server_address[1]}/")
        yield site


def _paused(gateway: Gateway, llmock: Peer, arguments: dict[str, Any], text: str = "") -> tuple[str, str]:
    call = {"name": "refund", "arguments": arguments}
    scenario(
        llmock,
        {"type": "reply", "text": text, "tool_calls": [call]} if text else {"type": "reply", "tool_calls": [call]},
    )
    answer = httpx.post(
        gateway.url + "/v1/chat/completions",
        json={"model": "assistant", "messages": [{"role": "user", "content": "Refund please"}]},
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=30,
    )
    info = answer.json()["beamfilter"]
    return info["pause_id"], info["awaiting"][0]["id"]


def _status(gateway: Gateway, pause_id: str) -> str:
    listed = httpx.get(gateway.url + "/v1/pauses", headers=reviewer(), timeout=10).json()["data"]
    return "pending" if any(p["pause_id"] == pause_id for p in listed) else "gone"


def _reject(gateway: Gateway, llmock: Peer, pause_id: str, call_id: str) -> None:
    scenario(llmock, {"type": "reply", "text": "Not refunded."})
    body = {"decisions": {call_id: {"kind": "reject", "reason": "test over"}}}
    done = httpx.post(gateway.url + f"/v1/pauses/{pause_id}/decide", json=body, headers=reviewer(), timeout=30)
    assert done.status_code == 200


def test_another_site_cannot_decide_with_the_reviewers_browser(
    browser: Any,  # noqa: F811
    tools_gateway: Gateway,
    llmock: Peer,
    evil: _Evil,
) -> None:
    gateway, folder = tools_gateway, tools_gateway.folder
    before = len(refunds(folder))
    pause_id, call_id = _paused(gateway, llmock, {"order": 71, "amount": 700})
    page = reviewer_page(browser, gateway, "ada")  # the reviewer signed in: the browser holds the credentials
    assert page.locator(f"#pause-{pause_id}").count() == 1
    posted: list[Any] = []
    page.on("request", lambda r: posted.append(r) if r.method == "POST" else None)
    # 1. the JSON API, through a text/plain form whose one field makes the body JSON
    name = json.dumps({"decisions": {call_id: "approve"}, "pad": "x"})[:-2] + '"'
    evil.page = f"""<!doctype html><form id="f" method="post" enctype="text/plain"
        action="{gateway.url}/v1/pauses/{pause_id}/decide"><input name="{escape(name)}" value='"}}'></form>
        <script>document.getElementById('f').submit()</script>"""
    with page.expect_navigation():
        page.goto(evil.url)
    page.wait_for_load_state()
    assert posted[-1].url == f"{gateway.url}/v1/pauses/{pause_id}/decide"
    sent = posted[-1].all_headers()
    assert sent["authorization"].startswith("Basic ")  # the browser resent the reviewer's credentials
    assert sent["content-type"] == "text/plain"
    shown = json.loads(page.locator("body").inner_text())
    assert shown["error"]["code"] == "invalid_api_key"
    # 2. the inbox's own form, posted from the other site (no token to copy: it cannot read the inbox)
    evil.page = f"""<!doctype html><form id="f" method="post" action="{gateway.url}/inbox/{pause_id}/decide">
        <input name="all" value="approve"><input name="token" value="guess"></form>
        <script>document.getElementById('f').submit()</script>"""
    with page.expect_navigation():
        page.goto(evil.url)
    page.wait_for_load_state()
    assert page.locator("h1").inner_text() == "Refused"
    assert page.get_by_role("status").inner_text() == "The form came from another site (or without its Origin)."
    assert _status(gateway, pause_id) == "pending"
    assert refunds(folder)[before:] == []
    page.context.close()
    _reject(gateway, llmock, pause_id, call_id)


def test_the_form_starts_with_no_decision_and_refuses_a_reason_without_one(
    browser: Any,  # noqa: F811
    tools_gateway: Gateway,
    llmock: Peer,
) -> None:
    gateway, folder = tools_gateway, tools_gateway.folder
    before = len(refunds(folder))
    pause_id, call_id = _paused(gateway, llmock, {"order": 72, "amount": 720})
    page = reviewer_page(browser, gateway, "ada")
    section = page.locator(f"#pause-{pause_id}")
    radios = section.locator("input[type=radio]")
    assert radios.count() == 2
    assert [radios.nth(i).is_checked() for i in range(2)] == [False, False]
    # a rejection reason typed, no choice made, Submit pressed: refused, nothing runs
    section.locator("input[name^='reason:']").fill("order 72 was never paid")
    section.get_by_role("button", name="Submit decisions").click()
    assert page.locator("h1").inner_text() == "Refused"
    assert page.get_by_role("status").inner_text() == (
        f"The decision for call {call_id} was not chosen (a reason was given: choose reject to send it); "
        "choose approve or reject and submit again."
    )
    assert _status(gateway, pause_id) == "pending"
    assert refunds(folder)[before:] == []
    # the same reason with "reject" chosen is sent to the model
    page.goto(gateway.url + "/inbox")
    section = page.locator(f"#pause-{pause_id}")
    section.locator("input[value=reject]").check()
    section.locator("input[name^='reason:']").fill("order 72 was never paid")
    scenario(llmock, {"type": "reply", "text": "The refund was declined."})
    llmock.delete("/_llmock/requests")
    section.get_by_role("button", name="Submit decisions").click()
    page.wait_for_url("**/inbox?done=*")
    sent = llmock.get("/_llmock/requests")["requests"][-1]["body"]["messages"]
    assert sent[-1]["content"] == "The call to 'refund' was rejected: order 72 was never paid"
    assert refunds(folder)[before:] == []
    page.context.close()


def test_hidden_and_bidi_characters_are_shown_escaped_with_a_warning(
    browser: Any,  # noqa: F811
    tools_gateway: Gateway,
    llmock: Peer,
) -> None:
    gateway = tools_gateway
    arguments = {"order": 73, "amount": 1, "note": "invoice_\u202efdp.exe"}
    pause_id, call_id = _paused(gateway, llmock, arguments, text="Refunding\u200b now.")
    page = reviewer_page(browser, gateway, "ada")
    section = page.locator(f"#pause-{pause_id}")
    seen = section.inner_text()
    assert "\u202e" not in seen
    assert "\u200b" not in seen
    assert '"note": "invoice_\\u202efdp.exe"' in section.locator("textarea").input_value()
    alerts = section.get_by_role("alert").all_inner_texts()
    assert alerts == [
        "Warning: hidden or direction-changing characters, shown as \\uXXXX: U+200B ZERO WIDTH SPACE. "
        "They run exactly as written.",
        "Warning: hidden or direction-changing characters, shown as \\uXXXX: U+202E RIGHT-TO-LEFT OVERRIDE. "
        "They run exactly as written.",
    ]
    assert section.locator(".said .ctl").first.inner_text() == "\\u200b"
    page.context.close()
    _reject(gateway, llmock, pause_id, call_id)
