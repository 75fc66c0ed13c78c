"""The long-term memory filter: durable facts about each user, kept apart from conversations.

How a run is served (see docs/memory.md, "Long-term memory"):

- The turn hook loads the user's facts (``context["user_id"]``) once per turn, picks the
  ones relevant to the entry message (BM25 over the facts, ``top_k``) plus the ``recent``
  newest, and keeps a note listing them in the filter's state.
- The chat hook appends that note to ``ChatRequest.system`` on every LLM call of the turn.
  The kernel's chat terminal turns ``system`` into the prompt's leading system message,
  which the conversation ``memory`` filter never stores: facts never leak into history.
- After a **completed** turn the user's messages of the turn are read for new facts (by
  rules, or by a model answering a JSON list); a fact on a known subject replaces the
  stored one. Paused, cancelled and failed turns extract nothing; a resumed turn (whose
  entry is a decision, not new user text) only injects.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from beamfilter_core import (
    BuildContext,
    ChatRequest,
    ChatResponse,
    Filter,
    Message,
    TurnRequest,
    TurnResult,
    options_schema,
)
from beamfilter_core.errors import ConfigError
from beamfilter_core.text import BM25Index, analyze

from ._options import LONG_TERM_OPTIONS
from ._stores import resolve_store
from ._stores._base import FACT_METHODS, Fact, FactStore, check_user_id

log = logging.getLogger("beamfilter")

_UID = "user_id"

#: The value a rule captures: up to the end of the clause ("and", "but", punctuation).
_VALUE = r"(.+?)(?=\s+(?:and|but|so|because|which|who)\b|[.,;:!?\n]|$)"

#: ``(pattern, subject, fact)``: ``{value}`` in the pattern is the captured value; in the
#: subject and fact it is replaced by it. Patterns match case-insensitively.
DEFAULT_RULES: Final[tuple[tuple[str, str, str], ...]] = (
    (r"\bmy name is {value}", "name", "The user's name is {value}."),
    (r"\bcall me {value}", "preferred name", "The user wants to be called {value}."),
    (r"\bI live in {value}", "home", "The user lives in {value}."),
    (r"\bI prefer {value}", "preference: {value}", "The user prefers {value}."),
)

#: First line of the note added to the system prompt; the facts follow, one per line.
DEFAULT_HEADER = "Known facts about the user, from earlier conversations:"

#: ``{facts}`` (the stored ones, as JSON) and ``{messages}`` (the user's messages) are replaced.
DEFAULT_EXTRACT_PROMPT = (
    "Extract durable facts about the user (name, home, job, preferences, ...) from the user's "
    "messages below. Reply with a JSON list only, one object per fact: "
    '[{"subject": "name", "fact": "The user\'s name is Ada."}]; reuse the subject of a known '
    "fact to replace it; reply [] when there is nothing durable.\n\n"
    "Known facts: {facts}\n\nUser messages:\n{messages}"
)

_SPACE = re.compile(r"\s+")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_MAX_VALUE = 120
# Every fact is about "the user": the word says nothing about which one is relevant.
_FACT_STOP = frozenset({"user"})


def _terms(text: str) -> list[str]:
    return [term for term in analyze(text) if term not in _FACT_STOP]


def rank_facts(facts: Sequence[Fact], query: str, top_k: int, recent: int) -> list[Fact]:
    """The facts to tell the model: the ``top_k`` best BM25 matches of ``query`` (score > 0;
    :mod:`beamfilter_core.text`, stop words and the word "user" dropped, words stemmed; among
    equal scores the newest) and the ``recent`` newest, in stored order (oldest first).

    Example::

        rank_facts([Fact("home", "The user lives in Paris.")], "weather in paris?", 3, 0)
    """
    count = len(facts)
    if not count:
        return []
    chosen = set(range(max(0, count - recent), count))
    terms = [(term, 1.0) for term in dict.fromkeys(_terms(query))]  # each query term once
    if terms and top_k:
        index = BM25Index(
            ((str(position), ((f"{fact.subject} {fact.text}", 1.0),)) for position, fact in enumerate(facts)),
            analyzer=_terms,
        )
        scored = sorted(index.term_scores(terms), key=lambda item: (-item[1], -int(item[0])))  # ties: newest
        chosen.update(int(key) for key, _ in scored[:top_k])
    return [facts[position] for position in sorted(chosen)]


def render_note(facts: Sequence[Fact], header: str = DEFAULT_HEADER) -> str:
    """The text added to the system prompt: ``header`` then one ``- fact`` line each."""
    return "\n".join([header, *(f"- {fact.text}" for fact in facts)])


def _clean_value(value: str) -> str:
    value = _SPACE.sub(" ", value).strip().strip("\"'`*")
    return value[:_MAX_VALUE].rstrip()


class _Rule:
    __slots__ = ("fact", "pattern", "subject")

    def __init__(self, pattern: re.Pattern[str], subject: str, fact: str) -> None:
        self.pattern = pattern
        self.subject = subject
        self.fact = fact


def _compile_rules(rules: Any) -> list[_Rule]:
    if isinstance(rules, str | bytes) or not isinstance(rules, Sequence):
        msg = (
            f"long_term_memory(rules={rules!r}) is invalid; give a list of rules, each "
            "{'pattern': 'I work at {value}', 'subject': 'job', 'fact': 'The user works at {value}.'}."
        )
        raise ConfigError(msg)
    compiled: list[_Rule] = []
    for index, rule in enumerate(rules):
        if isinstance(rule, Mapping):
            parts = (rule.get("pattern"), rule.get("subject"), rule.get("fact"))
            extra = set(rule) - {"pattern", "subject", "fact"}
        elif isinstance(rule, tuple | list) and len(rule) == 3:
            parts, extra = tuple(rule), set()
        else:
            parts, extra = (None, None, None), set()
        pattern, subject, fact = parts
        if extra or not all(isinstance(part, str) and part for part in parts):
            msg = (
                f"long_term_memory(rules[{index}]) is {rule!r}; give non-empty strings 'pattern', "
                "'subject' and 'fact' (and no other keys)."
            )
            raise ConfigError(msg)
        pattern, subject, fact = (str(part) for part in parts)
        try:
            regex = re.compile(pattern.replace("{value}", _VALUE), re.IGNORECASE)
        except re.error as exc:
            msg = f"long_term_memory(rules[{index}].pattern={pattern!r}) is not a valid regular expression: {exc}."
            raise ConfigError(msg) from exc
        if regex.groups < 1:
            msg = (
                f"long_term_memory(rules[{index}].pattern={pattern!r}) captures nothing; put {{value}} "
                "(or a group) where the fact's value is, e.g. 'I work at {value}'."
            )
            raise ConfigError(msg)
        compiled.append(_Rule(regex, subject, fact))
    return compiled


def extract_by_rules(texts: Sequence[str], rules: Sequence[_Rule]) -> list[Fact]:
    """Facts the rules find in ``texts``, in the order they occur."""
    found: list[tuple[int, int, Fact]] = []
    for number, text in enumerate(texts):
        for rule in rules:
            for match in rule.pattern.finditer(text):
                value = _clean_value(match.group(1))
                if value:
                    subject = _SPACE.sub(" ", rule.subject.replace("{value}", value.lower())).strip()
                    found.append((number, match.start(), Fact(subject, rule.fact.replace("{value}", value))))
    found.sort(key=lambda item: (item[0], item[1]))
    return [fact for _, _, fact in found]


def parse_model_facts(text: str) -> list[Fact]:
    """The facts of a model's JSON answer; ValueError says what is wrong with it."""
    body = _FENCE.sub("", text.strip())
    data = json.loads(body)
    if not isinstance(data, list):
        msg = f"expected a JSON list of facts, got {type(data).__name__}"
        raise ValueError(msg)  # reported as malformed output, like a json error
    facts: list[Fact] = []
    for index, item in enumerate(data):
        subject = item.get("subject") if isinstance(item, dict) else None
        fact = item.get("fact", item.get("text")) if isinstance(item, dict) else None
        if not (isinstance(subject, str) and subject.strip() and isinstance(fact, str) and fact.strip()):
            msg = f"item {index} is {item!r}; expected {{'subject': str, 'fact': str}}"
            raise ValueError(msg)
        facts.append(Fact(_SPACE.sub(" ", subject).strip().lower(), _SPACE.sub(" ", fact).strip()))
    return facts


