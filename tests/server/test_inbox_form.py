"""The inbox's decision form and a client waiting on its paused turn, on the gateway's ASGI
app in-process: each refusal of the form, approval with edited arguments, rejection with a
reason, and a non-streamed or streamed request answered once a reviewer decides."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("beamfilter_server")

from server._app import AUTH, CHAT, REVIEW, app_client, ask, decide_when_listed, refund_tool, signed_in
from server._serve import PAUSE_KEY, REVIEWER_KEY
from starlette.testclient import TestClient

from beamfilter_builtins import approval_filter
from beamfilter_core import ChatRequest, ChatResponse, Decision, Kernel, ScriptedModel, ToolCall
from beamfilter_server._page import form_token

pytestmark = pytest.mark.packages

#: A reviewer signing in to the inbox page.
SIGNED_IN = signed_in("ana")
REFUND = ChatResponse.tool_calls(ToolCall("refund", {"order": 7, "amount": 30}, "call_1"))


def _after_tool(request: ChatRequest) -> str:
    """The answer once the tool ran or was refused: what the tool said, or the refusal."""
    return f"done: {request.messages[-1].content}"


def _over_25(name: str, arguments: dict[str, Any]) -> bool | Decision:
    return True if arguments["amount"] <= 25 else Decision.pause("refunds over 25 need a human")


@pytest.fixture
def refunds() -> list[tuple[int, int]]:
    return []


@pytest.fixture
def http(refunds: list[tuple[int, int]]) -> Iterator[TestClient]:
    model = ScriptedModel([REFUND, _after_tool], repeat=True)
    # refunds over 25 wait for a human: an edit to 25 or less passes the gate when it is asked again
    gate = approval_filter(approve=_over_25)
    kernel = Kernel(model, tools=[refund_tool(refunds)], filters=[gate], pause_key=PAUSE_KEY)
    with app_client(kernel, max_body_bytes=4000) as client:
        yield client


def _pause(http: TestClient) -> str:
    answer = http.post(CHAT, json=ask("refund order 7"), headers=AUTH)
    assert answer.status_code == 202
    pause_id: str = answer.json()["beamfilter"]["pause_id"]
    return pause_id


def _submit(http: TestClient, pause_id: str, form: dict[str, str], origin: str | None = "http://testserver") -> Any:
    """The inbox form as the reviewer's browser posts it (with its Origin, unless None)."""
    fields = {"token": form_token(REVIEWER_KEY, pause_id), **form}
    headers = {**SIGNED_IN, **({"origin": origin} if origin is not None else {})}
    return http.post(f"/inbox/{pause_id}/decide", data=fields, headers=headers, follow_redirects=False)


def _outcome(http: TestClient, pause_id: str) -> dict[str, Any]:
    body: dict[str, Any] = http.get(f"/v1/pauses/{pause_id}?wait=20", headers=AUTH).json()
    return body


def test_the_inbox_lists_the_pause_and_its_version_changes_with_it(http: TestClient) -> None:
    empty = http.get("/inbox/version?since=x", headers=SIGNED_IN).json()["version"]
    pause_id = _pause(http)
    page = http.get("/inbox", headers=SIGNED_IN)
    assert page.status_code == 200
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    assert f"pause-{pause_id}" in page.text
    assert form_token(REVIEWER_KEY, pause_id) in page.text
    listed = http.get("/inbox/version?since=-1", headers=SIGNED_IN).json()["version"]
    assert listed != empty
    assert (
        http.get("/inbox", headers={"Authorization": "Basic " + base64.b64encode(b"ana:wrong").decode()}).status_code
        == 401
    )


def test_the_form_is_refused_from_another_site_stale_too_large_or_for_an_unknown_pause(
    http: TestClient, refunds: list[tuple[int, int]]
) -> None:
    pause_id = _pause(http)
    refused = "The form came from another site (or without its Origin)."
    cross_site = _submit(http, pause_id, {"all": "approve"}, origin="https://evil.example")
    assert (cross_site.status_code, refused in cross_site.text) == (403, True)
    no_origin = _submit(http, pause_id, {"all": "approve"}, origin=None)
    assert (no_origin.status_code, refused in no_origin.text) == (403, True)
    stale = _submit(http, pause_id, {"token": form_token("another-reviewer-key-0123", pause_id)})
    assert (stale.status_code, "The form is stale or not yours; reload the inbox." in stale.text) == (403, True)
    large = _submit(http, pause_id, {"reason:call_1": "x" * 5000})
    assert (large.status_code, "The form is too large." in large.text) == (413, True)
    unknown = _submit(http, "p-unknown", {})
    assert (unknown.status_code, "No pause &#x27;p-unknown&#x27; is known here." in unknown.text) == (404, True)
    assert refunds == []
    assert _submit(http, pause_id, {"all": "approve"}).status_code == 303  # its own page: accepted


