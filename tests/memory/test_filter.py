"""Integration tests of the memory filter through a real Kernel with ScriptedModel, on every store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from _support import slow_tool
from memory._tools import pause_gate, transfer, weather

from beamfilter_core import (
    CancelToken,
    ChatRequest,
    ChatResponse,
    Decision,
    Filter,
    IterationRequest,
    IterationResult,
    Kernel,
    Message,
    ScriptedModel,
    Tool,
    ToolCall,
    TurnRequest,
    TurnResult,
    tool,
)
from beamfilter_core.errors import (
    AlreadyResumedError,
    ConfigError,
    FilterError,
    MaxIterationsExceeded,
    ResumeError,
    ScriptExhaustedError,
    StoreError,
)
from beamfilter_core.testing import collect_stream, scripted_calls
from beamfilter_memory import ABANDONED_CALL_TEXT, ChatStore, InMemoryStore, memory_filter

pytestmark = pytest.mark.anyio

U, A, T = Message.user, Message.assistant, Message.tool
CID = {"conversation_id": "c1"}


@tool(return_direct=True)
def lookup(key: str) -> str:
    """Look a value up; the result is the answer."""
    return f"value of {key}"


def _gated(store: ChatStore, model: Any, tool: Tool = transfer) -> Kernel:
    """A kernel keeping its turns in ``store`` whose gate pauses every call of ``tool``."""
    return Kernel(model, tools=[tool], filters=[memory_filter(store)], gate=pause_gate)


def _calls(*pairs: tuple[str, dict[str, Any], str]) -> ChatResponse:
    return ChatResponse.tool_calls(*(ToolCall(name, args, cid) for name, args, cid in pairs))


async def test_turns_are_stored_and_sent_back_as_history(store: ChatStore) -> None:
    model = ScriptedModel(["Hello Ada!", "You are Ada."])
    kernel = Kernel(model, filters=[memory_filter(store)], system_prompt="Be brief.")
    first = await kernel.run("Hi, I'm Ada", context=CID)
    second = await kernel.run("Who am I?", context=CID)
    assert (first.text, second.text) == ("Hello Ada!", "You are Ada.")
    assert await store.load("c1") == [U("Hi, I'm Ada"), A("Hello Ada!"), U("Who am I?"), A("You are Ada.")]
    assert model.requests[1].messages == (
        Message.system("Be brief."),
        U("Hi, I'm Ada"),
        A("Hello Ada!"),
        U("Who am I?"),
    )
    # The in-run transcript of the second turn does not know the history; memory supplies it.
    assert second.messages == (U("Who am I?"), A("You are Ada."))


async def test_a_tool_round_trip_is_stored_whole_and_never_duplicated(store: ChatStore) -> None:
    model = ScriptedModel(
        [
            _calls(("weather", {"city": "Oslo"}, "call_1"), ("weather", {"city": "Rome"}, "call_2")),
            "Oslo and Rome are sunny.",
            "You asked about Oslo and Rome.",
        ]
    )
    kernel = Kernel(model, tools=[weather], filters=[memory_filter(store)])
    await kernel.run("Weather in Oslo and Rome?", context=CID)
    turn1 = [
        U("Weather in Oslo and Rome?"),
        A(None, (ToolCall("weather", {"city": "Oslo"}, "call_1"), ToolCall("weather", {"city": "Rome"}, "call_2"))),
        T("call_1", "sunny in Oslo", "weather"),
        T("call_2", "sunny in Rome", "weather"),
        A("Oslo and Rome are sunny."),
    ]
    assert await store.load("c1") == turn1
    # Round 2's delta is the tool results only: the prompt has each message exactly once.
    assert model.requests[1].messages == tuple(turn1[:4])
    await kernel.run("What did I ask?", context=CID)
    assert model.requests[2].messages == (*turn1, U("What did I ask?"))
    assert await store.load("c1") == [*turn1, U("What did I ask?"), A("You asked about Oslo and Rome.")]


async def test_streaming_and_non_streaming_store_the_same_transcript(store: ChatStore) -> None:
    script: list[str | ChatResponse] = [_calls(("weather", {"city": "Oslo"}, "call_1")), "It is sunny in Oslo today."]
    plain = Kernel(ScriptedModel(script), tools=[weather], filters=[memory_filter(store)])
    streamed = Kernel(ScriptedModel(script), tools=[weather], filters=[memory_filter(store)])
    await plain.run("Oslo?", context={"conversation_id": "plain"})
    text, _events = await collect_stream(streamed.run_stream("Oslo?", context={"conversation_id": "streamed"}))
    assert text == "It is sunny in Oslo today."
    expected = [
        U("Oslo?"),
        A(None, (ToolCall("weather", {"city": "Oslo"}, "call_1"),)),
        T("call_1", "sunny in Oslo", "weather"),
        A("It is sunny in Oslo today."),
    ]
    assert await store.load("plain") == expected
    assert await store.load("streamed") == expected


async def test_return_direct_answers_are_stored(store: ChatStore) -> None:
    model = ScriptedModel([_calls(("lookup", {"key": "k"}, "call_1"))])
    kernel = Kernel(model, tools=[lookup], filters=[memory_filter(store)])
    result = await kernel.run("k?", context=CID)
    assert result.return_direct
    assert result.text == "value of k"
    assert await store.load("c1") == [
        U("k?"),
        A(None, (ToolCall("lookup", {"key": "k"}, "call_1"),)),
        T("call_1", "value of k", "lookup"),
        A("value of k"),
    ]


async def test_without_a_conversation_id_nothing_is_stored() -> None:
    store = InMemoryStore()
    model = ScriptedModel(["one", "two"])
    kernel = Kernel(model, filters=[memory_filter(store)])
    await kernel.run("a")
    await kernel.run("b", context={"user": "x"})
    assert model.requests[1].messages == (U("b"),)
    assert store._messages == {}


async def test_system_messages_are_sent_but_never_stored(store: ChatStore) -> None:
    model = ScriptedModel(["ok", "still ok"])
    kernel = Kernel(model, filters=[memory_filter(store)], system_prompt="kernel prompt")
    await kernel.run([Message.system("entry system"), U("hi")], context=CID)
    assert model.requests[0].messages == (Message.system("kernel prompt"), Message.system("entry system"), U("hi"))
    await kernel.run("again", context=CID)
    assert model.requests[1].messages == (Message.system("kernel prompt"), U("hi"), A("ok"), U("again"))
    assert await store.load("c1") == [U("hi"), A("ok"), U("again"), A("still ok")]


async def test_a_failing_turn_leaves_the_store_as_it_was(store: ChatStore) -> None:
    def boom(request: ChatRequest) -> ChatResponse:
        raise RuntimeError("model down")

    model = ScriptedModel(["first", _calls(("weather", {"city": "Oslo"}, "call_1")), boom])
    kernel = Kernel(model, tools=[weather], filters=[memory_filter(store)])
    await kernel.run("one", context=CID)
    with pytest.raises(RuntimeError, match="model down"):
        await kernel.run("two", context=CID)
    assert await store.load("c1") == [U("one"), A("first")]
    # The limit error of an endless tool loop stores nothing either.
    looping = Kernel(
        ScriptedModel([_calls(("weather", {"city": "X"}, "call_x"))], repeat=True),
        tools=[weather],
        filters=[memory_filter(store)],
        max_iterations=2,
    )
    with pytest.raises(MaxIterationsExceeded):
        await looping.run("loop", context=CID)
    assert await store.load("c1") == [U("one"), A("first")]
    with pytest.raises(ScriptExhaustedError):
        await Kernel(ScriptedModel([]), filters=[memory_filter(store)]).run("x", context=CID)
    assert await store.load("c1") == [U("one"), A("first")]


async def test_a_cancelled_turn_leaves_the_store_as_it_was(store: ChatStore) -> None:
    slow, started = slow_tool()

    model = ScriptedModel(["first", _calls(("slow", {}, "call_s")), _calls(("slow", {}, "call_s2"))])
    kernel = Kernel(model, tools=[slow], filters=[memory_filter(store)])
    await kernel.run("one", context=CID)
    token = CancelToken()
    task = asyncio.create_task(kernel.run("two", context=CID, cancel=token))
    await asyncio.wait_for(started.wait(), 5)
    token.cancel()
    result = await asyncio.wait_for(task, 5)
    assert result.status == "cancelled"
    assert await store.load("c1") == [U("one"), A("first")]
    # Cancelling the asyncio task itself stores nothing either.
    started.clear()
    task = asyncio.create_task(kernel.run("three", context=CID))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.load("c1") == [U("one"), A("first")]


async def test_pause_then_resume_by_conversation_id_from_a_fresh_kernel(
    store: ChatStore, make_store: Callable[..., ChatStore], request: pytest.FixtureRequest
) -> None:
    call = ToolCall("transfer", {"amount": 5}, "call_t")
    worker1 = _gated(store, scripted_calls(call, answer=None))
    paused = await worker1.run("pay 5", context=CID)
    assert paused.status == "paused"
    assert await store.load("c1") == [U("pay 5"), A(None, (call,))]
    assert await store.load_pause("c1") == paused.pause
    # Another worker: a new kernel (and, for durable stores, its own connection to the data).
    other: ChatStore
    if isinstance(store, InMemoryStore):
        other = store
    else:
        # Same file / database / key prefix, new connections.
        other = make_store(request.node.callspec.params["store"])
        assert other is not store
        assert getattr(other, "url", None) == getattr(store, "url", None)
        assert getattr(other, "prefix", None) == getattr(store, "prefix", None)
    try:
        model = ScriptedModel(["Done, 5 moved."])
        worker2 = _gated(other, model)
        result = await worker2.resume(conversation_id="c1", decisions={"call_t": Decision.approve()})
        assert (result.status, result.text) == ("completed", "Done, 5 moved.")
        assert model.requests[0].messages == (U("pay 5"), A(None, (call,)), T("call_t", "moved 5", "transfer"))
        assert await other.load("c1") == [
            U("pay 5"),
            A(None, (call,)),
            T("call_t", "moved 5", "transfer"),
            A("Done, 5 moved."),
        ]
        assert await other.load_pause("c1") is None
        with pytest.raises(ResumeError) as caught:
            await worker2.resume(conversation_id="c1", decisions={"call_t": "approve"})
        assert str(caught.value) == "No paused run is stored for conversation 'c1'."
    finally:
        if other is not store:
            await other.aclose()


async def test_a_resumed_turn_may_pause_again_and_resume_again(store: ChatStore) -> None:
    c1, c2 = ToolCall("transfer", {"amount": 1}, "call_1"), ToolCall("transfer", {"amount": 2}, "call_2")
    model = ScriptedModel([ChatResponse.tool_calls(c1), ChatResponse.tool_calls(c2), "both moved"])
    kernel = _gated(store, model)
    assert (await kernel.run("pay 1 then 2", context=CID)).status == "paused"
    again = await kernel.resume(conversation_id="c1", decisions={"call_1": "approve"})
    assert again.status == "paused"
    assert (await store.load_pause("c1")) == again.pause
    assert again.pause is not None
    assert again.pause.awaiting == ("call_2",)
    done = await kernel.resume(conversation_id="c1", decisions={"call_2": Decision.reply("skipped by a human")})
    assert done.text == "both moved"
    assert await store.load("c1") == [
        U("pay 1 then 2"),
        A(None, (c1,)),
        T("call_1", "moved 1", "transfer"),
        A(None, (c2,)),
        T("call_2", "skipped by a human", "transfer"),
        A("both moved"),
    ]
    assert await store.load_pause("c1") is None


async def test_a_resume_that_fails_keeps_the_pause(store: ChatStore) -> None:
    def boom(request: ChatRequest) -> ChatResponse:
        raise RuntimeError("model down")

    call = ToolCall("transfer", {"amount": 5}, "call_t")
    kernel = _gated(store, scripted_calls(call, answer=boom))
    paused = await kernel.run("pay", context=CID)
    with pytest.raises(RuntimeError, match="model down"):
        await kernel.resume(conversation_id="c1", decisions={"call_t": "approve"})
    assert await store.load_pause("c1") == paused.pause
    assert await store.load("c1") == [U("pay"), A(None, (call,))]


async def test_a_new_turn_on_a_paused_conversation_answers_the_awaited_calls(store: ChatStore) -> None:
    call = ToolCall("transfer", {"amount": 5}, "call_t")
    model = scripted_calls(call, answer="OK, no transfer.")
    kernel = _gated(store, model)
    await kernel.run("pay 5", context=CID)
    await kernel.run("never mind", context=CID)
    abandoned = T("call_t", ABANDONED_CALL_TEXT, "transfer")
    assert model.requests[1].messages == (U("pay 5"), A(None, (call,)), abandoned, U("never mind"))
    assert await store.load("c1") == [U("pay 5"), A(None, (call,)), abandoned, U("never mind"), A("OK, no transfer.")]
    assert await store.load_pause("c1") is None


async def test_window_sends_only_the_last_messages_and_never_an_orphan_tool_result(store: ChatStore) -> None:
    await store.append(
        "c1",
        [
            U("q1"),
            A(None, (ToolCall("weather", {"city": "A"}, "call_a"), ToolCall("weather", {"city": "B"}, "call_b"))),
            T("call_a", "sunny in A", "weather"),
            T("call_b", "sunny in B", "weather"),
            A("a1"),
        ],
    )
    model = ScriptedModel(["a2", "a3"])
    kernel = Kernel(model, filters=[memory_filter(store, window=2)])
    await kernel.run("q2", context=CID)
    assert model.requests[0].messages == (A("a1"), U("q2"))  # "sunny in B" was cut from its call
    await kernel.run("q3", context=CID)
    assert model.requests[1].messages == (U("q2"), A("a2"), U("q3"))
    assert len(await store.load("c1")) == 9  # the store keeps everything


@pytest.mark.parametrize("inside_memory", [True, False], ids=["inside-memory", "outside-memory"])
async def test_a_reentering_turn_filter_stores_each_message_once(store: ChatStore, inside_memory: bool) -> None:
    async def validate(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        result = await call_next(request)
        if result.status == "completed" and "42" not in result.text:
            result = await call_next(request.followup(result, U("Answer with a number.")))
        return result

    model = ScriptedModel(["many", "42"])
    memory, validating = memory_filter(store), Filter("validate", around_turn=validate)
    kernel = Kernel(model, filters=[memory, validating] if inside_memory else [validating, memory])
    result = await kernel.run("How many?", context=CID)
    assert result.text == "42"
    assert model.requests[1].messages == (U("How many?"), A("many"), U("Answer with a number."))
    assert await store.load("c1") == [U("How many?"), A("many"), U("Answer with a number."), A("42")]


async def test_a_rerun_iteration_is_not_stored_twice(store: ChatStore) -> None:
    async def rerun_once(
        request: IterationRequest,
        state: dict[str, Any],
        call_next: Callable[[IterationRequest], Awaitable[IterationResult]],
    ) -> IterationResult:
        result = await call_next(request)
        if result.status == "completed" and not state.get("rerun"):
            state["rerun"] = True
            result = await call_next(request)
        return result

    model = ScriptedModel([_calls(("weather", {"city": "Oslo"}, "call_1")), "draft", "final"])
    kernel = Kernel(
        model, tools=[weather], filters=[memory_filter(store), Filter("rerun", around_iteration=rerun_once)]
    )
    result = await kernel.run("Oslo?", context=CID)
    assert result.text == "final"
    expected = [
        U("Oslo?"),
        A(None, (ToolCall("weather", {"city": "Oslo"}, "call_1"),)),
        T("call_1", "sunny in Oslo", "weather"),
    ]
    assert model.requests[1].messages == tuple(expected)
    assert model.requests[2].messages == tuple(expected)
    assert await store.load("c1") == [*expected, A("final")]


async def test_concurrent_conversations_through_one_kernel(store: ChatStore) -> None:
    def echo(request: ChatRequest) -> str:
        return f"seen {len(request.messages)}: {request.messages[-1].text}"

    kernel = Kernel(ScriptedModel([echo], repeat=True), filters=[memory_filter(store)])

    async def talk(n: int) -> None:
        for turn in range(5):
            await kernel.run(f"{n}/{turn}", context={"conversation_id": f"user-{n}"})

    await asyncio.gather(*(talk(n) for n in range(20)))
    for n in range(20):
        texts = [m.text for m in await store.load(f"user-{n}")]
        assert texts == [x for t in range(5) for x in (f"{n}/{t}", f"seen {2 * t + 1}: {n}/{t}")]


async def test_filter_extras_and_bad_options() -> None:
    store = InMemoryStore()
    flt = memory_filter(store, window=3)
    assert flt.name == "memory"
    assert flt.extras["store"] is store
    assert flt.extras["window"] == 3
    assert flt.load_pause is not None
    assert await flt.load_pause("nobody") is None
    assert flt.scopes == ("turn", "chat")
    with pytest.raises(ConfigError) as caught:
        memory_filter(store, window=0)
    assert str(caught.value) == "memory(window=0) is invalid; give a positive number of messages, or None for all."
    with pytest.raises(ConfigError) as caught:
        memory_filter(object())  # type: ignore[arg-type]
    assert (
        "is not a ChatStore: it lacks load, append, clear, save_pause, load_pause, clear_pause, take_pause, aclose"
        in str(caught.value)
    )
    with pytest.raises(ConfigError, match=r"^No memory store for the URL 'ftp://x'"):
        memory_filter("ftp://x")
    kernel = Kernel(ScriptedModel(["x"]), filters=[flt])
    with pytest.raises(ConfigError) as raised:
        await kernel.run("hi", context={"conversation_id": 7})
    assert raised.value.filter_name == "memory"
    assert str(raised.value).startswith("conversation_id is 7 (a int); give a non-empty str")


async def test_a_store_failure_names_the_filter(tmp_path: Any) -> None:
    from beamfilter_memory import SQLiteStore

    (tmp_path / "dir.db").mkdir()
    store = SQLiteStore(f"sqlite:///{tmp_path / 'dir.db'}")
    kernel = Kernel(ScriptedModel(["x"]), filters=[memory_filter(store)])
    with pytest.raises(StoreError) as caught:
        await kernel.run("hi", context=CID)
    assert caught.value.filter_name == "memory"
    assert "load for conversation 'c1' failed: OperationalError: unable to open database file" in str(caught.value)
    assert not isinstance(caught.value, FilterError)
    await store.aclose()


class _RacingStore(InMemoryStore):
    """An in-memory store whose take_pause waits until two resumes have both loaded the pause."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0
        self.both_loaded = asyncio.Event()
        self.paused_id = ""

    async def load_pause(self, conversation_id: str) -> Any:
        found = await super().load_pause(conversation_id)
        self.loads += 1
        if self.loads == 2:
            self.both_loaded.set()
        return found

    async def take_pause(self, conversation_id: str, pause_id: str | None = None) -> Any:
        await self.both_loaded.wait()
        return await super().take_pause(conversation_id, pause_id)


