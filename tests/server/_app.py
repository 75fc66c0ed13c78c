"""The in-process gateway of the server tests: ``create_app`` over a kernel in Starlette's
TestClient, with the test keys of ``_serve`` (the same keys as the served gateways), the
headers that send them, and the shop's sensitive ``refund`` tool."""

from __future__ import annotations

import base64
import threading
import time
from typing import Any

from server._serve import API_KEY, REVIEWER_KEY, reviewer
from starlette.testclient import TestClient

from beamfilter_core import Kernel, Tool, tool
from beamfilter_server import ServerOptions, create_app

#: The chat route of the OpenAI dialect.
CHAT = "/v1/chat/completions"
#: A client sending :data:`API_KEY`.
AUTH = {"Authorization": f"Bearer {API_KEY}"}
#: A reviewer calling the JSON decision API with :data:`REVIEWER_KEY`.
REVIEW = reviewer()


def ask(text: str, **fields: Any) -> dict[str, Any]:
    """A chat request to the model ``assistant`` of one user message, plus ``fields``."""
    return {"model": "assistant", "messages": [{"role": "user", "content": text}], **fields}


def signed_in(name: str, key: str = REVIEWER_KEY) -> dict[str, str]:
    """The headers of a reviewer signed in to the inbox page: any name, the key as password."""
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{key}".encode()).decode()}


def refund_tool(refunds: list[tuple[int, int]]) -> Tool:
    """The sensitive ``refund(order, amount)`` tool; each run appends ``(order, amount)``
    to ``refunds``."""

    @tool(sensitive=True)
    def refund(order: int, amount: int) -> str:
        """Refund an amount on an order."""
        refunds.append((order, amount))
        return f"refunded {amount} on order {order}"

    return refund


def app_options(**options: Any) -> ServerOptions:
    """The options of the in-process test gateways: :data:`API_KEY` as the client key,
    :data:`REVIEWER_KEY` as the reviewer key and the model name ``assistant``; ``options``
    add to them or replace them."""
    return ServerOptions(**{"api_keys": [API_KEY], "inbox_keys": [REVIEWER_KEY], "model_name": "assistant", **options})


def app_client(kernel: Kernel, **options: Any) -> TestClient:
    """A TestClient of the gateway over ``kernel`` with :func:`app_options` (``options`` add
    or replace); ``with app_client(...) as http`` starts the app and stops it after."""
    return TestClient(create_app(kernel, app_options(**options)))


def decide_when_listed(http: TestClient, decisions: dict[str, Any]) -> threading.Thread:
    """A reviewer on another thread (started, for the test to join) who sends ``decisions``
    for the first pause the JSON listing shows, as soon as it shows one (30 s at most)."""

    def decide() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            listed = http.get("/v1/pauses", headers=REVIEW).json()["data"]
            if listed:
                http.post(f"/v1/pauses/{listed[0]['pause_id']}/decide", json={"decisions": decisions}, headers=REVIEW)
                return
            time.sleep(0.05)

    reviewer = threading.Thread(target=decide)
    reviewer.start()
    return reviewer
