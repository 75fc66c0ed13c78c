"""Two real ``beamfilter serve`` processes on one store (a PostgreSQL server, one SQLite
file): a pause made by worker A is in worker B's inbox, B approves it, A's waiting client
gets the resumed answer, the tool ran once, a second decision on either worker is "already
decided", and a client polling either worker sees the outcome."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from memory.conftest import postgres_url  # noqa: F401  # the PostgreSQL server of the memory tests
from peers._peer import Peer
from server._serve import (
    API_KEY,
    OTHER_KEY,
    PAUSE_KEY,
    Gateway,
    listed_pauses,
    refunds,
    reviewer,
    scenario,
    shop_config,
    start,
)

from beamfilter_server import client_id

pytestmark = [pytest.mark.peers, pytest.mark.services, pytest.mark.packages]


def _config(folder: Path, llmock: Peer, store: str) -> Path:
    return shop_config(
        folder,
        llmock.url,
        f"""
        [[filters]]
        use = "memory"
        store = "{store}"

        [[filters]]
        use = "approval"
        """,
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_any_worker_lists_and_decides_any_pause_once(
    kind: str, llmock: Peer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = f"sqlite:///{tmp_path / 'shared.db'}" if kind == "sqlite" else request.getfixturevalue("postgres_url")
    config = _config(tmp_path, llmock, store)
    env = {"BF_TEST_PAUSE_KEY": PAUSE_KEY}
    a, b = start(config, env=env), start(config, env=env)
    try:
        _one_pause_across_workers(a, b, llmock, tmp_path)
    finally:
        assert a.stop() in (0, -15)
        assert b.stop() in (0, -15)
    for worker in (a, b):
        assert API_KEY not in worker.output
        assert OTHER_KEY not in worker.output


def _one_pause_across_workers(a: Gateway, b: Gateway, llmock: Peer, folder: Path) -> None:
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "refund", "arguments": {"order": 9, "amount": 40}}]},
        {"type": "reply", "text": "Refunded 40 on order 9."},
    )
    got: list[Any] = []
    client = openai.OpenAI(base_url=a.url + "/v1", api_key=API_KEY, max_retries=0, timeout=90)

    def ask() -> None:
        got.append(
            client.chat.completions.create(
                model="assistant",
                messages=[{"role": "user", "content": "Refund 40 on order 9"}],
                extra_headers={"Beamfilter-Wait": "60", "Beamfilter-Conversation": "ticket-9"},
            )
        )

    waiting = threading.Thread(target=ask)
    waiting.start()
    listed = listed_pauses(b, waiting, 60)  # worker B lists the pause worker A made
    assert [(p["conversation_id"], p["client"]) for p in listed] == [("ticket-9", client_id(API_KEY))]
    pause_id, call_id = listed[0]["pause_id"], listed[0]["awaiting"][0]["id"]
    # which filter paused each call travels in the signed pause: worker B shows it too
    assert [p["paused_by"] for p in listed] == [
        {call_id: {"filter": "approval", "reason": "'refund' is a sensitive tool: a human decides"}}
    ]
    assert httpx.get(a.url + "/v1/pauses", headers=reviewer(), timeout=10).json()["data"] == listed
    page = httpx.get(b.url + "/inbox", auth=("ada", reviewer()["Authorization"][7:]), timeout=10).text
    assert f"client {client_id(API_KEY)} · conversation ticket-9" in page
    assert b.get(f"/v1/pauses/{pause_id}").json()["status"] == "pending"
    assert waiting.is_alive()
    assert refunds(folder) == []

    approve = {"decisions": {call_id: "approve"}}
    decided = httpx.post(b.url + f"/v1/pauses/{pause_id}/decide", json=approve, headers=reviewer(), timeout=30)
    assert (decided.status_code, decided.json()["status"]) == (200, "completed")
    for worker in (a, b):  # a second decision, on either worker: already decided, nothing runs
        again = httpx.post(worker.url + f"/v1/pauses/{pause_id}/decide", json=approve, headers=reviewer(), timeout=10)
        assert again.status_code == 409
        assert again.json()["error"]["message"] == f"already decided by api: pause {pause_id} is no longer pending."
    waiting.join(60)
    assert not waiting.is_alive()
    assert got[0].choices[0].message.content == "Refunded 40 on order 9."
    assert got[0].choices[0].finish_reason == "stop"
    assert refunds(folder) == [{"order": 9, "amount": 40}]
    for worker in (a, b):  # the outcome is polled on either worker; another client's key does not see it
        outcome = worker.get(f"/v1/pauses/{pause_id}?wait=10").json()
        assert (outcome["status"], outcome["decided_by"]) == ("completed", "api")
        assert outcome["completion"]["choices"][0]["message"]["content"] == "Refunded 40 on order 9."
        other = httpx.get(
            worker.url + f"/v1/pauses/{pause_id}", headers={"Authorization": f"Bearer {OTHER_KEY}"}, timeout=10
        )
        assert other.status_code == 404
        assert httpx.get(worker.url + "/v1/pauses", headers=reviewer(), timeout=10).json()["data"] == []
    assert refunds(folder) == [{"order": 9, "amount": 40}]
