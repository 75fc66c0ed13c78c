"""What the request parsers' property tests share: any JSON value, and the one outcome
every parser allows besides a parsed call (a 400 in OpenAI's error shape)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from beamfilter_core.errors import GatewayError

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
