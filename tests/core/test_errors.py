"""Errors raised through the chains name the filter (issue 2, contract 12), and the errors
module keeps its tree in its docstring."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from beamfilter_core import ChatResponse, Filter, Kernel, ScriptedModel, ToolCall, errors, tool
from beamfilter_core.errors import (
    BeamfilterError,
    ConfigError,
    FilterError,
    LimitExceeded,
    ProviderError,
    ScriptExhaustedError,
)
from beamfilter_core.testing import passthrough


def test_a_raising_filter_is_named_and_the_cause_kept() -> None:
    async def broken(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        await call_next(request)
        raise KeyError("missing")

    kernel = Kernel(
        ScriptedModel(["x"]),
        filters=[Filter("outer", around_chat=passthrough), Filter("broken", around_chat=broken)],
    )
    with pytest.raises(FilterError) as info:
        kernel.run_sync("go")
    assert info.value.filter_name == "broken"
    assert str(info.value) == "Filter 'broken' raised KeyError: 'missing'"
    assert isinstance(info.value.__cause__, KeyError)


def test_a_raising_tool_filter_inside_a_parallel_batch_is_named() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    async def tool_hook(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        raise RuntimeError("tool filter bug")

    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("ping", {}), ToolCall("ping", {})), "x"]),
        tools=[ping],
        filters=[Filter("turny", around_turn=passthrough), Filter("tooly", around_tool=tool_hook)],
    )
    with pytest.raises(FilterError, match=r"Filter 'tooly' raised RuntimeError: tool filter bug"):
        kernel.run_sync("go")


def test_typed_errors_keep_their_type_and_get_the_name() -> None:
    async def limiter(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        raise LimitExceeded("too many model calls", limit="model_calls", value=3, maximum=2)

    kernel = Kernel(ScriptedModel(["x"]), filters=[Filter("limits", around_chat=limiter)])
    with pytest.raises(LimitExceeded) as info:
        kernel.run_sync("go")
    assert info.value.filter_name == "limits"
    assert (info.value.limit, info.value.value, info.value.maximum) == ("model_calls", 3, 2)


def test_model_errors_pass_through_filters_unattributed() -> None:
    kernel = Kernel(ScriptedModel([]), filters=[Filter("a", around_chat=passthrough)])
    with pytest.raises(ScriptExhaustedError) as info:
        kernel.run_sync("go")
    assert info.value.filter_name is None

    def boom(request: Any) -> ChatResponse:
        raise ValueError("model side")

    kernel = Kernel(ScriptedModel([boom]), filters=[Filter("a", around_chat=passthrough)])
    with pytest.raises(ValueError, match="model side"):
        kernel.run_sync("go")


def test_a_filter_returning_the_wrong_type_is_a_typed_error_naming_the_chain() -> None:
    async def wrong(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        await call_next(request)
        return "not a response"

    kernel = Kernel(ScriptedModel(["x"]), filters=[Filter("wrong", around_chat=wrong)])
    with pytest.raises(ConfigError) as info:
        kernel.run_sync("go")
    assert str(info.value) == (
        "the chat chain (filters, outermost first: wrong) returned 'not a response' (a str); "
        "around_chat hooks must return a ChatResponse."
    )


def test_errors_are_never_returned_as_answers() -> None:
    async def swallow_then_raise(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        try:
            return await call_next(request)
        except ScriptExhaustedError as exc:
            raise ProviderError("model unavailable") from exc

    kernel = Kernel(ScriptedModel([]), filters=[Filter("guard", around_chat=swallow_then_raise)])
    with pytest.raises(ProviderError) as info:
        kernel.run_sync("go")
    assert info.value.filter_name == "guard"


def test_every_exception_is_in_the_tree_of_the_docstring() -> None:
    doc = errors.__doc__ or ""
    classes = {
        name: obj for name, obj in vars(errors).items() if inspect.isclass(obj) and issubclass(obj, BeamfilterError)
    }
    assert set(classes) == set(errors.__all__)
    for name in classes:
        assert f"\n    {name}" in doc or f"      {name}" in doc, f"{name} missing from the errors docstring tree"


def test_kernel_rejects_bad_settings_with_clear_messages() -> None:
    with pytest.raises(ConfigError) as refused:
        Kernel(ScriptedModel([]), max_iterations=0)
    assert str(refused.value) == "Kernel(max_iterations=0) is invalid; give an integer >= 1."
    with pytest.raises(ConfigError) as refused:
        Kernel(ScriptedModel([]), tool_timeout=-1)
    assert str(refused.value) == "Kernel(tool_timeout=-1) is invalid; give a number > 0 or None."
    with pytest.raises(ConfigError, match=r"Kernel\(model='gpt'\) needs a ChatModel"):
        Kernel("gpt")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Run input item \[0\] is 3 \(a int\)"):
        Kernel(ScriptedModel([])).run_sync([3])  # type: ignore[list-item]


def test_filters_sharing_one_hook_function_are_told_apart() -> None:
    def guard(name: str, banned: str) -> Filter:
        async def around_chat(request: Any, state: dict[str, Any], call_next: Any) -> Any:
            if banned in request.messages[-1].text:
                raise ValueError(f"{banned!r} is not allowed")
            return await call_next(request)

        return Filter(name, around_chat=around_chat)

    kernel = Kernel(ScriptedModel(["ok"], repeat=True), filters=[guard("no_foo", "foo"), guard("no_bar", "bar")])
    with pytest.raises(FilterError) as info:
        kernel.run_sync("foo")
    assert info.value.filter_name == "no_foo"
    with pytest.raises(FilterError) as info:
        kernel.run_sync("bar")
    assert info.value.filter_name == "no_bar"

    class Guard:
        def __init__(self, name: str, banned: str) -> None:
            self.name, self.banned = name, banned

        async def around_chat(self, request: Any, state: dict[str, Any], call_next: Any) -> Any:
            if self.banned in request.messages[-1].text:
                raise ValueError("banned")
            return await call_next(request)

    kernel = Kernel(ScriptedModel(["ok"]), filters=[Guard("first", "x"), Guard("second", "y")])
    with pytest.raises(FilterError) as info:
        kernel.run_sync("x")
    assert info.value.filter_name == "first"
