"""Typed errors only, on every store: malformed arguments and corrupt stored rows, generated.

Each store (memory, SQLite, real PostgreSQL, real Redis) is called with arguments of every
wrong shape hypothesis can think of, and reads rows of every wrong shape written behind its
back. Allowed outcomes: the call works, or it raises a :class:`BeamfilterError` (a
``ConfigError`` for a bad argument, a ``StoreError`` for a bad row). Never a raw
``TypeError``, ``AttributeError``, ``KeyError``, ``UnicodeEncodeError`` or ``RecursionError``;
and a refused call leaves the conversation as it was (nothing half-written).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory.test_stores import _raw_append

from beamfilter_core import Message, PauseState, ToolCall
from beamfilter_core.errors import BeamfilterError, ConfigError, StoreError
from beamfilter_memory import KEEP_PAUSE, ChatStore, Fact

pytestmark = [pytest.mark.anyio, pytest.mark.services]

_FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_IDS = itertools.count()

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
    st.binary(max_size=8),
    st.just(""),
    st.just("x" * 5000),
    st.just("a\x00b"),
)
_JUNK = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=5), inner, max_size=3),
    ),
    max_leaves=8,
)
#: messages lists with wrong members mixed between real messages
_MESSAGES = st.one_of(
    _JUNK,
    st.lists(st.one_of(_JUNK, st.just(Message.user("hi")), st.just(Message.assistant("yo"))), min_size=1, max_size=4),
)
_PAUSES = st.one_of(_JUNK, st.just(KEEP_PAUSE))
_FACT = st.builds(Fact, st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8))
_FACTS = st.one_of(_JUNK, st.lists(st.one_of(_JUNK, _FACT), max_size=3))


def _typed_or_nothing(exc: BaseException) -> None:
    assert isinstance(exc, BeamfilterError), f"raw {type(exc).__name__}: {exc}"
    assert isinstance(exc, ConfigError | StoreError), type(exc)


async def _call(coro: Any) -> BaseException | None:
    try:
        await coro
    except Exception as exc:  # noqa: BLE001  # the assertion below is the point
        _typed_or_nothing(exc)
        return exc
    return None


@_FUZZ
@given(conversation_id=_JUNK, messages=_MESSAGES, pause=_PAUSES)
async def test_append_with_malformed_arguments_is_typed_and_writes_nothing(
    store: ChatStore, conversation_id: Any, messages: Any, pause: Any
) -> None:
    stable = f"stable{next(_IDS)}"
    await store.append(stable, [Message.user("kept")])
    for cid in (conversation_id, stable):
        failed = await _call(store.append(cid, messages, pause=pause))
        if failed is not None and cid == stable:
            assert await store.load(stable) == [Message.user("kept")]  # nothing half-written
            assert await store.load_pause(stable) is None


@_FUZZ
@given(conversation_id=_JUNK, limit=_JUNK, pause_id=_JUNK, pause=_JUNK)
async def test_reads_and_pause_calls_with_malformed_arguments_are_typed(
    store: ChatStore, conversation_id: Any, limit: Any, pause_id: Any, pause: Any
) -> None:
    await _call(store.load(conversation_id, limit))
    await _call(store.load(f"c{next(_IDS)}", limit))
    await _call(store.clear(conversation_id))
    await _call(store.save_pause(conversation_id, pause))
    await _call(store.load_pause(conversation_id))
    await _call(store.take_pause(conversation_id, pause_id))
    await _call(store.take_pause(f"c{next(_IDS)}", pause_id))
    await _call(store.clear_pause(conversation_id))


@_FUZZ
@given(user_id=_JUNK, facts=_FACTS)
async def test_fact_calls_with_malformed_arguments_are_typed(store: ChatStore, user_id: Any, facts: Any) -> None:
    stable = f"user{next(_IDS)}"
    await store.save_facts(stable, [Fact("drink", "likes tea")])
    for uid in (user_id, stable):
        failed = await _call(store.save_facts(uid, facts))
        if failed is not None and uid == stable:
            assert [f.text for f in await store.load_facts(stable)] == ["likes tea"]
    await _call(store.load_facts(user_id))
    await _call(store.clear_facts(user_id))


_ROW_SHAPES = st.one_of(
    st.text(max_size=30),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
        max_leaves=10,
    ).map(json.dumps),
    st.fixed_dictionaries(
        {"role": st.one_of(st.sampled_from(["user", "assistant", "tool", "system", "robot"]), _SCALARS)},
        optional={
            "content": st.one_of(_SCALARS, st.lists(_SCALARS, max_size=2)),
            "tool_calls": st.one_of(_SCALARS, st.lists(st.dictionaries(st.text(max_size=5), _SCALARS), max_size=2)),
            "tool_call_id": _SCALARS,
        },
    ).map(lambda row: json.dumps(row, default=repr)),
    st.just("[" * 100_000 + "]" * 100_000),
)


@_FUZZ
@given(row=_ROW_SHAPES)
async def test_a_stored_row_of_any_shape_loads_or_is_a_store_error(store: ChatStore, row: str) -> None:
    cid = f"row{next(_IDS)}"
    await store.append(cid, [Message.user("before")])
    await _raw_append(store, cid, row)
    failed: BaseException | None = None
    try:
        loaded = await store.load(cid)
    except Exception as exc:  # noqa: BLE001  # checked below: a StoreError naming the conversation
        failed = exc
    if failed is not None:
        assert type(failed) is StoreError, f"raw {type(failed).__name__}: {failed}"
        assert f"conversation '{cid}'" in str(failed)
    else:
        assert loaded[0] == Message.user("before")
        assert all(isinstance(m, Message) for m in loaded)


async def test_a_pause_that_is_not_a_pause_state_is_refused_before_anything_is_written(store: ChatStore) -> None:
    call = ToolCall("t", {}, "c1")
    real = PauseState((Message.assistant(None, (call,)),), (call,), ("c1",))
    await store.append("p", [Message.user("hi")], pause=real)
    for wrong in ({"calls": []}, "paused", 5, [real]):
        with pytest.raises(ConfigError):
            await store.append("p", [Message.user("more")], pause=wrong)  # type: ignore[arg-type]
    assert await store.load("p") == [Message.user("hi")]
    kept = await store.load_pause("p")
    assert kept is not None
    assert kept.calls == (call,)


async def test_messages_or_facts_that_are_not_a_list_are_config_errors_naming_them(store: ChatStore) -> None:
    with pytest.raises(ConfigError) as caught:
        await store.append("c", None)  # type: ignore[arg-type]
    assert str(caught.value) == "append(messages=None) is a NoneType; give a list of beamfilter_core.Message values."
    with pytest.raises(ConfigError, match=r"^append\(messages='hi'\) is a str; give a list"):
        await store.append("c", "hi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as caught:
        await store.save_facts("u", 5)  # type: ignore[arg-type]
    assert str(caught.value) == "save_facts(facts=5) is a int; give a list of beamfilter_memory.Fact values."
    assert await store.load("c") == []
    assert await store.load_facts("u") == []