async def test_two_workers_resuming_one_pause_run_its_tools_once() -> None:
    runs: list[int] = []

    @tool(sensitive=True)
    def pay(amount: int) -> str:
        """Pay."""
        runs.append(amount)
        return f"paid {amount}"

    store = _RacingStore()
    call = ToolCall("pay", {"amount": 5}, "call_p")
    first = _gated(store, scripted_calls(call, answer=None), pay)
    store.paused_id = (await first.run("pay 5", context=CID)).pause.pause_id  # type: ignore[union-attr]
    workers = [Kernel(ScriptedModel(["paid."]), tools=[pay], filters=[memory_filter(store)]) for _ in range(2)]
    outcomes = await asyncio.gather(
        *(w.resume(conversation_id="c1", decisions={"call_p": "approve"}) for w in workers), return_exceptions=True
    )
    assert runs == [5]
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(errors) == 1
    assert type(errors[0]) is AlreadyResumedError
    assert str(errors[0]) == (
        f"already resumed: pause {store.paused_id!r} of conversation 'c1' is no longer pending "
        "(another worker resumed it, or a newer turn answered its calls); nothing ran."
    )
    assert [o.text for o in outcomes if isinstance(o, TurnResult)] == ["paid."]
    assert [m.role for m in await store.load("c1")] == ["user", "assistant", "tool", "assistant"]


