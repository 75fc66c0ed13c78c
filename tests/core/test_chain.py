"""Integration tests through the public API: onion order, skipping, short-circuit, retry,
private state and assembly-time compilation (issue 2, contracts 1-5)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from beamfilter_core import (
    ChatResponse,
    Filter,
    Kernel,
    ScriptedModel,
    ToolCall,
    tool,
)
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import passthrough, trace_filter


def test_onion_order_is_list_order() -> None:
    log: list[str] = []
    model = ScriptedModel(["ok"])

    async def terminal_probe(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        log.append("terminal")
        return await call_next(request)

    kernel = Kernel(
        model,
        filters=[
            trace_filter("A", log, ("chat",)),
            trace_filter("B", log, ("chat",)),
            Filter("probe", around_chat=terminal_probe),
        ],
    )
    kernel.run_sync("hi")
    assert log == ["A.before chat", "B.before chat", "terminal", "B.after chat", "A.after chat"]


def test_scopes_nest_turn_iteration_chat_tool() -> None:
    log: list[str] = []

    @tool
    def ping() -> str:
        """Ping."""
        log.append("tool ran")
        return "pong"

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("ping", {})), "done"])
    kernel = Kernel(model, tools=[ping], filters=[trace_filter("A", log)])
    result = kernel.run_sync("go")
    assert result.text == "done"
    assert log == [
        "A.before turn",
        "A.before iteration",
        "A.before chat",
        "A.after chat",
        "A.before gate",
        "A.after gate",
        "A.before tool",
        "tool ran",
        "A.after tool",
        "A.after iteration",
        "A.before iteration",
        "A.before chat",
        "A.after chat",
        "A.after iteration",
        "A.after turn",
    ]


def test_filter_without_hook_is_skipped_and_empty_chain_is_terminal() -> None:
    log: list[str] = []
    kernel = Kernel(ScriptedModel(["ok"]), filters=[trace_filter("T", log, ("turn",))])
    assert kernel.chain("chat").layers == ()
    assert kernel.chain("turn").names == ("T",)
    from beamfilter_core._run import _Run

    run = _Run(kernel._plan, None)
    # zero wrappers: the bound chat chain is the terminal method itself
    assert run.chat == run._chat_terminal
    assert run.tool is None  # bound on the first tool call
    assert run._tool_chain() == run._tool_terminal
    assert run.iteration == run._iteration_terminal
    kernel.run_sync("x")
    assert log == ["T.before turn", "T.after turn"]


def test_short_circuit_skips_inner_layers_and_outer_post_still_runs() -> None:
    log: list[str] = []
    model = ScriptedModel([])

    async def block(request: Any, state: dict[str, Any], call_next: Any) -> ChatResponse:
        log.append("block")
        return ChatResponse.from_text("blocked")

    kernel = Kernel(
        model,
        filters=[
            trace_filter("outer", log, ("chat",)),
            Filter("block", around_chat=block),
            trace_filter("inner", log, ("chat",)),
        ],
    )
    result = kernel.run_sync("x")
    assert result.text == "blocked"
    assert model.requests == []
    assert log == ["outer.before chat", "block", "outer.after chat"]


def test_retry_reruns_only_inner_layers() -> None:
    log: list[str] = []
    model = ScriptedModel(["one", "two", "three"])

    async def thrice(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        responses = [await call_next(request) for _ in range(3)]
        return responses[-1]

    kernel = Kernel(
        model,
        filters=[
            trace_filter("outer", log, ("chat",)),
            Filter("retry", around_chat=thrice),
            trace_filter("inner", log, ("chat",)),
        ],
    )
    result = kernel.run_sync("x")
    assert result.text == "three"
    assert len(model.requests) == 3
    assert log.count("outer.before chat") == 1
    assert log.count("inner.before chat") == 3
    assert log.count("inner.after chat") == 3


def test_private_state_is_isolated_per_filter_and_shared_across_scopes() -> None:
    seen: dict[str, list[Any]] = {"a": [], "b": []}

    def make(name: str) -> Filter:
        async def chat(request: Any, state: dict[str, Any], call_next: Any) -> Any:
            state["k"] = state.get("k", 0) + 1
            return await call_next(request)

        async def turn(request: Any, state: dict[str, Any], call_next: Any) -> Any:
            state["k"] = 100 if name == "a" else 200
            result = await call_next(request)
            seen[name].append(state["k"])
            return result

        return Filter(name, around_chat=chat, around_turn=turn)

    @tool
    def noop() -> str:
        """Nothing."""
        return ""

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("noop", {})), "done"] * 2)
    kernel = Kernel(model, tools=[noop], filters=[make("a"), make("b")])
    kernel.run_sync("x")
    # two chat calls in the run, each filter saw only its own key
    assert seen == {"a": [102], "b": [202]}
    kernel.run_sync("y")
    # state is gone after the run: the second run starts again from init
    assert seen == {"a": [102, 102], "b": [202, 202]}


def test_state_is_seeded_from_init_and_copied_per_run() -> None:
    totals: list[list[int]] = []

    async def chat(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        state["items"].append(1)
        totals.append(list(state["items"]))
        return await call_next(request)

    kernel = Kernel(ScriptedModel(["a", "b"]), filters=[Filter("f", around_chat=chat, init={"items": []})])
    kernel.run_sync("x")
    kernel.run_sync("y")
    assert totals == [[1], [1]]


def test_with_filters_returns_new_kernel_and_leaves_old_unchanged() -> None:
    log: list[str] = []
    model = ScriptedModel(["a", "b"])
    plain = Kernel(model)
    traced = plain.with_filters([trace_filter("T", log, ("chat",))])
    assert traced is not plain
    assert plain.chain("chat").names == ()
    assert traced.chain("chat").names == ("T",)
    plain.run_sync("x")
    assert log == []
    traced.run_sync("y")
    assert log == ["T.before chat", "T.after chat"]


def test_chains_are_compiled_once_at_assembly(monkeypatch: pytest.MonkeyPatch) -> None:
    import beamfilter_core._filter as filter_module

    calls: list[int] = []
    real = filter_module.normalise

    def counting(item: Any, index: int) -> Any:
        calls.append(index)
        return real(item, index)

    monkeypatch.setattr(filter_module, "normalise", counting)
    kernel = Kernel(ScriptedModel(["a"] * 3), filters=[trace_filter("A", []), trace_filter("B", [])])
    assert calls == [0, 1]
    for _ in range(3):
        kernel.run_sync("x")
    assert calls == [0, 1]


def test_filter_like_objects_are_normalised() -> None:
    log: list[str] = []

    class Upper:
        name = "upper"

        async def around_chat(self, request: Any, state: dict[str, Any], call_next: Any) -> Any:
            log.append("upper")
            response = await call_next(request)
            return response.replace(message=response.message.replace(content=response.text.upper()))

    kernel = Kernel(ScriptedModel(["quiet"]), filters=[Upper()])
    assert kernel.run_sync("x").text == "QUIET"
    assert log == ["upper"]
    assert kernel.filters[0].name == "upper"


def test_bad_filters_are_rejected_at_assembly() -> None:
    def sync_hook(request: Any, state: Any, call_next: Any) -> Any:
        return call_next(request)

    with pytest.raises(ConfigError, match=r"filters\[0\]: filter 's' has a synchronous around_chat hook"):
        Kernel(ScriptedModel([]), filters=[Filter("s", around_chat=sync_hook)])
    with pytest.raises(ConfigError, match=r"filters\[1\] is named 'a' like filters\[0\]"):
        Kernel(ScriptedModel([]), filters=[trace_filter("a", []), trace_filter("a", [])])
    with pytest.raises(ConfigError, match=r"filters\[0\] is 42 \(a int\); a filter needs a 'name'"):
        Kernel(ScriptedModel([]), filters=[42])


def test_aclose_closes_the_model_and_the_filters_stores_once() -> None:
    import asyncio

    closed: list[str] = []

    class Closing:
        def __init__(self, name: str) -> None:
            self.name = name

        async def aclose(self) -> None:
            closed.append(self.name)

    class ClosingModel(ScriptedModel, Closing):
        def __init__(self) -> None:
            ScriptedModel.__init__(self, ["ok"])
            Closing.__init__(self, "model")

    store = Closing("store")
    kernel = Kernel(
        ClosingModel(),
        filters=[Filter("a", resources=[store]), Filter("b", resources=(store,)), Filter("c", extras={"store": store})],
    )
    asyncio.run(kernel.aclose())
    assert closed == ["model", "store"]


def test_a_bound_chain_checks_no_return_type_unless_asked_and_its_repr_shows_only_the_layers() -> None:
    import asyncio

    from beamfilter_core import CompiledChain, Filter
    from beamfilter_core._filter import normalise_all

    async def wrong(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        return "not a ChatResponse"

    async def terminal(request: Any) -> Any:
        raise AssertionError("the layer answers without calling the terminal")

    chain = CompiledChain.compile("chat", normalise_all([Filter("w", around_chat=wrong)]))
    assert asyncio.run(chain.bind([{}], terminal)("request")) == "not a ChatResponse"
    assert "inner_first" not in repr(chain)


def test_a_finished_run_is_freed_by_reference_counting_alone() -> None:
    class Probe:
        pass

    probes: list[weakref.ref[Probe]] = []

    async def holds(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        probe = state.setdefault("probe", Probe())
        probes.append(weakref.ref(probe))
        return await call_next(request)

    @tool
    def lookup() -> str:
        """Look up."""
        return "found"

    scopes = {f"around_{scope}": holds for scope in ("turn", "iteration", "chat", "tool", "gate")}
    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("lookup", {})), "done"]),
        tools=[lookup],
        filters=[Filter("a", **scopes), Filter("b", **scopes)],
    )
    gc.collect()
    gc.disable()
    try:
        assert kernel.run_sync("go").text == "done"
        assert len(probes) == 2 * (1 + 2 + 2 + 1 + 1)
        assert [probe() for probe in probes] == [None] * len(probes)
    finally:
        gc.enable()


def test_a_compiled_chains_repr_and_equality_are_its_scope_layers_and_names() -> None:
    from beamfilter_core import CompiledChain
    from beamfilter_core._filter import normalise_all

    chain = CompiledChain.compile("chat", normalise_all([Filter("w", around_chat=passthrough)]))
    assert repr(chain) == f"CompiledChain(scope='chat', layers=((0, {passthrough!r}),), names=('w',))"
    assert chain == CompiledChain.compile("chat", normalise_all([Filter("w", around_chat=passthrough)]))