@pytest.mark.parametrize(
    ("form", "text"),
    [
        (
            {"action:call_1": "maybe"},
            "The decision for call call_1 is &#x27;maybe&#x27;; choose approve or reject and submit again.",
        ),
        # nothing is preselected: no choice, or a reason without one, is refused
        ({}, "The decision for call call_1 was not chosen; choose approve or reject and submit again."),
        (
            {"reason:call_1": "not paid"},
            "The decision for call call_1 was not chosen (a reason was given: choose reject to send it); "
            "choose approve or reject and submit again.",
        ),
        (
            {"all": "approve", "reason:call_1": "not paid"},
            "Call call_1 is approved with a reason; a reason goes with a rejection. Clear it or reject.",
        ),
        (
            {"action:call_1": "approve", "arguments:call_1": "{order: 7"},
            "The arguments of call call_1 are not JSON; fix them and submit again.",
        ),
        (
            {"action:call_1": "approve", "arguments:call_1": "[7, 30]"},
            "The arguments of call call_1 must be a JSON object.",
        ),
    ],
)
def test_a_malformed_form_decision_is_400_and_the_pause_stays_pending(
    http: TestClient, refunds: list[tuple[int, int]], form: dict[str, str], text: str
) -> None:
    pause_id = _pause(http)
    refused = _submit(http, pause_id, form)
    assert refused.status_code == 400
    assert text in refused.text
    assert [p["pause_id"] for p in http.get("/v1/pauses", headers=REVIEW).json()["data"]] == [pause_id]
    assert refunds == []


def test_approving_with_edited_arguments_runs_the_edited_call_once(
    http: TestClient, refunds: list[tuple[int, int]]
) -> None:
    pause_id = _pause(http)
    form = {"action:call_1": "approve", "arguments:call_1": '{"order": 7, "amount": 20}'}
    # an edit is confirmed first, on a page showing what changed
    confirm = _submit(http, pause_id, form)
    assert confirm.status_code == 200
    assert "<h1>Confirm the edited arguments</h1>" in confirm.text
    assert "<tr><td>amount</td><td>30</td><td>20</td></tr>" in confirm.text, (
        "the diff shows the argument as the model sent it and as edited"
    )
    assert "<td>order</td>" not in confirm.text  # unchanged arguments are not listed
    assert refunds == []
    done = _submit(http, pause_id, {**form, "confirm": "1"})
    assert (done.status_code, done.headers["location"]) == (303, f"/inbox?done={pause_id}&status=completed")
    outcome = _outcome(http, pause_id)
    assert (outcome["status"], outcome["decided_by"]) == ("completed", "ana")
    assert outcome["completion"]["choices"][0]["message"]["content"] == "done: refunded 20 on order 7"
    assert refunds == [(7, 20)]
    again = _submit(http, pause_id, {"all": "approve"})
    assert again.status_code == 409
    assert "Already decided" in again.text
    flash = http.get(f"/inbox?done={pause_id}&status=completed", headers=SIGNED_IN)
    assert f"Pause {pause_id}: decided; its turn completed." in flash.text


def test_unchanged_arguments_approve_the_call_as_asked(http: TestClient, refunds: list[tuple[int, int]]) -> None:
    pause_id = _pause(http)
    unchanged = json.dumps({"amount": 30, "order": 7})
    assert _submit(http, pause_id, {"action:call_1": "approve", "arguments:call_1": unchanged}).status_code == 303
    assert _outcome(http, pause_id)["status"] == "completed"
    assert refunds == [(7, 30)]


def test_rejecting_every_call_with_a_reason_runs_nothing(http: TestClient, refunds: list[tuple[int, int]]) -> None:
    pause_id = _pause(http)
    assert _submit(http, pause_id, {"all": "reject", "reason:call_1": "  over the limit  "}).status_code == 303
    outcome = _outcome(http, pause_id)
    assert outcome["status"] == "completed"
    assert "over the limit" in outcome["completion"]["choices"][0]["message"]["content"]
    assert refunds == []


def test_a_client_waiting_with_beamfilter_wait_gets_the_decided_answer(
    http: TestClient, refunds: list[tuple[int, int]]
) -> None:
    reviewer = decide_when_listed(http, {"call_1": "approve"})
    answer = http.post(CHAT, json=ask("refund order 7"), headers={**AUTH, "Beamfilter-Wait": "30"})
    reviewer.join()
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "done: refunded 30 on order 7"
    assert answer.json()["choices"][0]["finish_reason"] == "stop"
    assert refunds == [(7, 30)]


def test_a_streamed_client_waiting_gets_a_comment_then_the_decided_answer(
    http: TestClient, refunds: list[tuple[int, int]]
) -> None:
    reviewer = decide_when_listed(http, {"call_1": {"kind": "approve", "arguments": {"order": 7, "amount": 5}}})
    body = {**ask("refund order 7"), "stream": True, "stream_options": {"include_usage": True}}
    answer = http.post(CHAT, json=body, headers={**AUTH, "Beamfilter-Wait": "30"})
    reviewer.join()
    events = [e for e in answer.text.split("\n\n") if e]
    comments = [e for e in events if e.startswith(": ")]
    assert len(comments) == 1
    assert comments[0].startswith(": waiting up to 30 s for the decision on pause ")
    chunks = [json.loads(e.removeprefix("data: ")) for e in events if e.startswith("data: {")]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "done: refunded 5 on order 7"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] is not None
    assert events[-1] == "data: [DONE]"
    assert refunds == [(7, 5)]
