"""Every refusal of the gateway's ASGI app, in-process: its HTTP status and OpenAI error
body, exactly, and the upstream or filter failures the turn ends with as HTTP errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("beamfilter_server")

from server._app import AUTH, CHAT, REVIEW, app_client, refund_tool
from server._serve import API_KEY, PAUSE_KEY, REVIEWER_KEY
from starlette.testclient import TestClient

from beamfilter_builtins import approval_filter
from beamfilter_core import ChatResponse, Kernel, ScriptedModel, ToolCall
from beamfilter_core.errors import (
    AlreadyResumedError,
    ConfigError,
    ConversationBusyError,
    FilterError,
    GatewayError,
    LimitExceeded,
    ProviderConnectionError,
    ProviderTimeoutError,
    RateLimitError,
    ResumeError,
)
from beamfilter_server._gateway import error_for

pytestmark = pytest.mark.packages

HELLO = {"model": "assistant", "messages": [{"role": "user", "content": "hello"}]}
JSON_AUTH = {**AUTH, "Content-Type": "application/json"}


def _client(script: list[Any], **options: Any) -> TestClient:
    kernel = Kernel(
        ScriptedModel(script),
        tools=[refund_tool([])],
        filters=[approval_filter()],
        pause_key=PAUSE_KEY,
    )
    return app_client(kernel, **options)


@pytest.fixture
def http() -> Iterator[TestClient]:
    with _client(["hi"]) as client:
        yield client


def _error(
    message: str, *, type: str = "invalid_request_error", param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def test_a_request_without_a_valid_key_is_401_with_a_bearer_challenge(http: TestClient) -> None:
    expected = _error("Incorrect or missing API key; send Authorization: Bearer <key>.", code="invalid_api_key")
    for headers in ({}, {"Authorization": "Bearer sk-not-the-key-0123456789"}, {"Authorization": "Basic eDp5"}):
        answer = http.post(CHAT, json=HELLO, headers=headers)
        assert (answer.status_code, answer.json()) == (401, expected)
        assert answer.headers["www-authenticate"] == "Bearer"
        assert API_KEY not in answer.text
    assert http.get("/v1/models").status_code == 401


def test_models_lists_the_one_served_model(http: TestClient) -> None:
    answer = http.get("/v1/models", headers=AUTH)
    assert answer.json() == {
        "object": "list",
        "data": [{"id": "assistant", "object": "model", "created": 0, "owned_by": "beamfilter"}],
    }


def test_a_body_that_is_not_json_is_400(http: TestClient) -> None:
    for raw in (b"{", b"\xff\xfe", b"[" * 100_000):
        answer = http.post(CHAT, content=raw, headers={**AUTH, "Content-Type": "application/json"})
        assert (answer.status_code, answer.json()) == (
            400,
            _error("The request body is not valid JSON.", code="invalid_json"),
        )


@pytest.mark.parametrize(
    ("route", "headers", "raw", "where"),
    [
        (
            CHAT,
            AUTH,
            b'{"model": "assistant", "messages": [{"role": "user", "content": "hi \\ud800"}]}',
            "messages[0].content",
        ),
        (CHAT, AUTH, b'{"model": "assistant", "user": "\\udfff", "messages": []}', "user"),
        (
            "/v1/pauses/p1/decide",
            REVIEW,
            b'{"decisions": {"call_1": {"kind": "reject", "reason": "\\ud83d"}}}',
            "decisions.call_1.reason",
        ),
        (CHAT, AUTH, b'{"\\ud800": 1}', "the body"),
    ],
)
def test_a_lone_surrogate_is_400_naming_where_on_every_json_route(
    http: TestClient, route: str, headers: dict[str, str], raw: bytes, where: str
) -> None:
    answer = http.post(route, content=raw, headers={**headers, "Content-Type": "application/json"})
    assert (answer.status_code, answer.json()) == (
        400,
        _error(
            f"{where} holds a lone surrogate (an unpaired \\ud800-\\udfff escape); send valid Unicode text.",
            param=where,
        ),
    )


def test_a_body_over_max_body_bytes_is_413_declared_or_streamed() -> None:
    expected = _error("The request body is larger than max_body_bytes=64.", code="request_too_large")
    with _client(["hi"], max_body_bytes=64) as http:
        declared = http.post(CHAT, content=b" " * 65, headers=JSON_AUTH)
        assert (declared.status_code, declared.json()) == (413, expected)
        # no Content-Length (chunked): counted while it is read
        streamed = http.post(CHAT, content=iter([b" " * 40, b" " * 40]), headers=JSON_AUTH)
        assert "content-length" not in streamed.request.headers
        assert (streamed.status_code, streamed.json()) == (413, expected)
        assert http.post(CHAT, content=b" " * 64, headers=JSON_AUTH).status_code == 400  # at the cap: read, not JSON


@pytest.mark.parametrize("media", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_json_route_refuses_any_other_content_type_with_415(http: TestClient, media: str | None) -> None:
    headers = {**AUTH, **({"Content-Type": media} if media else {})}
    answer = http.post(CHAT, content=b'{"model": "assistant"}', headers=headers)
    shown = repr(media or "none")
    assert (answer.status_code, answer.json()) == (
        415,
        _error(f"Send the body as Content-Type: application/json (got {shown}).", code="unsupported_media_type"),
    )
    with_charset = http.post(CHAT, json=HELLO, headers={**AUTH, "Content-Type": "application/json; charset=utf-8"})
    assert with_charset.status_code == 200


def test_unknown_routes_and_methods_answer_openai_errors(http: TestClient) -> None:
    missing = http.get("/v1/nothing-here", headers=AUTH)
    assert (missing.status_code, missing.json()) == (404, _error("No route '/v1/nothing-here'.", code="not_found"))
    wrong = http.get(CHAT, headers=AUTH)
    assert (wrong.status_code, wrong.json()) == (405, _error("Method not allowed."))


def test_another_model_name_is_404(http: TestClient) -> None:
    answer = http.post(CHAT, json={**HELLO, "model": "gpt-4o"}, headers=AUTH)
    assert answer.status_code == 404
    assert answer.json() == _error(
        "The model 'gpt-4o' does not exist; this gateway serves 'assistant'.", param="model", code="model_not_found"
    )


def test_a_malformed_conversation_id_or_wait_header_is_400(http: TestClient) -> None:
    bad_header = http.post(CHAT, json=HELLO, headers={**AUTH, "Beamfilter-Conversation": "../etc"})
    assert (bad_header.status_code, bad_header.json()) == (
        400,
        _error(
            "header Beamfilter-Conversation is '../etc'; send 1 to 200 letters, digits or _.:@/- "
            "(starting with a letter or digit).",
            param="header Beamfilter-Conversation",
        ),
    )
    bad_user = http.post(CHAT, json={**HELLO, "user": "x" * 201}, headers=AUTH)
    assert bad_user.status_code == 400
    assert bad_user.json()["error"]["param"] == "user"
    for raw in ("soon", "-1", "nan", "inf", "-inf", "301", "1e308", ""):
        answer = http.post(CHAT, json=HELLO, headers={**AUTH, "Beamfilter-Wait": raw})
        assert (answer.status_code, answer.json()) == (
            400,
            _error(
                f"header Beamfilter-Wait is {raw!r}; send a number of seconds from 0 to 300 (max_wait).",
                param="Beamfilter-Wait",
            ),
        )
    # the user field is matched whole: a trailing line break is not a conversation id
    for user in ("ticket-7\n", "ticket-7\r", "ticket 7", "\nticket"):
        refused = http.post(CHAT, json={**HELLO, "user": user}, headers=AUTH)
        assert (refused.status_code, refused.json()["error"]["param"]) == (400, "user")
        assert refused.json()["error"]["message"].startswith(f"user is {user!r}; send 1 to 200 letters")
    assert http.post(CHAT, json={**HELLO, "user": "ticket-7"}, headers=AUTH).status_code == 200


def test_polling_refuses_a_bad_wait_and_an_unknown_pause(http: TestClient) -> None:
    for raw in ("later", "nan", "NaN", "inf", "-1", "300.5", "1e999", ""):
        bad = http.get(f"/v1/pauses/p1?wait={raw}", headers=AUTH)
        assert (bad.status_code, bad.json()) == (
            400,
            _error(f"wait is {raw!r}; send a number of seconds from 0 to 300 (max_wait).", param="wait"),
        )
    unknown = http.get("/v1/pauses/p1", headers=AUTH)
    assert (unknown.status_code, unknown.json()) == (404, _error("No pause 'p1' is known here.", code="unknown_pause"))
    assert http.get("/v1/pauses/p1").status_code == 401


def test_the_reviewer_routes_refuse_a_client_key(http: TestClient) -> None:
    refused = _error(
        "Incorrect or missing reviewer key; send Authorization: Bearer <reviewer key>.", code="invalid_api_key"
    )
    listing = http.get("/v1/pauses", headers=AUTH)
    assert (listing.status_code, listing.json()) == (401, refused)
    decide = http.post("/v1/pauses/p1/decide", json={"decisions": {}}, headers=AUTH)
    assert (decide.status_code, decide.json()) == (401, refused)
    # the JSON API never takes the reviewer key as Basic credentials (a browser resends those)
    basic = ("ana", REVIEWER_KEY)
    assert http.get("/v1/pauses", auth=basic).status_code == 401
    assert http.post("/v1/pauses/p1/decide", json={"decisions": {}}, auth=basic).status_code == 401
    for page in ("/inbox", "/inbox/version"):
        login = http.get(page)
        assert login.status_code == 401
        assert login.headers["www-authenticate"] == 'Basic realm="beamfilter inbox", charset="UTF-8"'
        assert "The inbox needs a reviewer key" in login.text
    assert http.get("/v1/pauses", headers=REVIEW).json() == {"object": "list", "data": []}


@pytest.mark.parametrize(
    ("body", "status", "expected"),
    [
        ([], 400, _error("Send {'decisions': {CALL_ID: 'approve' | {...}}}.", param="decisions")),
        (
            {"decisions": ["approve"]},
            400,
            _error("Send {'decisions': {CALL_ID: 'approve' | {...}}}.", param="decisions"),
        ),
        (
            {"decisions": {"call_1": "yes"}},
            400,
            _error(
                "decisions.call_1 is \"yes\"; send 'approve', 'reject' or {'kind': ..., 'reason'/'arguments'}.",
                param="decisions.call_1",
            ),
        ),
        (
            {"decisions": {"call_1": {"kind": "approve", "arguments": [1]}}},
            400,
            _error("decisions.call_1.arguments must be an object.", param="decisions.call_1.arguments"),
        ),
        (
            {"decisions": {"call_1": {"kind": "reject", "reason": "no"}}},
            404,
            _error("No pause 'p1' is known here.", code="unknown_pause"),
        ),
    ],
)
def test_a_json_decision_is_checked_before_the_pause_is_looked_up(
    http: TestClient, body: Any, status: int, expected: dict[str, Any]
) -> None:
    answer = http.post("/v1/pauses/p1/decide", json=body, headers=REVIEW)
    assert (answer.status_code, answer.json()) == (status, expected)


def test_health_reports_ok_and_its_task_count(http: TestClient) -> None:
    answer = http.get("/healthz")
    assert answer.status_code == 200
    assert answer.json()["status"] == "ok"
    assert isinstance(answer.json()["tasks"], int)


def _failing(exc: Exception) -> Any:
    def answer(request: Any) -> ChatResponse:
        raise exc

    return answer


UPSTREAM = [
    (
        RateLimitError("slow down sk-upstream-secret-0123456789", status_code=429),
        429,
        _error("The upstream model is rate limited; retry later.", type="rate_limit_error"),
    ),
    (
        ProviderTimeoutError("read timed out"),
        504,
        _error("The upstream model timed out.", type="server_error", code="upstream_timeout"),
    ),
    (
        ProviderConnectionError("refused sk-upstream-secret-0123456789"),
        502,
        _error(
            "The upstream model failed (ProviderConnectionError); see the gateway's log.",
            type="server_error",
            code="upstream_error",
        ),
    ),
]


@pytest.mark.parametrize(("exc", "status", "expected"), UPSTREAM)
def test_an_upstream_failure_is_an_http_error_without_its_text(exc: Exception, status: int, expected: Any) -> None:
    with _client([_failing(exc)]) as http:
        answer = http.post(CHAT, json=HELLO, headers=AUTH)
    assert (answer.status_code, answer.json()) == (status, expected)
    assert "sk-upstream" not in answer.text


@pytest.mark.parametrize(("exc", "status", "expected"), UPSTREAM)
def test_a_stream_that_fails_before_its_first_chunk_gets_the_error_status(
    exc: Exception, status: int, expected: Any
) -> None:
    with _client([_failing(exc)]) as http:
        answer = http.post(CHAT, json={**HELLO, "stream": True}, headers=AUTH)
    assert (answer.status_code, answer.json()) == (status, expected)


def test_an_answer_over_max_answer_chars_is_502_or_ends_the_stream_with_the_error() -> None:
    too_long = _error("The answer is longer than max_answer_chars=10.", type="server_error", code="answer_too_large")
    with _client(["one two three four five six", "one two three four five six"], max_answer_chars=10) as http:
        answer = http.post(CHAT, json=HELLO, headers=AUTH)
        assert (answer.status_code, answer.json()) == (502, too_long)
        streamed = http.post(CHAT, json={**HELLO, "stream": True}, headers=AUTH)
    assert streamed.status_code == 200
    events = [line.removeprefix("data: ") for line in streamed.text.split("\n\n") if line]
    assert events[-1] == '{"error":{"message":"The answer is longer than max_answer_chars=10.",' + (
        '"type":"server_error","param":null,"code":"answer_too_large"}}'
    )
    assert "[DONE]" not in streamed.text
    texts = [e for e in events[:-1] if '"content":"' in e]
    assert len(texts) >= 2  # the role chunk, then the tokens sent before the cap


def test_error_for_maps_each_failure_to_its_status_and_never_its_text() -> None:
    gateway_error = GatewayError("gone", status=410)
    assert error_for(gateway_error) is gateway_error
    cases = [
        (LimitExceeded("tokens 900 > 500", limit="tokens", value=900, maximum=500), 429, "limit_exceeded"),
        (FilterError("boom sk-filter-secret-0123456789", "guard"), 500, "server_error"),
        (AlreadyResumedError("twice"), 409, "invalid_request_error"),
        (ResumeError("call_9 is not awaited"), 422, "invalid_request_error"),
        (ConversationBusyError("busy"), 409, "invalid_request_error"),
        (ConfigError("bad sk-config-secret-0123456789"), 500, "server_error"),
        (RuntimeError("sk-runtime-secret-0123456789"), 500, "server_error"),
    ]
    got = [(str(e := error_for(exc)), e.status, e.type, e.code) for exc, _, _ in cases]
    assert got == [
        ("tokens 900 > 500", 429, "limit_exceeded", "LimitExceeded"),
        ("The filter 'guard' failed; see the gateway's log.", 500, "server_error", "filter_error"),
        ("already decided: this pause was decided before.", 409, "invalid_request_error", "already_decided"),
        ("call_9 is not awaited", 422, "invalid_request_error", "decision_refused"),
        (
            "A decision on this conversation's pause is being carried out; send the turn again after it.",
            409,
            "invalid_request_error",
            "conversation_busy",
        ),
        ("The turn failed (ConfigError); see the gateway's log.", 500, "server_error", None),
        ("The turn failed (an internal error); see the gateway's log.", 500, "server_error", None),
    ]
    assert [(status, kind) for _, status, kind in cases] == [(s, t) for _, s, t, _ in got]


def test_an_internal_failure_is_500_and_logged_with_its_credentials_masked(caplog: pytest.LogCaptureFixture) -> None:
    failure = RuntimeError("cannot reach postgresql://app:hunter2@db/chats")
    with _client([_failing(failure)] * 2) as http:
        answer = http.post(CHAT, json=HELLO, headers=AUTH)
        streamed = http.post(CHAT, json={**HELLO, "stream": True}, headers=AUTH)
    expected = _error("The turn failed (an internal error); see the gateway's log.", type="server_error")
    assert (answer.status_code, answer.json()) == (500, expected)
    assert (streamed.status_code, streamed.json()) == (500, expected)
    assert [r.getMessage() for r in caplog.records if r.name == "beamfilter.server"] == [
        "request failed: RuntimeError: cannot reach postgresql://app:***@db/chats"
    ] * 2
    assert "hunter2" not in caplog.text + answer.text + streamed.text


def test_a_tool_call_answer_pauses_with_a_location_header() -> None:
    script = [ChatResponse.tool_calls(ToolCall("refund", {"order": 7, "amount": 30}, "call_1"))]
    with _client(script) as http:
        answer = http.post(CHAT, json=HELLO, headers=AUTH)
        assert answer.status_code == 202
        info = answer.json()["beamfilter"]
        assert answer.headers["location"] == info["poll"] == f"/v1/pauses/{info['pause_id']}"
        assert answer.json()["choices"][0]["finish_reason"] == "paused"
        pending = http.get(info["poll"], headers=AUTH).json()
        assert pending == {"object": "beamfilter.pause", "id": info["pause_id"], "status": "pending"}
        other = http.get(info["poll"], headers={"Authorization": "Bearer sk-x"})
        assert other.status_code == 401
