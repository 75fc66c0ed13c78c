"""A real ``beamfilter serve`` process under clients that give up and retry: the real
``openai`` client retrying with an Idempotency-Key leaves one pause, polls abandoned by
their clients leave no task behind, and what the gateway logs of a request (its query
string, an upstream error quoting a key) holds no secret."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import httpx
import openai
import pytest
from peers._peer import Peer
from server._serve import API_KEY, Gateway, refunds, reviewer, scenario

from beamfilter_core import ChatRequest, Message, OpenAIChatModel
from beamfilter_core.errors import InternalServerError

pytestmark = [pytest.mark.peers, pytest.mark.packages]

SECRET = "sk-upstreamleak0123456789abcdef"
REFUND = {"type": "reply", "tool_calls": [{"name": "refund", "arguments": {"order": 61, "amount": 12}}]}


def _pending(gateway: Gateway) -> dict[str, str]:
    """The pending pauses: their awaited call id, by pause id."""
    listed = httpx.get(gateway.url + "/v1/pauses", headers=reviewer(), timeout=10).json()["data"]
    return {p["pause_id"]: p["awaiting"][0]["id"] for p in listed}


def _ask(gateway: Gateway, key: str | None) -> None:
    """One ``create()`` whose client gives up after 1 s, twice retried, while the gateway
    holds the request up to 4 s for a decision (a turn without a conversation id)."""
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=API_KEY, timeout=1.0, max_retries=2)
    headers = {"Beamfilter-Wait": "4"}
    if key is not None:
        headers["Idempotency-Key"] = key
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "Refund 12 on order 61"}], extra_headers=headers
        )


def test_a_client_retrying_with_an_idempotency_key_leaves_one_pause(tools_gateway: Gateway, llmock: Peer) -> None:
    gateway, folder = tools_gateway, tools_gateway.folder
    before = len(refunds(folder))
    known = set(_pending(gateway))
    # without a key each of the three attempts runs a turn of its own: three pauses
    scenario(llmock, REFUND, REFUND, REFUND)
    _ask(gateway, None)
    plain = {k: v for k, v in _pending(gateway).items() if k not in known}
    assert len(plain) == 3
    # with one key the retries attach to the first attempt's turn
    scenario(llmock, REFUND, {"type": "reply", "text": "Refunded 12 on order 61."})
    llmock.delete("/_llmock/requests")
    key = f"refund-{uuid.uuid4()}"
    _ask(gateway, key)
    keyed = {k: v for k, v in _pending(gateway).items() if k not in known and k not in plain}
    assert len(keyed) == 1
    assert len(llmock.get("/_llmock/requests")["requests"]) == 1  # one turn asked the model once
    [(pause_id, call_id)] = keyed.items()
    approve = {"decisions": {call_id: "approve"}}
    decided = httpx.post(gateway.url + f"/v1/pauses/{pause_id}/decide", json=approve, headers=reviewer(), timeout=30)
    assert (decided.status_code, decided.json()["status"]) == (200, "completed")
    # one more retry of the same request gets the decided answer at once
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=API_KEY, timeout=10, max_retries=0)
    answer = client.chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": "Refund 12 on order 61"}],
        extra_headers={"Beamfilter-Wait": "4", "Idempotency-Key": key},
    )
    assert answer.choices[0].message.content == "Refunded 12 on order 61."
    assert refunds(folder)[before:] == [{"order": 61, "amount": 12}]
    for other, other_call in plain.items():  # leave the inbox as it was for the next tests
        scenario(llmock, {"type": "reply", "text": "Not refunded."})
        reject = {"decisions": {other_call: "reject"}}
        httpx.post(gateway.url + f"/v1/pauses/{other}/decide", json=reject, headers=reviewer(), timeout=30)
    assert set(_pending(gateway)) == known


def test_polls_abandoned_by_their_clients_leave_no_task_behind(tools_gateway: Gateway, llmock: Peer) -> None:
    gateway = tools_gateway
    scenario(llmock, REFUND)
    paused = gateway.post(
        "/v1/chat/completions",
        {"model": "assistant", "messages": [{"role": "user", "content": "Refund 12 on order 61"}]},
    )
    pause_id = paused.json()["beamfilter"]["pause_id"]
    for raw in ("nan", "inf", "-1", "1e9"):
        refused = gateway.get(f"/v1/pauses/{pause_id}?wait={raw}")
        assert (refused.status_code, refused.json()["error"]["param"]) == (400, "wait")
    baseline = httpx.get(gateway.url + "/healthz", timeout=10).json()["tasks"]

    def abandon() -> None:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(gateway.url + f"/v1/pauses/{pause_id}?wait=2", headers=gateway.headers(), timeout=0.3)

    threads = [threading.Thread(target=abandon) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    deadline = time.monotonic() + 10
    while (tasks := httpx.get(gateway.url + "/healthz", timeout=10).json()["tasks"]) > baseline:
        assert time.monotonic() < deadline, f"{tasks} tasks, {baseline} before the polls"
        time.sleep(0.2)
    listed = httpx.get(gateway.url + "/v1/pauses", headers=reviewer(), timeout=10).json()["data"]
    call_id = next(p for p in listed if p["pause_id"] == pause_id)["awaiting"][0]["id"]
    scenario(llmock, {"type": "reply", "text": "Not refunded."})
    reject = {"decisions": {call_id: {"kind": "reject", "reason": "test over"}}}
    httpx.post(gateway.url + f"/v1/pauses/{pause_id}/decide", json=reject, headers=reviewer(), timeout=30)


def test_the_log_holds_no_query_string_and_no_upstream_key(tools_gateway: Gateway, llmock: Peer) -> None:
    gateway = tools_gateway
    listed = httpx.get(gateway.url + f"/v1/models?api_key={SECRET}&x=1", headers=gateway.headers(), timeout=10)
    assert listed.status_code == 200
    scenario(llmock, *[{"type": "fail", "status": 500, "message": f"bad key Bearer {SECRET}"}] * 4)
    failed = gateway.post(
        "/v1/chat/completions", {"model": "assistant", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert failed.status_code == 502
    deadline = time.monotonic() + 10
    while "request failed: InternalServerError" not in gateway.output:
        assert time.monotonic() < deadline, gateway.output[-2000:]
        time.sleep(0.1)
    log = gateway.output
    assert '"GET /v1/models HTTP/1.1" 200' in log
    assert "api_key=" not in log
    assert SECRET not in log
    assert "request failed: InternalServerError: HTTP 500: bad key Bearer ***" in log


@pytest.mark.anyio
async def test_the_model_clients_retry_log_masks_the_key_an_upstream_error_quotes(
    llmock: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    scenario(llmock, *[{"type": "fail", "status": 500, "message": f"bad key Bearer {SECRET}"}] * 2)
    model = OpenAIChatModel(model="gpt-4o-mini", base_url=llmock.url + "/v1", api_key="llmock-key", max_retries=1)
    try:
        with (
            caplog.at_level(logging.INFO, logger="beamfilter.models.openai"),
            pytest.raises(InternalServerError) as failed,
        ):
            await model.complete(ChatRequest((Message.user("hi"),)))
    finally:
        await model.aclose()
    assert str(failed.value) == "HTTP 500: bad key Bearer ***"
    retries = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retry ")]
    assert len(retries) == 1
    assert retries[0].startswith("retry 1/1 in ")
    assert retries[0].endswith(" s after: HTTP 500: bad key Bearer ***")
    assert SECRET not in caplog.text
