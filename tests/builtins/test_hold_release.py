"""hold_release: hold the stream, check at the end, release or replace."""

from __future__ import annotations

import pytest

from beamfilter_builtins import hold_release_filter
from beamfilter_builtins._hold_release import SPEC
from beamfilter_core import ChatRequest, ChatResponse, Kernel, ScriptedModel
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


def test_release_in_order_and_replace() -> None:
    checked: list[str] = []

    def check(text: str) -> str | None:
        checked.append(text)
        return "[withheld]" if "bad" in text else None

    transform = hold_release_filter(check).token
    assert transform is not None
    state = transform.new_state()
    for token in ["a ", "b ", "c"]:
        out, state = transform.step(token, state)
        assert list(out) == []
    assert transform.flush is not None
    assert list(transform.flush(state)) == ["a ", "b ", "c"]
    state = transform.new_state()
    for token in ["so ", "bad"]:
        out, state = transform.step(token, state)
    assert list(transform.flush(state)) == ["[withheld]"]
    assert list(transform.flush(transform.new_state())) == []
    assert checked == ["a b c", "so bad"]


async def test_streaming_release_and_block() -> None:
    def check(text: str) -> str | None:
        return "[withheld]" if "secret" in text else None

    kernel = Kernel(ScriptedModel(["all fine here", "the secret plan"]), filters=[hold_release_filter(check)])
    result, streamed = await run_turn(kernel, "hi", True)
    assert streamed == "all fine here"
    assert result.text == "all fine here"
    result, streamed = await run_turn(kernel, "hi", True)
    assert streamed == "[withheld]"
    assert result.text == "the secret plan"  # applies_to="stream": delivery only


async def test_answer_scope_replaces_the_answer(stream: bool) -> None:
    flt = hold_release_filter(lambda text: "[withheld]", applies_to="answer")
    result, streamed = await run_turn(Kernel(ScriptedModel(["x y z"]), filters=[flt]), "hi", stream)
    assert result.text == "[withheld]"
    assert streamed in (None, "[withheld]")


async def test_error_releases_nothing() -> None:
    class Failing(ScriptedModel):
        async def stream(self, request: ChatRequest, on_token: object) -> ChatResponse:
            on_token("partial ")  # type: ignore[operator]
            on_token("answer")  # type: ignore[operator]
            raise RuntimeError("stream broke")

    kernel = Kernel(Failing(["x"]), filters=[hold_release_filter(lambda text: None)])
    events = []
    with pytest.raises(RuntimeError, match="stream broke"):  # noqa: PT012  # drain until the error
        async for event in kernel.run_stream("hi"):
            events.append(event)
    assert events == []


def test_bad_check_result_and_options() -> None:
    transform = hold_release_filter(lambda text: 42).token  # type: ignore[arg-type,return-value]
    assert transform is not None
    assert transform.flush is not None
    _out, state = transform.step("x", transform.new_state())
    with pytest.raises(ConfigError, match="returned 42; return None"):
        transform.flush(state)
    with pytest.raises(ConfigError, match="applies_to='x'"):
        hold_release_filter(lambda t: None, applies_to="x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="import path like"):
        hold_release_filter("nocolon")
    flt = hold_release_filter("json:dumps")
    assert flt.token is not None
    assert SPEC.name == "hold_release"
    assert tuple(SPEC.scopes) == ("token",)


def test_async_check_is_refused_at_construction() -> None:
    async def check(text: str) -> str | None:
        return None

    with pytest.raises(ConfigError, match="is async; token transforms run synchronously"):
        hold_release_filter(check)
