"""An error is blamed on the filter whose code raised it, by where its hook sits in the
chain, whatever shape the hook has; errors of the model, the tools and other filters
pass through unchanged."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from beamfilter_core import ChatRequest, ChatResponse, Filter, Kernel, ScriptedModel, TokenTransform, ToolCall, tool
from beamfilter_core.errors import ConfigError, FilterError, LimitExceeded, ProviderError, ScriptExhaustedError
from beamfilter_core.testing import collect_stream, passthrough

Next = Callable[[Any], Awaitable[Any]]


def _raising_on(word: str) -> Callable[..., Awaitable[Any]]:
    async def hook(request: ChatRequest, state: dict[str, Any], call_next: Next) -> Any:
        if word in request.messages[-1].text:
            raise ValueError(f"{word!r} refused")
        return await call_next(request)

    return hook


def _blamed(kernel: Kernel, text: str) -> FilterError:
    with pytest.raises(FilterError) as info:
        kernel.run_sync(text)
    return info.value


class CallableGuard:
    """A hook that is an object with an async ``__call__``: every instance shares its code."""

    def __init__(self, banned: str) -> None:
        self.banned = banned

    async def __call__(self, request: ChatRequest, state: dict[str, Any], call_next: Next) -> Any:
        if self.banned in request.messages[-1].text:
            raise ValueError(f"{self.banned!r} refused")
        return await call_next(request)


def test_callable_object_hooks_are_blamed_on_their_own_filter() -> None:
    kernel = Kernel(
        ScriptedModel(["ok"], repeat=True),
        filters=[
            Filter("outer", around_chat=passthrough),
            Filter("first", around_chat=CallableGuard("x")),
            Filter("second", around_chat=CallableGuard("y")),
        ],
    )
    for text, name in (("x", "first"), ("y", "second"), ("xy", "first")):
        error = _blamed(kernel, text)
        assert (error.filter_name, str(error)) == (name, f"Filter {name!r} raised ValueError: {text[0]!r} refused")
        assert isinstance(error.__cause__, ValueError)
    assert kernel.run_sync("z").text == "ok"


async def _partial_hook(word: str, request: ChatRequest, state: dict[str, Any], call_next: Next) -> Any:
    if word in request.messages[-1].text:
        raise ValueError(f"{word!r} refused")
    return await call_next(request)


def test_a_functools_partial_hook_that_raises_is_named() -> None:
    kernel = Kernel(
        ScriptedModel(["ok"], repeat=True),
        filters=[
            Filter("p1", around_chat=functools.partial(_partial_hook, "a")),
            Filter("p2", around_chat=functools.partial(_partial_hook, "b")),
        ],
    )
    assert (_blamed(kernel, "a").filter_name, _blamed(kernel, "b").filter_name) == ("p1", "p2")
    assert str(_blamed(kernel, "b")) == "Filter 'p2' raised ValueError: 'b' refused"


def test_a_partial_hook_raising_a_typed_error_keeps_its_type_and_gets_the_name() -> None:
    async def limiter(maximum: int, request: Any, state: dict[str, Any], call_next: Next) -> Any:
        raise LimitExceeded("too many", limit="model_calls", value=maximum + 1, maximum=maximum)

    kernel = Kernel(ScriptedModel(["x"]), filters=[Filter("limits", around_turn=functools.partial(limiter, 2))])
    with pytest.raises(LimitExceeded) as info:
        kernel.run_sync("go")
    assert (info.value.filter_name, info.value.value) == ("limits", 3)


def test_a_typed_error_that_already_names_a_filter_keeps_that_name() -> None:
    async def raiser(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        error = ProviderError("relayed")
        error.filter_name = "upstream"
        raise error

    kernel = Kernel(ScriptedModel(["x"]), filters=[Filter("here", around_chat=raiser)])
    with pytest.raises(ProviderError) as info:
        kernel.run_sync("go")
    assert info.value.filter_name == "upstream"


def test_a_hook_taking_star_args_is_accepted_and_named() -> None:
    async def hook(*args: Any) -> Any:
        request, _state, call_next = args
        if "boom" in request.messages[-1].text:
            raise RuntimeError("star hook")
        return await call_next(request)

    kernel = Kernel(ScriptedModel(["ok"], repeat=True), filters=[Filter("star", around_chat=hook)])
    assert kernel.run_sync("hi").text == "ok"
    assert str(_blamed(kernel, "boom")) == "Filter 'star' raised RuntimeError: star hook"


def test_a_hook_raising_after_the_inner_layers_returned_is_the_one_named() -> None:
    async def checks_answer(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        response = await call_next(request)
        raise KeyError(response.message.text)

    kernel = Kernel(
        ScriptedModel(["answer"]),
        filters=[
            Filter("outer", around_chat=passthrough),
            Filter("middle", around_chat=checks_answer),
            Filter("inner", around_chat=passthrough),
        ],
    )
    error = _blamed(kernel, "go")
    assert (error.filter_name, str(error)) == ("middle", "Filter 'middle' raised KeyError: 'answer'")


def test_an_inner_filters_error_re_raised_by_an_outer_one_keeps_the_inner_name() -> None:
    seen: list[str] = []

    async def relays(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        try:
            return await call_next(request)
        except ValueError as exc:  # inside the chain, the inner filter's own exception
            seen.append(str(exc))
            raise

    kernel = Kernel(
        ScriptedModel(["ok"]),
        filters=[Filter("relay", around_chat=relays), Filter("guard", around_chat=_raising_on("no"))],
    )
    assert _blamed(kernel, "no").filter_name == "guard"
    assert seen == ["'no' refused"]


def test_an_outer_filter_replacing_an_inner_error_is_named_for_its_own() -> None:
    async def replaces(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        try:
            return await call_next(request)
        except ValueError as exc:
            raise RuntimeError("replaced") from exc

    kernel = Kernel(
        ScriptedModel(["ok"]),
        filters=[Filter("replacer", around_chat=replaces), Filter("guard", around_chat=_raising_on("no"))],
    )
    error = _blamed(kernel, "no")
    assert (error.filter_name, str(error)) == ("replacer", "Filter 'replacer' raised RuntimeError: replaced")


def test_a_model_error_re_raised_by_a_filter_stays_the_models() -> None:
    async def relays(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        try:
            return await call_next(request)
        except ScriptExhaustedError:
            raise

    def broken(request: ChatRequest) -> ChatResponse:
        raise OSError("socket closed")

    for model, expected in ((ScriptedModel([]), ScriptExhaustedError), (ScriptedModel([broken]), OSError)):
        kernel = Kernel(model, filters=[Filter("relay", around_chat=relays), Filter("b", around_turn=passthrough)])
        with pytest.raises(expected) as info:
            kernel.run_sync("go")
        assert getattr(info.value, "filter_name", None) is None


def test_a_filter_retrying_after_an_inner_error_recovers() -> None:
    calls: list[str] = []

    async def flaky(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        calls.append("flaky")
        if len(calls) == 1:
            raise ConnectionError("first try fails")
        return await call_next(request)

    async def retry(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        try:
            return await call_next(request)
        except ConnectionError:
            return await call_next(request)

    kernel = Kernel(
        ScriptedModel(["ok"]), filters=[Filter("retry", around_chat=retry), Filter("flaky", around_chat=flaky)]
    )
    assert kernel.run_sync("go").text == "ok"
    assert calls == ["flaky", "flaky"]


def test_a_tool_filter_error_is_named_and_a_tool_error_is_not_a_filters() -> None:
    @tool
    def fails() -> str:
        """Always fails."""
        raise OSError("disk gone")

    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("fails", {})), "done"]),
        tools=[fails],
        filters=[Filter("watch", around_tool=passthrough)],
    )
    result = kernel.run_sync("go")  # a tool's own error becomes a failed tool result
    assert result.text == "done"

    async def tool_guard(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        raise PermissionError(request.tool.name)

    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("fails", {})), "done"]),
        tools=[fails],
        filters=[Filter("watch", around_tool=passthrough), Filter("tool_guard", around_tool=tool_guard)],
    )
    assert str(_blamed(kernel, "go")) == "Filter 'tool_guard' raised PermissionError: fails"


@pytest.mark.parametrize("scope", ["turn", "iteration", "chat"])
def test_check_returns_names_the_filter_returning_the_wrong_type(scope: str) -> None:
    async def wrong(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        await call_next(request)
        return "a string"

    expected = {"turn": "TurnResult", "iteration": "IterationResult", "chat": "ChatResponse"}[scope]
    kernel = Kernel(
        ScriptedModel(["x"]),
        filters=[Filter("outer", **{f"around_{scope}": passthrough}), Filter("wrong", **{f"around_{scope}": wrong})],
        check_returns=True,
    )
    with pytest.raises(ConfigError) as info:
        kernel.run_sync("go")
    assert info.value.filter_name == "wrong"
    assert str(info.value) == (
        f"Filter 'wrong' returned 'a string' (a str) from around_{scope}; "
        f"around_{scope} hooks must return a {expected}."
    )


def test_check_returns_still_names_a_raising_filter_and_passes_right_values() -> None:
    kernel = Kernel(
        ScriptedModel(["ok"], repeat=True),
        filters=[Filter("outer", around_chat=passthrough), Filter("guard", around_chat=CallableGuard("x"))],
        check_returns=True,
    )
    assert kernel.run_sync("fine").text == "ok"
    error = _blamed(kernel, "x")
    assert (error.filter_name, str(error)) == ("guard", "Filter 'guard' raised ValueError: 'x' refused")


def _step_refusing_bangs(token: str, state: Any) -> tuple[tuple[str, ...], Any]:
    if token.endswith("!"):
        raise ValueError(f"{token!r} already shouts")
    return (token + "!",), state


@pytest.mark.anyio
async def test_a_transform_shared_by_two_filters_is_named_by_its_place() -> None:
    shout = TokenTransform(_step_refusing_bangs)
    kernel = Kernel(ScriptedModel(["hi"]), filters=[Filter("first", token=shout), Filter("second", token=shout)])
    with pytest.raises(FilterError) as info:
        await collect_stream(kernel.run_stream("go"))
    assert (info.value.filter_name, str(info.value)) == (
        "second",
        "Filter 'second' raised ValueError: 'hi!' already shouts",
    )


@pytest.mark.anyio
async def test_a_partial_step_and_a_raising_flush_are_named() -> None:
    def step(limit: int, token: str, state: Any) -> tuple[tuple[str, ...], Any]:
        if len(token) > limit:
            raise ValueError(f"{token!r} is longer than {limit}")
        return (token,), state

    def flush(state: Any) -> tuple[str, ...]:
        raise RuntimeError("flush failed")

    kernel = Kernel(
        ScriptedModel(["toolong"]),
        filters=[
            Filter("ok", around_chat=passthrough),
            Filter("short", token=TokenTransform(functools.partial(step, 3))),
        ],
    )
    with pytest.raises(FilterError) as info:
        await collect_stream(kernel.run_stream("go"))
    assert str(info.value) == "Filter 'short' raised ValueError: 'toolong' is longer than 3"

    kernel = Kernel(
        ScriptedModel(["fine"]),
        filters=[
            Filter("plain", token=TokenTransform(lambda t, s: ((t,), s))),
            Filter("end", token=TokenTransform(functools.partial(step, 9), flush=flush)),
        ],
    )
    with pytest.raises(FilterError) as info:
        await collect_stream(kernel.run_stream("go"))
    assert str(info.value) == "Filter 'end' raised RuntimeError: flush failed"


def test_an_answer_transform_raising_in_a_plain_run_is_named() -> None:
    kernel = Kernel(
        ScriptedModel(["hey!"]),
        filters=[
            Filter("before", around_chat=passthrough),
            Filter("answer", token=TokenTransform(_step_refusing_bangs, applies_to="answer")),
        ],
    )
    error = _blamed(kernel, "go")
    assert (error.filter_name, str(error)) == ("answer", "Filter 'answer' raised ValueError: 'hey!' already shouts")


def test_an_outer_hook_sees_the_inner_filters_name_on_a_typed_error() -> None:
    seen: list[str | None] = []

    async def inner(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        raise LimitExceeded("too many", limit="model_calls", value=3, maximum=2)

    async def outer(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        try:
            return await call_next(request)
        except LimitExceeded as exc:
            seen.append(exc.filter_name)
            raise

    kernel = Kernel(
        ScriptedModel(["x"]), filters=[Filter("outer", around_chat=outer), Filter("inner", around_chat=inner)]
    )
    with pytest.raises(LimitExceeded) as info:
        kernel.run_sync("go")
    assert (seen, info.value.filter_name) == (["inner"], "inner")


@pytest.mark.anyio
async def test_a_transform_raising_a_typed_error_keeps_its_type_and_gets_the_name() -> None:
    def step(token: str, state: Any) -> tuple[tuple[str, ...], Any]:
        raise LimitExceeded("stream too long", limit="tokens", value=2, maximum=1)

    kernel = Kernel(ScriptedModel(["x"]), filters=[Filter("cap", token=TokenTransform(step))])
    with pytest.raises(LimitExceeded) as info:
        await collect_stream(kernel.run_stream("go"))
    assert (info.value.filter_name, info.value.limit) == ("cap", "tokens")