async def test_a_cancelled_resume_gives_the_pause_back(store: ChatStore) -> None:
    started = asyncio.Event()

    @tool(sensitive=True)
    async def slow_pay(amount: int) -> str:
        """Pay slowly."""
        started.set()
        await asyncio.sleep(10)
        return "late"

    call = ToolCall("slow_pay", {"amount": 5}, "call_s")
    kernel = _gated(store, scripted_calls(call, answer=None), slow_pay)
    paused = await kernel.run("pay", context=CID)
    token = CancelToken()
    task = asyncio.create_task(kernel.resume(conversation_id="c1", decisions={"call_s": "approve"}, cancel=token))
    await asyncio.wait_for(started.wait(), 5)
    token.cancel()
    assert (await asyncio.wait_for(task, 5)).status == "cancelled"
    assert await store.load_pause("c1") == paused.pause
    assert await store.load("c1") == [U("pay"), A(None, (call,))]


def test_the_memory_filter_declares_its_role_and_rebuilds_over_another_store() -> None:
    store, other = InMemoryStore(), InMemoryStore()
    flt = memory_filter(store, window=6, name="history")
    assert flt.memory is not None
    assert flt.memory.store is store
    rebuilt = flt.memory.rebuild(other)
    assert (rebuilt.name, rebuilt.extras["window"]) == ("history", 6)
    assert rebuilt.memory is not None
    assert rebuilt.memory.store is other
    assert rebuilt.resources == (other,)
