"""The long_term_memory filter through a real Kernel with ScriptedModel, on every store."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support import slow_tool
from memory._tools import pause_gate, transfer

from beamfilter_core import (
    BuildContext,
    CancelToken,
    ChatResponse,
    Decision,
    Kernel,
    Message,
    Registry,
    ScriptedModel,
    StaticEntryPoint,
    ToolCall,
)
from beamfilter_core.errors import ConfigError, ScriptExhaustedError
from beamfilter_core.testing import run_turn
from beamfilter_memory import (
    DEFAULT_EXTRACT_PROMPT,
    DEFAULT_HEADER,
    ChatStore,
    Fact,
    InMemoryStore,
    long_term_memory_filter,
    memory_filter,
)

pytestmark = pytest.mark.anyio

U, A = Message.user, Message.assistant
ADA = "The user's name is Ada."
PARIS = "The user lives in Paris."


def _note(*facts: str, system: str | None = None) -> Message:
    note = "\n".join([DEFAULT_HEADER, *(f"- {fact}" for fact in facts)])
    return Message.system(f"{system}\n\n{note}" if system else note)


def _ctx(conversation: str, user: str = "ada") -> dict[str, str]:
    return {"conversation_id": conversation, "user_id": user}


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_facts_of_one_conversation_are_told_in_the_next_and_never_stored_as_history(
    store: ChatStore, stream: bool
) -> None:
    model = ScriptedModel(["Hello Ada!", "Sunny in Paris.", "Noted, Addie."])
    kernel = Kernel(model, filters=[memory_filter(store), long_term_memory_filter(store)], system_prompt="Be brief.")
    first, text = await run_turn(kernel, "Hi, my name is Ada and I live in Paris.", stream, context=_ctx("c1"))
    assert (first.status, first.text, text) == ("completed", "Hello Ada!", "Hello Ada!" if stream else None)
    assert model.requests[0].messages == (Message.system("Be brief."), U("Hi, my name is Ada and I live in Paris."))
    assert await store.load_facts("ada") == [Fact("name", ADA), Fact("home", PARIS)]

    # A new conversation: the facts travel in the system prompt, not in the history.
    await run_turn(kernel, "What's the weather?", stream, context=_ctx("c2"))
    assert model.requests[1].messages == (_note(ADA, PARIS, system="Be brief."), U("What's the weather?"))
    assert await store.load("c2") == [U("What's the weather?"), A("Sunny in Paris.")]

    # A new name replaces the old one; a new subject is added; the newest come last.
    await run_turn(kernel, "Call me Addie. My name is Adelaide!", stream, context=_ctx("c2"))
    assert model.requests[2].messages == (
        _note(ADA, PARIS, system="Be brief."),
        U("What's the weather?"),
        A("Sunny in Paris."),
        U("Call me Addie. My name is Adelaide!"),
    )
    assert await store.load_facts("ada") == [
        Fact("home", PARIS),
        Fact("preferred name", "The user wants to be called Addie."),
        Fact("name", "The user's name is Adelaide."),
    ]
    assert await store.load("c2") == [
        U("What's the weather?"),
        A("Sunny in Paris."),
        U("Call me Addie. My name is Adelaide!"),
        A("Noted, Addie."),
    ]


async def test_users_are_isolated(store: ChatStore) -> None:
    model = ScriptedModel(["Hi Ada.", "Hi.", "Tea it is.", "Hello again."])
    kernel = Kernel(model, filters=[memory_filter(store), long_term_memory_filter(store)])
    await kernel.run("my name is Ada", context=_ctx("a1"))
    await kernel.run("Hello, who am I?", context=_ctx("b1", "bob"))
    await kernel.run("I prefer green tea, thanks", context=_ctx("b1", "bob"))
    await kernel.run("Hello", context=_ctx("a2"))
    assert model.requests[1].messages == (U("Hello, who am I?"),)  # nothing known about bob yet
    assert model.requests[3].messages == (_note(ADA), U("Hello"))
    assert await store.load_facts("ada") == [Fact("name", ADA)]
    assert await store.load_facts("bob") == [Fact("preference: green tea", "The user prefers green tea.")]


async def test_without_a_user_id_nothing_is_told_or_stored(
    make_store: Callable[..., ChatStore], tmp_path: Path
) -> None:
    store = make_store("sqlite")
    try:
        await store.save_facts("ada", [Fact("name", ADA)])
        model = ScriptedModel(["Hi Bob!", "Hi!"])
        kernel = Kernel(model, filters=[long_term_memory_filter(store)], system_prompt="Be brief.")
        await kernel.run("My name is Bob.", context={"conversation_id": "c"})
        await kernel.run("My name is Bob.")
        assert [r.messages for r in model.requests] == [(Message.system("Be brief."), U("My name is Bob."))] * 2
    finally:
        await store.aclose()
    with sqlite3.connect(tmp_path / "memory.db") as conn:
        rows = conn.execute("SELECT user_id, subject, text FROM beamfilter_facts").fetchall()
    conn.close()
    assert rows == [("ada", "name", ADA)]


async def test_relevant_facts_by_bm25_plus_the_newest() -> None:
    store = InMemoryStore()
    await store.save_facts(
        "ada",
        [
            Fact("name", ADA),
            Fact("home", PARIS),
            Fact("job", "The user works as a pilot."),
            Fact("pet", "The user has a cat named Tom."),
            Fact("preference: tea", "The user prefers tea."),
        ],
    )
    model = ScriptedModel(["a", "b", "c"])
    kernel = Kernel(model, filters=[long_term_memory_filter(store, top_k=2, recent=1)])
    await kernel.run("Any restaurant tips for Paris?", context=_ctx("c1"))
    await kernel.run("How is my cat doing? And what is my job again?", context=_ctx("c2"))
    await kernel.run("Hello!", context=_ctx("c3"))
    assert [r.messages[0] for r in model.requests] == [
        _note(PARIS, "The user prefers tea."),
        _note("The user works as a pilot.", "The user has a cat named Tom.", "The user prefers tea."),
        _note("The user prefers tea."),
    ]
    none = Kernel(ScriptedModel(["x"]), filters=[long_term_memory_filter(store, top_k=0, recent=0)])
    await none.run("Paris?", context=_ctx("c4"))
    assert none.model.requests[0].messages == (U("Paris?"),)  # type: ignore[attr-defined]


async def test_custom_rules_header_and_an_unchanged_fact_keeps_its_age() -> None:
    store = InMemoryStore()
    rules = [{"pattern": r"\bI work (?:at|for) {value}", "subject": "job", "fact": "The user works at {value}."}]
    flt = long_term_memory_filter(store, rules=rules, header="About the user:")
    model = ScriptedModel(["ok", "ok", "ok"])
    kernel = Kernel(model, filters=[flt])
    await kernel.run("I work at ACME Corp, and my name is Ada.", context=_ctx("c1"))
    assert await store.load_facts("ada") == [Fact("job", "The user works at ACME Corp.")]
    await store.save_facts("ada", [Fact("pet", "The user has a cat.")])
    await kernel.run("Yes, I work for ACME Corp", context=_ctx("c1"))
    assert await store.load_facts("ada") == [
        Fact("job", "The user works at ACME Corp."),
        Fact("pet", "The user has a cat."),
    ]
    await kernel.run("hi", context=_ctx("c1"))
    assert model.requests[2].messages[0] == Message.system(
        "About the user:\n- The user works at ACME Corp.\n- The user has a cat."
    )


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_a_model_extracts_facts_as_a_json_list(store: ChatStore, stream: bool) -> None:
    extractor = ScriptedModel(
        [
            '```json\n[{"subject": "Job", "fact": "The user works as a pilot."}]\n```',
            '[{"subject": "job", "fact": "The user works as a teacher now."}, {"subject": "city", "text": "Lyon"}]',
        ]
    )
    model = ScriptedModel(["Nice!", "Congrats!"])
    flt = long_term_memory_filter(store, extract="model", model=extractor)
    kernel = Kernel(model, filters=[memory_filter(store), flt])
    await run_turn(kernel, "I fly planes for a living.", stream, context=_ctx("c1"))
    assert extractor.requests[0].messages == (
        U(DEFAULT_EXTRACT_PROMPT.replace("{facts}", "[]").replace("{messages}", "I fly planes for a living.")),
    )
    assert await store.load_facts("ada") == [Fact("job", "The user works as a pilot.")]
    await run_turn(kernel, "I switched jobs: I teach in Lyon now.", stream, context=_ctx("c1"))
    known = '[{"subject": "job", "fact": "The user works as a pilot."}]'
    assert extractor.requests[1].messages == (
        U(
            DEFAULT_EXTRACT_PROMPT.replace("{facts}", known).replace(
                "{messages}", "I switched jobs: I teach in Lyon now."
            )
        ),
    )
    assert model.requests[1].messages[0] == _note("The user works as a pilot.")
    assert await store.load_facts("ada") == [Fact("job", "The user works as a teacher now."), Fact("city", "Lyon")]


async def test_the_kernels_model_extracts_when_built_with_one() -> None:
    store = InMemoryStore()
    model = ScriptedModel(["Hello Ada!", '[{"subject": "name", "fact": "The user\'s name is Ada."}]'])
    flt = long_term_memory_filter(store, extract="model", build=BuildContext(model=model))
    kernel = Kernel(model, filters=[flt])
    result = await kernel.run("I'm Ada", context=_ctx("c1"))
    assert result.text == "Hello Ada!"
    assert len(model.requests) == 2
    assert await store.load_facts("ada") == [Fact("name", ADA)]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("The user is Ada.", "Expecting value: line 1 column 1 (char 0)"),
        ('{"subject": "name", "fact": "x"}', "expected a JSON list of facts, got dict"),
        ('[{"subject": "name"}]', "item 0 is {'subject': 'name'}; expected {'subject': str, 'fact': str}"),
        ('[{"subject": "name", "fact": "ok"}, 3]', "item 1 is 3; expected {'subject': str, 'fact': str}"),
        (
            '[{"subject": " ", "fact": "ok"}]',
            "item 0 is {'subject': ' ', 'fact': 'ok'}; expected {'subject': str, 'fact': str}",
        ),
    ],
)
async def test_malformed_model_output_is_logged_and_stores_nothing(
    answer: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = InMemoryStore()
    flt = long_term_memory_filter(store, extract="model", model=ScriptedModel([answer]))
    kernel = Kernel(ScriptedModel(["Hi!"]), filters=[flt])
    with caplog.at_level(logging.WARNING, logger="beamfilter"):
        result = await kernel.run("I'm Ada", context=_ctx("c1"))
    assert (result.status, result.text) == ("completed", "Hi!")
    assert await store.load_facts("ada") == []
    assert [r.getMessage() for r in caplog.records] == [
        f"long_term_memory: malformed extraction output {answer!r} ({reason}); no facts stored"
    ]


async def test_a_failing_extraction_model_is_logged_and_stores_nothing(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryStore()
    flt = long_term_memory_filter(store, extract="model", model=ScriptedModel([]))
    kernel = Kernel(ScriptedModel(["Hi!"]), filters=[flt])
    with caplog.at_level(logging.WARNING, logger="beamfilter"):
        result = await kernel.run("I'm Ada", context=_ctx("c1"))
    assert result.text == "Hi!"
    assert await store.load_facts("ada") == []
    [record] = caplog.records
    assert record.getMessage() == "long_term_memory: the extraction model failed; no facts stored"
    assert record.exc_info is not None
    assert type(record.exc_info[1]) is ScriptExhaustedError


async def test_paused_cancelled_and_failed_turns_extract_nothing_and_a_resume_only_injects(store: ChatStore) -> None:
    await store.save_facts("ada", [Fact("home", PARIS)])
    call = ToolCall("transfer", {"amount": 5}, "call_t")
    model = ScriptedModel([ChatResponse.tool_calls(call), "Done, 5 moved."])
    filters = [memory_filter(store), long_term_memory_filter(store)]
    kernel = Kernel(model, tools=[transfer], filters=filters, gate=pause_gate)
    paused = await kernel.run("My name is Ada, pay 5", context=_ctx("c1"))
    assert paused.status == "paused"
    assert await store.load_facts("ada") == [Fact("home", PARIS)]
    done = await kernel.resume(conversation_id="c1", decisions={"call_t": Decision.approve()})
    assert (done.status, done.text) == ("completed", "Done, 5 moved.")
    assert model.requests[1].messages[0] == _note(PARIS)  # the resumed turn is told the facts
    assert await store.load_facts("ada") == [Fact("home", PARIS)]  # a decision is no user text

    slow, started = slow_tool()

    slow_kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("slow", {}, "call_s"))]), tools=[slow], filters=filters
    )
    token = CancelToken()
    task = asyncio.create_task(slow_kernel.run("My name is Ada", context=_ctx("c2"), cancel=token))
    await asyncio.wait_for(started.wait(), 5)
    token.cancel()
    assert (await asyncio.wait_for(task, 5)).status == "cancelled"
    failing = Kernel(ScriptedModel([]), filters=filters)
    with pytest.raises(ScriptExhaustedError):
        await failing.run("My name is Ada", context=_ctx("c3"))
    assert await store.load_facts("ada") == [Fact("home", PARIS)]


def _registry() -> Registry:
    memory = StaticEntryPoint("memory", "beamfilter_memory._plugin", "beamfilter-memory", "0.1.0")
    return Registry(entry_points=[memory], environ={})


async def test_a_config_enables_long_term_memory_with_the_kernels_model(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chats.db'}"
    config = {
        "model": {
            "use": "scripted",
            "script": ["Hello!", '[{"subject": "name", "fact": "The user is Ada."}]', "Hi Ada"],
        },
        "filters": [{"use": "memory", "store": url}, {"use": "long_term_memory", "store": url, "extract": "model"}],
    }
    kernel = Kernel.from_config(config, registry=_registry())
    try:
        await kernel.run("I'm Ada", context=_ctx("c1"))
        await kernel.run("Hi", context=_ctx("c2"))
        requests = kernel.model.requests  # type: ignore[attr-defined]
        assert requests[2].messages == (_note("The user is Ada."), U("Hi"))
        assert await kernel.filters[1].extras["store"].load_facts("ada") == [Fact("name", "The user is Ada.")]
    finally:
        for flt in kernel.filters:
            await flt.extras["store"].aclose()


async def test_bad_options_and_user_ids_are_config_errors() -> None:
    store = InMemoryStore()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"extract": "magic"}, "long_term_memory(extract='magic') is invalid; give 'rules' or 'model'."),
        ({"top_k": -1}, "long_term_memory(top_k=-1) is invalid; give a whole number >= 0."),
        ({"recent": True}, "long_term_memory(recent=True) is invalid; give a whole number >= 0."),
        ({"header": " "}, "long_term_memory(header=' ') is invalid; give a non-empty str."),
        (
            {"rules": [("I work at", "job", "x")]},
            "long_term_memory(rules[0].pattern='I work at') captures nothing; put {value} (or a group) where the "
            "fact's value is, e.g. 'I work at {value}'.",
        ),
        (
            {"rules": [{"pattern": "({value}", "subject": "s", "fact": "f"}]},
            "long_term_memory(rules[0].pattern='({value}') is not a valid regular expression: ",
        ),
        (
            {"rules": [{"pattern": "x {value}", "subject": "s"}]},
            "long_term_memory(rules[0]) is {'pattern': 'x {value}', 'subject': 's'}; give non-empty strings "
            "'pattern', 'subject' and 'fact' (and no other keys).",
        ),
        (
            {"extract": "model"},
            "long_term_memory(extract='model') needs a model: pass model=, or build the kernel with "
            "Kernel.from_config (the kernel's model is used).",
        ),
        (
            {"extract": "model", "model": "small"},
            "long_term_memory(model='small'): no such model in [models]; known: none.",
        ),
        (
            {"extract": "model", "model": ScriptedModel(["x"]), "prompt": "no placeholder"},
            "long_term_memory(prompt='no placeholder') is invalid; give a str with '{messages}' (and optionally "
            "'{facts}').",
        ),
    ]
    for options, message in cases:
        with pytest.raises(ConfigError) as caught:
            long_term_memory_filter(store, **options)
        assert str(caught.value).startswith(message), options
    with pytest.raises(ConfigError) as caught:
        long_term_memory_filter(object())  # type: ignore[arg-type]
    assert str(caught.value).startswith("long_term_memory(store=<object object at ")
    assert str(caught.value).endswith(
        "is not a FactStore: it lacks save_facts, load_facts, clear_facts. Give a store URL such as "
        "'sqlite:///chats.db' or an object with async save_facts, load_facts, clear_facts."
    )
    kernel = Kernel(ScriptedModel(["x"]), filters=[long_term_memory_filter(store)])
    with pytest.raises(ConfigError, match=r"^user_id is 42 \(a int\); give a non-empty str"):
        await kernel.run("hi", context={"user_id": 42})


def test_fact_ranking_uses_the_shared_bm25_stems_and_ignores_the_word_user() -> None:
    from beamfilter_memory._long_term import rank_facts

    home, job = Fact("home", PARIS), Fact("job", "The user works as a pilot.")
    assert rank_facts([home, job], "Where does she live?", 1, 0) == [home]  # live = lives
    assert rank_facts([home, job], "what about the user?", 5, 0) == []  # only stop words and "user"
    assert rank_facts([home, job], "", 5, 1) == [job]  # the newest is always told
    assert rank_facts([], "Paris", 5, 5) == []
    assert rank_facts([home, job], "Paris pilot", 0, 0) == []  # top_k 0: none by relevance


def test_fact_ranking_counts_a_query_word_once_and_prefers_the_newest_on_ties() -> None:
    from beamfilter_memory._long_term import rank_facts

    cat, dog = Fact("pet", "The user has a cat."), Fact("pet", "The user has a dog.")
    # "cat" twice weighs as much as "dog" once: a tie, so the newer fact wins.
    assert rank_facts([cat, dog], "cat cat dog", 1, 0) == [dog]
    assert rank_facts([dog, cat], "cat cat dog", 1, 0) == [cat]
    assert rank_facts([cat, dog], "cat", 1, 0) == [cat]
    # a fact matching two words beats one matching one; both are told in stored order
    both = Fact("pet", "The user has a cat and a dog.")
    assert rank_facts([both, cat, dog], "cat dog", 1, 0) == [both]
    assert rank_facts([cat, both, dog], "cat dog", 2, 0) == [both, dog]