def _pick_model(model: Any, build: BuildContext | None) -> Any:
    if isinstance(model, str):
        known = dict(build.models) if build is not None else {}
        chosen = known.get(model)
        if chosen is None:
            msg = (
                f"long_term_memory(model={model!r}): no such model in [models]; "
                f"known: {', '.join(sorted(known)) or 'none'}."
            )
            raise ConfigError(msg)
    else:
        chosen = model if model is not None else (build.model if build is not None else None)
    if chosen is None:
        msg = (
            "long_term_memory(extract='model') needs a model: pass model=, or build the kernel with "
            "Kernel.from_config (the kernel's model is used)."
        )
        raise ConfigError(msg)
    if not callable(getattr(chosen, "complete", None)):
        msg = f"long_term_memory(model={model!r}) is not a ChatModel (it has no complete() method)."
        raise ConfigError(msg)
    return chosen


@options_schema(LONG_TERM_OPTIONS, owner="long_term_memory")
def long_term_memory_filter(
    store: str | FactStore = "sqlite:///beamfilter.db",
    *,
    extract: str = "rules",
    rules: Sequence[Mapping[str, str] | tuple[str, str, str]] = DEFAULT_RULES,
    model: Any = None,
    prompt: str = DEFAULT_EXTRACT_PROMPT,
    top_k: int = 5,
    recent: int = 3,
    header: str = DEFAULT_HEADER,
    name: str = "long_term_memory",
    build: BuildContext | None = None,
) -> Filter:
    """Durable facts about each user (``context["user_id"]``), told to the model in every turn.

    Before a turn the user's stored facts are ranked against the entry message (BM25,
    ``top_k`` best matches, plus the ``recent`` newest) and added to the system prompt as
    ``header`` and one ``- fact`` line each; the conversation ``memory`` filter never
    stores the system prompt, so facts stay out of the history. After a completed turn the
    user's messages of the turn are read for new facts, which replace stored facts on the
    same subject. Without a ``user_id`` the filter passes through and stores nothing.

    Args:
        store: a store URL of this package (the default is the memory filter's default
            file) or an object with async ``save_facts``, ``load_facts``, ``clear_facts``.
        extract: ``"rules"`` (regular expressions, ``rules``) or ``"model"`` (``model``
            answers ``prompt`` with a JSON list of ``{"subject", "fact"}`` objects;
            malformed answers are logged and store nothing).
        rules: ``(pattern, subject, fact)`` triples or mappings with those keys; ``{value}``
            in the pattern captures the value, in subject and fact it is replaced by it.
        model: a ChatModel or the name of a model in the config's ``[models]``; default the
            kernel's model (``build.model``) when built from config.
        prompt: the extraction instruction, with ``{messages}`` and optionally ``{facts}``.
        top_k: at most this many facts matching the entry message.
        recent: always this many of the newest facts.
        header: the note's first line.
        name: the filter's name.
        build: given by ``Kernel.from_config``.

    Returns:
        A :class:`Filter` (turn and chat scope) with ``extras={"store": store}``; the store
        is also in ``resources``, closed by ``Kernel.aclose()``.

    Example::

        kernel = Kernel(model, filters=[memory_filter(url), long_term_memory_filter(url)])
        await kernel.run("Hi, my name is Ada", context={"conversation_id": "c1", "user_id": "ada"})
    """
    k, newest = top_k, recent
    compiled = _compile_rules(rules) if extract == "rules" else []
    chosen: Any = _pick_model(model, build) if extract == "model" else None
    fact_store: FactStore = resolve_store(
        store, build, owner="long_term_memory", kind="FactStore", methods=FACT_METHODS
    )
    load_facts = fact_store.load_facts
    save_facts = fact_store.save_facts

    async def by_model(texts: list[str], known: list[Fact]) -> list[Fact]:
        facts_json = json.dumps([{"subject": f.subject, "fact": f.text} for f in known], ensure_ascii=False)
        text = prompt.replace("{facts}", facts_json).replace("{messages}", "\n".join(texts))
        try:
            response = await chosen.complete(ChatRequest((Message.user(text),)))
        except Exception:  # facts are never worth failing a completed turn
            log.warning("long_term_memory: the extraction model failed; no facts stored", exc_info=True)
            return []
        answer = response.message.text
        try:
            return parse_model_facts(answer)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError too
            log.warning("long_term_memory: malformed extraction output %r (%s); no facts stored", answer, exc)
            return []

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        uid = request.context.get(_UID)
        if uid is None:
            state.clear()
            return await call_next(request)
        uid = check_user_id(uid)
        known = await load_facts(uid)
        texts = [m.text for m in request.messages if m.role == "user" and m.text.strip()]
        picked = rank_facts(known, "\n".join(texts), k, newest)
        state["note"] = render_note(picked, header) if picked else None
        state["system"] = None  # cache: the last system prompt seen and its extension
        result = await call_next(request)
        if result.status != "completed" or request.resume or not texts:
            return result
        new = await by_model(texts, known) if chosen is not None else extract_by_rules(texts, compiled)
        stored = {fact.subject: fact.text for fact in known}
        new = [fact for fact in new if stored.get(fact.subject) != fact.text]  # unchanged facts keep their age
        if new:
            await save_facts(uid, new)
        state["extracted"] = new
        return result

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        note = state.get("note")
        if note is None:
            return await call_next(request)
        system = request.system
        cached = state["system"]
        if cached is not None and cached[0] == system:
            extended = cached[1]
        else:
            extended = f"{system}\n\n{note}" if system else note
            state["system"] = (system, extended)
        return await call_next(request.replace(system=extended))

    closable = (fact_store,) if callable(getattr(fact_store, "aclose", None)) else ()
    return Filter(
        name, around_turn=around_turn, around_chat=around_chat, resources=closable, extras={"store": fact_store}
    )
