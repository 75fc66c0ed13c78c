"""Two gateway apps in one process on one SQLite memory store, as two workers would be: a
pause made on A is listed, polled and decided on B, A's waiting client gets B's answer
through the store, and every second decision, on either app, is "already decided"."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("beamfilter_server")
pytest.importorskip("beamfilter_memory")

from server._app import AUTH, CHAT, REVIEW, app_client, refund_tool, signed_in
from server._serve import API_KEY, OTHER_KEY, PAUSE_KEY, REVIEWER_KEY
from starlette.testclient import TestClient

from beamfilter_builtins import approval_filter
from beamfilter_core import ChatRequest, ChatResponse, Kernel, ScriptedModel, ToolCall
from beamfilter_memory import memory_filter
from beamfilter_server import Gateway, ServerOptions, client_id
from beamfilter_server._page import form_token

pytestmark = pytest.mark.packages

TICKET = {**AUTH, "Beamfilter-Conversation": "ticket-9"}
ASK = {"model": "assistant", "messages": [{"role": "user", "content": "Refund 40 on order 9"}]}


def _answer(request: ChatRequest) -> ChatResponse | str:
    """Ask for the refund, then say what the tool answered."""
    last = request.messages[-1]
    if last.role == "tool":
        return f"done: {last.content}"
    return ChatResponse.tool_calls(ToolCall("refund", {"order": 9, "amount": 40}, "call_1"))


@pytest.fixture
def refunds() -> list[tuple[int, int]]:
    return []


@pytest.fixture
def worker(tmp_path: Path, refunds: list[tuple[int, int]]) -> Callable[[], TestClient]:
    """A factory of gateway apps on one SQLite store, as workers of one deployment."""
    store = f"sqlite:///{tmp_path / 'shared.db'}"

    def app() -> TestClient:
        filters = [memory_filter(store), approval_filter()]
        kernel = Kernel(
            ScriptedModel([_answer], repeat=True),
            tools=[refund_tool(refunds)],
            filters=filters,
            pause_key=PAUSE_KEY,
        )
        return app_client(kernel, api_keys=[API_KEY, OTHER_KEY])

    return app


@pytest.fixture
def workers(worker: Callable[[], TestClient]) -> Iterator[tuple[TestClient, TestClient]]:
    with worker() as a, worker() as b:
        yield a, b


def _listed(worker: TestClient) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = worker.get("/v1/pauses", headers=REVIEW).json()["data"]
    return data


def test_a_pause_made_on_one_app_is_decided_once_on_the_other(
    workers: tuple[TestClient, TestClient], refunds: list[tuple[int, int]]
) -> None:
    a, b = workers
    paused = a.post(CHAT, json=ASK, headers=TICKET)
    assert paused.status_code == 202
    pause_id = paused.json()["beamfilter"]["pause_id"]
    listed = _listed(b)
    assert [(p["pause_id"], p["conversation_id"], p["client"]) for p in listed] == [
        (pause_id, "ticket-9", client_id(API_KEY))
    ]
    # which filter paused each call travels in the signed pause: every worker shows it
    assert [p["paused_by"] for p in listed] == [
        {"call_1": {"filter": "approval", "reason": "'refund' is a sensitive tool: a human decides"}}
    ]
    assert _listed(a) == listed
    ada = signed_in("ada")
    assert f"client {client_id(API_KEY)} · conversation ticket-9" in b.get("/inbox", headers=ada).text
    assert isinstance(b.get("/inbox/version?since=0", headers=ada).json()["version"], int)
    assert b.get(f"/v1/pauses/{pause_id}", headers=AUTH).json()["status"] == "pending"
    other = {"Authorization": f"Bearer {OTHER_KEY}"}
    assert b.get(f"/v1/pauses/{pause_id}", headers=other).status_code == 404  # another client's pause

    decided = b.post(f"/v1/pauses/{pause_id}/decide", json={"decisions": {"call_1": "approve"}}, headers=REVIEW)
    # the decision answers with the resumed turn's outcome, not an acknowledgement
    assert decided.status_code == 200
    answer = decided.json()
    assert (answer["object"], answer["id"], answer["status"], answer["decided_by"]) == (
        "beamfilter.pause",
        pause_id,
        "completed",
        "api",
    )
    assert answer["completion"]["choices"][0]["message"]["content"] == "done: refunded 40 on order 9"
    outcome = a.get(f"/v1/pauses/{pause_id}?wait=20", headers=AUTH).json()
    assert (outcome["status"], outcome["decided_by"]) == ("completed", "api")
    assert outcome["completion"]["choices"][0]["message"]["content"] == "done: refunded 40 on order 9"
    assert a.get(f"/v1/pauses/{pause_id}", headers=other).status_code == 404

    already = f"already decided by api: pause {pause_id} is no longer pending."
    for worker in (a, b):
        again = worker.post(f"/v1/pauses/{pause_id}/decide", json={"decisions": {"call_1": "approve"}}, headers=REVIEW)
        assert (again.status_code, again.json()["error"]["message"]) == (409, already)
    form = {"token": form_token(REVIEWER_KEY, pause_id), "all": "approve"}
    page = {**ada, "Origin": "http://testserver"}
    stale = a.post(f"/inbox/{pause_id}/decide", data=form, headers=page, follow_redirects=False)
    assert stale.status_code == 409
    assert already in stale.text
    assert _listed(a) == _listed(b) == []
    assert refunds == [(9, 40)]


def test_a_client_waiting_on_one_app_gets_the_answer_decided_on_the_other(
    workers: tuple[TestClient, TestClient], refunds: list[tuple[int, int]]
) -> None:
    a, b = workers
    got: list[Any] = []
    waiting = threading.Thread(
        target=lambda: got.append(a.post(CHAT, json=ASK, headers={**TICKET, "Beamfilter-Wait": "30"}))
    )
    waiting.start()
    deadline = time.monotonic() + 30
    while not (listed := _listed(b)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(listed) == 1
    b.post(f"/v1/pauses/{listed[0]['pause_id']}/decide", json={"decisions": {"call_1": "approve"}}, headers=REVIEW)
    waiting.join(30)
    assert got[0].status_code == 200
    assert got[0].json()["choices"][0]["message"]["content"] == "done: refunded 40 on order 9"
    assert refunds == [(9, 40)]


def test_a_conversation_request_ending_with_the_assistant_is_400(workers: tuple[TestClient, TestClient]) -> None:
    a, _ = workers
    body = {**ASK, "messages": [*ASK["messages"], {"role": "assistant", "content": "Which order?"}]}
    answer = a.post(CHAT, json=body, headers=TICKET)
    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "message": "The request ends with an assistant message; send the next user message or tool results.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": None,
    }


@pytest.mark.anyio
async def test_a_shared_board_stops_waiting_for_changes_once_the_gateway_closes(tmp_path: Path) -> None:
    kernel = Kernel(
        ScriptedModel(["hi"]),
        filters=[memory_filter(f"sqlite:///{tmp_path / 'closing.db'}"), approval_filter()],
        pause_key=PAUSE_KEY,
    )
    gateway = Gateway(kernel, ServerOptions(inbox_keys=[REVIEWER_KEY]))
    board = gateway.board
    assert type(board).__name__ == "SharedBoard"
    assert repr(board).startswith("SharedBoard(SharedPauses(")
    version = await board.version()
    started = time.monotonic()
    assert await board.changed(version, 0.3) == version  # nothing changed: the full wait
    assert time.monotonic() - started >= 0.3
    board.inbox.close()
    started = time.monotonic()
    assert await board.changed(version, 30.0) == version  # closing: at once
    assert time.monotonic() - started < 1.0
    await kernel.aclose()


def test_a_wait_with_no_decision_ends_paused_after_looking_in_the_store(
    workers: tuple[TestClient, TestClient], refunds: list[tuple[int, int]]
) -> None:
    a, b = workers
    started = time.monotonic()
    answer = a.post(CHAT, json=ASK, headers={**TICKET, "Beamfilter-Wait": "0.4"})
    assert time.monotonic() - started >= 0.4
    assert answer.status_code == 202
    pause_id = answer.json()["beamfilter"]["pause_id"]
    polled = b.get(f"/v1/pauses/{pause_id}?wait=0.3", headers=AUTH).json()  # pending on the other worker
    assert polled["status"] == "pending"
    assert refunds == []


def test_pauses_without_a_conversation_stay_on_their_worker_and_a_third_worker_knows_decided_ones(
    worker: Callable[[], TestClient], refunds: list[tuple[int, int]]
) -> None:
    with worker() as a, worker() as b:
        # a turn without a conversation id is not stored: only its own worker lists and decides it
        local = a.post(CHAT, json=ASK, headers=AUTH).json()["beamfilter"]["pause_id"]
        assert [p["pause_id"] for p in _listed(a)] == [local]
        assert _listed(b) == []
        assert b.get(f"/v1/pauses/{local}", headers=AUTH).status_code == 404
        decided = a.post(f"/v1/pauses/{local}/decide", json={"decisions": {"call_1": "approve"}}, headers=REVIEW)
        assert (decided.status_code, decided.json()["status"]) == (200, "completed")
        assert a.get(f"/v1/pauses/{local}", headers=AUTH).json()["status"] == "completed"
        # a stored pause: arguments that break the schema are refused, and it is pending again for every worker
        stored = a.post(CHAT, json=ASK, headers=TICKET).json()["beamfilter"]["pause_id"]
        broken = {"decisions": {"call_1": {"kind": "approve", "arguments": {"order": "nine", "amount": 40}}}}
        refused = b.post(f"/v1/pauses/{stored}/decide", json=broken, headers=REVIEW)
        assert (refused.status_code, refused.json()["error"]["code"]) == (422, "decision_refused")
        assert [p["pause_id"] for p in _listed(a)] == [stored]
        assert (
            b.post(f"/v1/pauses/{stored}/decide", json={"decisions": {"call_1": "approve"}}, headers=REVIEW).json()[
                "status"
            ]
            == "completed"
        )
        with worker() as c:  # a worker that never saw the pause
            again = c.post(f"/v1/pauses/{stored}/decide", json={"decisions": {"call_1": "approve"}}, headers=REVIEW)
            assert (again.status_code, again.json()["error"]["message"]) == (
                409,
                f"already decided by api: pause {stored} is no longer pending.",
            )
            unknown = c.post("/v1/pauses/p-none/decide", json={"decisions": {}}, headers=REVIEW)
            assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "unknown_pause")
            assert c.get("/v1/pauses/p-none", headers=AUTH).status_code == 404
    assert refunds == [(9, 40), (9, 40)]
