"""What the wire and dialect tests share: any JSON value, the one outcome every request
parser allows besides a parsed call (a 400 in OpenAI's error shape), the gateway's chat
answer that the dialects translate, and an in-process gateway to send bodies to."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st
from starlette.testclient import TestClient

from beamfilter_core import Kernel, ScriptedModel
from beamfilter_core.errors import GatewayError
from beamfilter_server import ServerOptions, create_app

if TYPE_CHECKING:
    from beamfilter_server._wire import ChatCall

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


def parsed_or_refused(parse: Callable[[Any], ChatCall], body: Any) -> ChatCall | None:
    """``parse(body)``, or None when the parser refuses the body with a 400
    ``invalid_request_error`` whose message is a sentence; any other exception propagates."""
    try:
        return parse(body)
    except GatewayError as exc:
        refused = exc
    assert refused.status == 400
    assert refused.type == "invalid_request_error"
    assert str(refused).endswith(".")
    return None


def completion(message: dict[str, Any], finish: str, **extra: Any) -> dict[str, Any]:
    """The gateway's chat completion of one choice: ``message`` ending with ``finish``,
    12 + 5 tokens of usage, and ``extra`` top-level fields."""
    usage = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "model": "assistant",
        "choices": [choice],
        "usage": usage,
        **extra,
    }


@contextmanager
def fine_gateway(api_key: str) -> Iterator[TestClient]:
    """An in-process gateway that takes ``api_key`` and bodies up to 5000 bytes, over a
    model that answers every call with "fine"."""
    kernel = Kernel(ScriptedModel(["fine"], repeat=True))
    options = ServerOptions(api_keys=[api_key], model_name="assistant", max_body_bytes=5000)
    with TestClient(create_app(kernel, options)) as client:
        yield client
