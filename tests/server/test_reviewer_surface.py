"""The reviewer's surface, in-process: who may decide and from where, what the reviewer sees
(hidden characters escaped, the context of the call), what a decision answers, the consumer
view on every path, and the log lines a decision writes."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("beamfilter_server")

from server._app import AUTH, CHAT, REVIEW, app_client, ask, decide_when_listed, signed_in
from server._serve import API_KEY, PAUSE_KEY, REVIEWER_KEY
from starlette.testclient import TestClient

from beamfilter_builtins import approval_filter, redact_filter
from beamfilter_core import ChatRequest, ChatResponse, Kernel, Message, ScriptedModel, ToolCall, tool
from beamfilter_core._cli import main  # the CLI's exit code and message
from beamfilter_core.errors import ConfigError, InternalServerError
from beamfilter_server import ServerOptions, create_app
from beamfilter_server._commands import AccessLogFilter, check_literal_keys, mask_logs
from beamfilter_server._idempotency import IdempotencyKeys, fingerprint
from beamfilter_server._page import form_token

pytestmark = pytest.mark.packages

SECRET = "sk-abcdefghijklmnopqrstuvwx"
RLO_FILE = "invoice_\u202efdp.exe"


@pytest.fixture
def sent() -> list[str]:
    """What the ``send_file`` tool was called with, one entry per run."""
    return []


def _kernel(sent: list[str], script: list[Any], *filters: Any) -> Kernel:
    @tool(sensitive=True)
    def send_file(name: str, to: str) -> str:
        """Send a file from the shared drive to an outside address."""
        sent.append(name)
        return f"sent {name} to {to}"

    model = ScriptedModel(script, repeat=True)
    return Kernel(model, tools=[send_file], filters=[*filters, approval_filter()], pause_key=PAUSE_KEY)


def _after(request: ChatRequest) -> str:
    return f"done ({request.messages[-1].content}); the key was {SECRET}"


SEND = ChatResponse(
    Message(
        "assistant", "I will send the invoice now.", (ToolCall("send_file", {"name": RLO_FILE, "to": "x@y.z"}, "c1"),)
    ),
    finish_reason="tool_calls",
)


@pytest.fixture
def http(sent: list[str]) -> Iterator[TestClient]:
    kernel = _kernel(sent, [SEND, _after], redact_filter(applies_to="stream"))
    with app_client(kernel) as client:
        yield client


def _pause(http: TestClient, **headers: str) -> dict[str, Any]:
    answer = http.post(CHAT, json=ask("Send the invoice to x@y.z"), headers={**AUTH, **headers})
    assert answer.status_code == 202
    info: dict[str, Any] = answer.json()["beamfilter"]
    return info


def _approve_all(call: ToolCall, tool: Any, context: Any) -> str:
    return "approve"


# -- who may decide, and from where ------------------------------------------------------


def test_a_gateway_whose_filters_can_pause_needs_inbox_keys(sent: list[str]) -> None:
    kernel = _kernel(sent, ["hi"])
    with pytest.raises(ConfigError) as caught:
        create_app(kernel, ServerOptions(api_keys=[API_KEY], model_name="assistant"))
    assert str(caught.value) == (
        "[server] inbox_keys is missing, and approval can pause turns for a human decision. "
        'Give the reviewers\' keys as inbox_keys = [{ "$env" = "REVIEWER_KEY" }]; client keys '
        "(api_keys) never decide."
    )
    with pytest.raises(ConfigError, match=r"^\[server\] inbox_keys and api_keys share a key; give reviewers"):
        create_app(kernel, ServerOptions(api_keys=[API_KEY], inbox_keys=[API_KEY]))
    gated = Kernel(ScriptedModel(["hi"]), gate=_approve_all)
    with pytest.raises(ConfigError, match=r"and Kernel\(gate=\.\.\.\) can pause turns"):
        create_app(gated, ServerOptions())
    # no filter can pause: no reviewer is needed
    plain = TestClient(create_app(Kernel(ScriptedModel(["hi"])), ServerOptions(api_keys=[API_KEY], model_name="m")))
    with plain:
        assert plain.post(CHAT, json={**ask("hi"), "model": "m"}, headers=AUTH).status_code == 200
        # and with no reviewer key, the decision API takes no Basic credentials either
        assert plain.get("/v1/pauses", auth=("eve", API_KEY)).status_code == 200  # open: no reviewer keys at all


@pytest.mark.parametrize(
    ("server", "refused"),
    [
        ('api_keys = ["sk-literal-key-0123456789"]', "api_keys[0]"),
        ('inbox_keys = [{ "$env" = "R" }, "literal-reviewer-key-0123"]', "inbox_keys[1]"),
    ],
)
def test_keys_written_in_the_file_are_refused(tmp_path: Path, server: str, refused: str) -> None:
    config = tmp_path / "beamfilter.toml"
    config.write_text(f'[model]\nuse = "scripted"\n\n[server]\n{server}\n')
    with pytest.raises(ConfigError) as caught:
        check_literal_keys(config)
    assert str(caught.value) == (
        f'{config}: [server] {refused} is written in the file; give it as {{ "$env" = "NAME" }} '
        "so the key stays out of the file (or set allow_literal_keys = true)."
    )
    config.write_text(f'[model]\nuse = "scripted"\n\n[server]\nallow_literal_keys = true\n{server}\n')
    check_literal_keys(config)  # allowed on purpose
    config.write_text('[server]\napi_keys = [{ "$env" = "K" }]\n')
    check_literal_keys(config)
    check_literal_keys(tmp_path / "missing.toml")  # the config loader reports a missing file


def test_beamfilter_serve_refuses_literal_keys_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "beamfilter.toml"
    config.write_text('[model]\nuse = "scripted"\n\n[server]\napi_keys = ["sk-literal-key-0123456789"]\n')
    assert main(["serve", str(config)]) == 2
    err = capsys.readouterr().err
    assert "[server] api_keys[0] is written in the file" in err
    assert "sk-literal-key-0123456789" not in err


def test_the_json_decision_api_refuses_browser_credentials_and_other_content_types(
    http: TestClient, sent: list[str]
) -> None:
    info = _pause(http)
    decide = f"/v1/pauses/{info['pause_id']}/decide"
    body = json.dumps({"decisions": {"c1": "approve"}})
    # what another site's auto-submitted text/plain form sends with the reviewer's cached Basic credentials
    forged = http.post(decide, content=body, headers={**signed_in("ana"), "Content-Type": "text/plain"})
    assert (forged.status_code, forged.json()["error"]["code"]) == (401, "invalid_api_key")
    as_form = http.post(decide, content=body, headers={**REVIEW, "Content-Type": "text/plain"})
    assert (as_form.status_code, as_form.json()["error"]["code"]) == (415, "unsupported_media_type")
    assert as_form.json()["error"]["message"] == "Send the body as Content-Type: application/json (got 'text/plain')."
    listed = http.get("/v1/pauses", headers=REVIEW).json()["data"]
    assert [p["pause_id"] for p in listed] == [info["pause_id"]]
    assert sent == []


def test_a_decision_answers_its_outcome_or_409_and_422_at_once(http: TestClient, sent: list[str]) -> None:
    info = _pause(http)
    decide = f"/v1/pauses/{info['pause_id']}/decide"
    unknown = http.post(decide, json={"decisions": {"c9": "approve"}}, headers=REVIEW)
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (422, "decision_refused")
    assert unknown.json()["error"]["message"].startswith("The decision was refused: ")
    broken = {"c1": {"kind": "approve", "arguments": {"name": 7, "to": "x@y.z"}}}
    refused = http.post(decide, json={"decisions": broken}, headers=REVIEW)
    assert (refused.status_code, refused.json()["error"]["code"]) == (422, "decision_refused")
    assert http.get(f"/v1/pauses/{info['pause_id']}", headers=AUTH).json()["status"] == "pending"
    assert sent == []
    done = http.post(decide, json={"decisions": {"c1": "approve"}}, headers=REVIEW)
    assert done.status_code == 200
    answer = done.json()
    assert (answer["object"], answer["id"], answer["status"], answer["decided_by"]) == (
        "beamfilter.pause",
        info["pause_id"],
        "completed",
        "api",
    )
    assert answer["completion"]["choices"][0]["message"]["content"] == (
        f"done (sent {RLO_FILE} to x@y.z); the key was [REDACTED]"
    )
    again = http.post(decide, json={"decisions": {"c1": "reject"}}, headers=REVIEW)
    assert (again.status_code, again.json()["error"]["code"]) == (409, "already_decided")
    missing = http.post("/v1/pauses/p-none/decide", json={"decisions": {}}, headers=REVIEW)
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "unknown_pause")
    assert sent == [RLO_FILE]


# -- what the reviewer sees --------------------------------------------------------------


def test_hidden_characters_are_shown_escaped_and_run_byte_for_byte(http: TestClient, sent: list[str]) -> None:
    info = _pause(http)
    page = http.get("/inbox", headers=signed_in("ana")).text
    assert "\u202e" not in page  # never raw: it would show invoice_exe.pdf
    assert "&quot;name&quot;: &quot;invoice_\\u202efdp.exe&quot;" in page  # in the editable JSON
    assert (
        "Warning: hidden or direction-changing characters, shown as \\uXXXX: U+202E RIGHT-TO-LEFT OVERRIDE. "
        "They run exactly as written." in page
    )
    # approving the JSON as shown runs the call with the exact name
    shown = json.dumps({"name": RLO_FILE, "to": "x@y.z"}, indent=2, ensure_ascii=False).replace("\u202e", "\\u202e")
    form = {"token": form_token(REVIEWER_KEY, info["pause_id"]), "action:c1": "approve", "arguments:c1": shown}
    done = http.post(
        f"/inbox/{info['pause_id']}/decide",
        data=form,
        headers={**signed_in("ana"), "Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert (done.status_code, done.headers["location"]) == (303, f"/inbox?done={info['pause_id']}&status=completed")
    assert sent == [RLO_FILE]
    assert sent[0].encode() == b"invoice_\xe2\x80\xaefdp.exe"


def test_the_inbox_shows_the_context_of_the_decision(http: TestClient) -> None:
    info = _pause(http)
    page = http.get("/inbox", headers=signed_in("ana")).text
    assert '<div class="context">The user&#x27;s last message:<div class="said">Send the invoice to x@y.z</div>' in page
    assert (
        '<div class="context">The model, before the call:<div class="said">I will send the invoice now.</div>' in page
    )
    assert (
        '<div class="context">What the tool does:<div class="said">Send a file from the shared drive to an outside '
        "address.</div>" in page
    )
    assert (
        '<div class="paused-by">Paused by the filter <strong>approval</strong>: '
        "&#x27;send_file&#x27; is a sensitive tool: a human decides</div>" in page
    )
    # nothing is preselected: two radio buttons, neither checked
    assert page.count('name="action:c1"') == 2
    assert "checked" not in page
    assert "selected" not in page
    listed = http.get("/v1/pauses", headers=REVIEW).json()["data"]
    assert listed[0]["paused_by"] == {
        "c1": {"filter": "approval", "reason": "'send_file' is a sensitive tool: a human decides"}
    }
    assert listed[0]["pause_id"] == info["pause_id"]


# -- secrets on every path ---------------------------------------------------------------


def test_a_stream_only_redaction_holds_on_every_path(sent: list[str]) -> None:
    kernel = _kernel(sent, [f"plain {SECRET}", SEND, _after], redact_filter(applies_to="stream"))
    with app_client(kernel) as http:
        # a non-streamed answer
        plain = http.post(CHAT, json=ask("hi"), headers=AUTH).json()
        assert plain["choices"][0]["message"]["content"] == "plain [REDACTED]"
        # a poll result, once decided
        info = _pause(http)
        http.post(f"/v1/pauses/{info['pause_id']}/decide", json={"decisions": {"c1": "approve"}}, headers=REVIEW)
        polled = http.get(f"/v1/pauses/{info['pause_id']}", headers=AUTH).json()
        assert polled["completion"]["choices"][0]["message"]["content"].endswith("the key was [REDACTED]")
        # the answer after approval, sent to a waiting stream as one chunk
        kernel_2 = _kernel(sent, [SEND, _after], redact_filter(applies_to="stream"))
    with app_client(kernel_2) as http:
        reviewer = decide_when_listed(http, {"c1": "approve"})
        streamed = http.post(CHAT, json=ask("send", stream=True), headers={**AUTH, "Beamfilter-Wait": "30"})
        reviewer.join()
    assert SECRET not in streamed.text
    chunks = [json.loads(e[6:]) for e in streamed.text.split("\n\n") if e.startswith("data: {")]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.endswith("the key was [REDACTED]")


def test_an_upstream_error_and_a_reviewer_name_cannot_write_secrets_or_lines_to_the_log(
    sent: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    def upstream(request: ChatRequest) -> str:
        raise InternalServerError(f"invalid key Bearer {SECRET}", status_code=500)

    with caplog.at_level(logging.INFO, logger="beamfilter.server"):
        with app_client(_kernel(sent, [upstream])) as http:
            failed = http.post(CHAT, json=ask("hi"), headers=AUTH)
        with app_client(_kernel(sent, [SEND, "ok"])) as http:
            info = _pause(http)
            form = {"token": form_token(REVIEWER_KEY, info["pause_id"]), "all": "approve"}
            headers = {
                **signed_in("eve\nINFO beamfilter.server pause forged decided by admin"),
                "Origin": "http://testserver",
            }
            assert http.post(f"/inbox/{info['pause_id']}/decide", data=form, headers=headers).status_code == 200
    assert failed.status_code == 502
    lines = caplog.text.splitlines()
    assert "request failed: InternalServerError: HTTP 500: invalid key Bearer ***" in caplog.text
    assert SECRET not in caplog.text
    decided = [line for line in lines if "decided by" in line]
    assert len(decided) == 1
    assert decided[0].endswith(
        f"pause {info['pause_id']} decided by eve\\x0aINFO beamfilter.server pause forged decided by admin: completed"
    )


def test_the_access_log_drops_query_strings_and_every_line_is_masked() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/v1/models?api_key={SECRET}", "1.1", 200),
        None,
    )
    assert AccessLogFilter().filter(record)
    assert record.getMessage() == '127.0.0.1:5000 - "GET /v1/models HTTP/1.1" 200'
    odd = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, "%s", ("x",), None)
    assert AccessLogFilter().filter(odd)
    assert odd.getMessage() == "x"
    handler = logging.StreamHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        mask_logs()
        mask_logs()  # idempotent: one filter per handler
        assert sum(type(f).__name__ == "MaskingFilter" for f in handler.filters) == 1
        assert sum(isinstance(f, AccessLogFilter) for f in logging.getLogger("uvicorn.access").filters) == 1
    finally:
        root.removeHandler(handler)


# -- retries -------------------------------------------------------------------------------


def test_a_retry_with_the_same_idempotency_key_attaches_to_the_same_turn(http: TestClient, sent: list[str]) -> None:
    keyed = {**AUTH, "Idempotency-Key": "retry-0001"}
    first = http.post(CHAT, json=ask("Send the invoice"), headers=keyed)
    second = http.post(CHAT, json=ask("Send the invoice"), headers=keyed)
    assert (first.status_code, second.status_code) == (202, 202)
    pause_id = first.json()["beamfilter"]["pause_id"]
    assert second.json()["beamfilter"]["pause_id"] == pause_id
    # a streamed retry of the same request attaches too: its last chunk names the same pause
    streamed = http.post(CHAT, json=ask("Send the invoice"), headers=keyed)
    assert streamed.json()["beamfilter"]["pause_id"] == pause_id
    assert [p["pause_id"] for p in http.get("/v1/pauses", headers=REVIEW).json()["data"]] == [pause_id]
    other = http.post(CHAT, json=ask("Send another invoice"), headers=keyed)
    assert (other.status_code, other.json()["error"]) == (
        422,
        {
            "message": "Idempotency-Key was used with another request body; send a new key for a new request.",
            "type": "invalid_request_error",
            "param": "Idempotency-Key",
            "code": "idempotency_key_reused",
        },
    )
    http.post(f"/v1/pauses/{pause_id}/decide", json={"decisions": {"c1": "approve"}}, headers=REVIEW)
    # once decided, a retry gets the decided answer at once
    late = http.post(CHAT, json=ask("Send the invoice"), headers=keyed)
    assert late.status_code == 200
    assert late.json()["choices"][0]["message"]["content"].startswith(f"done (sent {RLO_FILE} to x@y.z)")
    assert sent == [RLO_FILE]
    for bad in ("", "a b", "x" * 256, "tab\there"):
        refused = http.post(CHAT, json=ask("hi"), headers={**AUTH, "Idempotency-Key": bad})
        assert (refused.status_code, refused.json()["error"]["param"]) == (400, "Idempotency-Key")


def test_a_streamed_request_and_its_retry_share_one_pause(http: TestClient) -> None:
    keyed = {**AUTH, "Idempotency-Key": "stream-0001"}
    body = ask("Send the invoice", stream=True)

    def last_chunk(text: str) -> dict[str, Any]:
        chunks = [json.loads(e[6:]) for e in text.split("\n\n") if e.startswith("data: {")]
        found: dict[str, Any] = chunks[-1]
        return found

    first = last_chunk(http.post(CHAT, json=body, headers=keyed).text)
    retry = last_chunk(http.post(CHAT, json=body, headers=keyed).text)
    assert first["choices"][0]["finish_reason"] == retry["choices"][0]["finish_reason"] == "paused"
    assert first["beamfilter"]["pause_id"] == retry["beamfilter"]["pause_id"]
    assert len(http.get("/v1/pauses", headers=REVIEW).json()["data"]) == 1


@pytest.mark.anyio
async def test_idempotency_keys_expire_are_bounded_and_forget_failed_turns() -> None:

    assert fingerprint({"b": 1, "a": [1, 2]}) == fingerprint({"a": [1, 2], "b": 1})
    keys: IdempotencyKeys[int] = IdempotencyKeys(ttl=3600, keep=2)
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(3)]
    for i, future in enumerate(futures):
        keys.start("c", f"k{i}", "d", future)
    assert (len(keys), repr(keys)) == (2, "IdempotencyKeys(2 keys)")
    assert keys.find("c", "k0", "d") is None  # the oldest was dropped
    assert keys.find("c", "k2", "d") is futures[2]
    assert keys.find("other-client", "k2", "d") is None  # keys are per client
    futures[2].set_exception(RuntimeError("upstream failed"))
    futures[2].exception()
    await asyncio.sleep(0)
    assert keys.find("c", "k2", "d") is None  # a failed turn is forgotten: the next retry runs anew
    futures[1].cancel()
    await asyncio.sleep(0)
    assert keys.find("c", "k1", "d") is None
    expiring: IdempotencyKeys[int] = IdempotencyKeys(ttl=0.0)
    done = loop.create_future()
    done.set_result(1)
    expiring.start("c", "k", "d", done)
    await asyncio.sleep(0.01)
    assert expiring.find("c", "k", "d") is None


# -- the gateway's other paths -------------------------------------------------------------


def test_a_resumed_turn_that_fails_answers_failed_with_its_error(sent: list[str]) -> None:
    def upstream_down(request: ChatRequest) -> str:
        raise InternalServerError(f"down, key {SECRET}", status_code=500)

    with app_client(_kernel(sent, [SEND, upstream_down])) as http:
        info = _pause(http)
        decided = http.post(
            f"/v1/pauses/{info['pause_id']}/decide", json={"decisions": {"c1": "approve"}}, headers=REVIEW
        )
        assert decided.status_code == 200
        assert decided.json() == {
            "object": "beamfilter.pause",
            "id": info["pause_id"],
            "status": "failed",
            "decided_by": "api",
            "error": {
                "message": "The upstream model failed (InternalServerError); see the gateway's log.",
                "status": 502,
                "type": "server_error",
                "code": "upstream_error",
            },
        }
        assert sent == [RLO_FILE]  # the tool ran; the model's next call failed
        polled = http.get(f"/v1/pauses/{info['pause_id']}", headers=AUTH).json()
        assert (polled["status"], polled["error"]["code"]) == ("failed", "upstream_error")


def test_a_waiting_client_follows_a_decision_that_pauses_again(sent: list[str]) -> None:
    with app_client(_kernel(sent, [SEND, _after])) as http:
        decided: list[str] = []

        def review() -> None:
            for _ in range(400):
                listed = http.get("/v1/pauses", headers=REVIEW).json()["data"]
                if listed and listed[0]["pause_id"] not in decided:
                    pause_id = listed[0]["pause_id"]
                    decided.append(pause_id)
                    # first an edit (the gate judges it again: a new pause), then an approval
                    edit = {"kind": "approve", "arguments": {"name": "invoice.pdf", "to": "x@y.z"}}
                    choice: Any = edit if len(decided) == 1 else "approve"
                    http.post(f"/v1/pauses/{pause_id}/decide", json={"decisions": {"c1": choice}}, headers=REVIEW)
                    if len(decided) == 2:
                        return
                threading.Event().wait(0.05)

        reviewer = threading.Thread(target=review)
        reviewer.start()
        answer = http.post(CHAT, json=ask("send it"), headers={**AUTH, "Beamfilter-Wait": "30"})
        reviewer.join()
    assert len(decided) == 2
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"].startswith("done (sent invoice.pdf to x@y.z)")
    assert sent == ["invoice.pdf"]


def test_a_poll_waits_then_answers_pending_and_a_closing_gateway_refuses_turns(http: TestClient) -> None:
    # a streamed request, and its retry, that wait for the decision say so first, then end paused
    keyed = {**AUTH, "Idempotency-Key": "wait-0001", "Beamfilter-Wait": "0.2"}

    def events(answer: Any) -> tuple[list[str], str]:
        parts = answer.text.split("\n\n")
        last = [json.loads(e[6:]) for e in parts if e.startswith("data: {")][-1]
        return [e for e in parts if e.startswith(": ")], last["beamfilter"]["pause_id"]

    comments, pause_id = events(http.post(CHAT, json=ask("again", stream=True), headers=keyed))
    assert comments == [f": waiting up to 0.2 s for the decision on pause {pause_id}"]
    assert events(http.post(CHAT, json=ask("again", stream=True), headers=keyed)) == (comments, pause_id)
    polled = http.get(f"/v1/pauses/{pause_id}?wait=0.3", headers=AUTH).json()
    assert (polled["object"], polled["status"]) == ("beamfilter.pause", "pending")
    gateway = http.app.state.gateway  # type: ignore[attr-defined]
    assert repr(gateway).startswith("Gateway(Kernel(")
    assert repr(gateway.board).startswith("LocalBoard(Inbox(")
    assert repr(gateway.answers) == "Answers(1 stream transforms)"
    gateway.closing = True
    closed = http.post(CHAT, json=ask("hi"), headers=AUTH)
    assert (closed.status_code, closed.json()["error"]["message"]) == (
        503,
        "The gateway is shutting down; retry on another instance.",
    )
    gateway.closing = False


def test_hidden_characters_in_the_conversation_and_in_nested_arguments_are_named(sent: list[str]) -> None:
    call = ToolCall("send_file", {"name": "a.pdf", "to": "x@y.z", "cc": ["b\u2066@y.z"]}, "c1")
    said = ChatResponse(Message("assistant", "Sending\u200b now.", (call,)), finish_reason="tool_calls")
    with app_client(_kernel(sent, [said, "ok"])) as http:
        http.post(CHAT, json=ask("Send a.pdf\u202e"), headers=AUTH)
        page = http.get("/inbox", headers=signed_in("ana")).text
    assert (
        '<div class="said">Sending<span class="ctl" title="U+200B ZERO WIDTH SPACE">\\u200b</span> now.</div>' in page
    )
    assert 'Send a.pdf<span class="ctl" title="U+202E RIGHT-TO-LEFT OVERRIDE">\\u202e</span>' in page
    assert "U+2066 LEFT-TO-RIGHT ISOLATE" in page  # inside a list argument
    assert "\u200b" not in page
    assert "\u2066" not in page
