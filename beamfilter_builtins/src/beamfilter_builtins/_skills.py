"""``skills``: a catalogue of skills; the best match for each turn adds its instructions and tools."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from beamfilter_core import (
    BuildContext,
    ChatRequest,
    ChatResponse,
    Filter,
    FilterSpec,
    Message,
    Tool,
    TurnRequest,
    TurnResult,
    options_schema,
)
from beamfilter_core.errors import ConfigError
from beamfilter_core.text import STOP_WORDS, BM25Index, words

__all__ = [
    "DEFAULT_INDEX_HEADER",
    "SPEC",
    "BM25SkillRouter",
    "Skill",
    "SkillRouter",
    "load_skills",
    "parse_skill",
    "skills_filter",
]

#: The first line of the skill index added to the system prompt.
DEFAULT_INDEX_HEADER = "Skills (the one that fits the request is activated with its instructions):"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_FRONT = re.compile(r"\A---[ \t]*\n(?P<head>.*?)\n---[ \t]*(?:\n|\Z)(?P<body>.*)\Z", re.DOTALL)
_HEADING = re.compile(r"\A#[ \t]+(?P<name>[^\n]+)\n(?P<rest>.*)\Z", re.DOTALL)


def _tool_names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(slots=True)
class Skill:
    """One skill: what it is for (``description``, used for routing), what the model is
    told when it is active (``instructions``) and the tool names it enables."""

    name: str
    description: str
    instructions: str = ""
    tools: tuple[str, ...] = attrs.field(default=(), converter=_tool_names)


@runtime_checkable
class SkillRouter(Protocol):
    """Chooses the skill for a request: ``build(skills)`` once, then ``route(query)``."""

    def build(self, skills: Sequence[Skill]) -> None:
        """Index the catalogue."""

    def route(self, query: str) -> str | None:
        """The name of the best skill for ``query``, or None when none fits."""


class BM25SkillRouter:
    """BM25 over each skill's description (and its name, weighted x2); common English
    words of the query (``a``, ``the``, ``for``...: :data:`beamfilter_core.text.STOP_WORDS`)
    are ignored.

    Args:
        min_score: the best score must reach this, else no skill is chosen (default: any
            positive score).
    """

    def __init__(self, *, min_score: float = 0.0) -> None:
        self.min_score = min_score
        self._index = BM25Index(())

    def build(self, skills: Sequence[Skill]) -> None:
        """Index the names and descriptions."""
        self._index = BM25Index((s.name, ((s.name.replace("-", " "), 2), (s.description, 1))) for s in skills)

    def route(self, query: str) -> str | None:
        """The best-scoring skill, if its score is above ``min_score`` (common words ignored)."""
        found = self._index.term_scores([(t, 1.0) for t in words(query) if t not in STOP_WORDS])
        if not found or found[0][1] <= self.min_score:
            return None
        return found[0][0]


def _split_list(value: str) -> tuple[str, ...]:
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    return tuple(item.strip().strip("'\"") for item in value.split(",") if item.strip())


def parse_skill(text: str, *, source: str = "<text>", default_name: str | None = None) -> Skill:
    """Read one skill from Markdown.

    Front matter (``---`` lines around ``key: value`` lines: ``name``, ``description``,
    ``tools`` as ``a, b`` or ``[a, b]``) with the instructions as the body; or the heading
    convention: ``# name``, then the first paragraph is the description and the rest the
    instructions. Without a name, ``default_name`` (the file's stem) is used.

    Raises:
        ConfigError: no description, an unknown front-matter key or a bad name.
    """
    text = text.replace("\r\n", "\n").lstrip("\ufeff")
    fields: dict[str, str] = {}
    front = _FRONT.match(text)
    if front is not None:
        for number, line in enumerate(front["head"].splitlines(), start=2):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, colon, value = line.partition(":")
            key = key.strip()
            if not colon or key not in ("name", "description", "tools"):
                msg = (
                    f"{source}, line {number}: {line.strip()!r} is not a known front-matter field; "
                    "use 'name: ...', 'description: ...' or 'tools: a, b'."
                )
                raise ConfigError(msg)
            fields[key] = value.strip().strip("'\"")
        body = front["body"].strip()
    else:
        heading = _HEADING.match(text.lstrip("\n"))
        body = text.strip()
        if heading is not None:
            fields["name"] = heading["name"].strip()
            paragraphs = heading["rest"].strip().split("\n\n", 1)
            fields["description"] = " ".join(paragraphs[0].split())
            body = paragraphs[1].strip() if len(paragraphs) > 1 else ""
    name = fields.get("name") or default_name or ""
    if not _NAME.match(name):
        msg = f"{source}: the skill name {name!r} is invalid; use letters, digits, '_', '-' or '.'."
        raise ConfigError(msg)
    description = fields.get("description", "")
    if not description:
        msg = (
            f"{source}: the skill {name!r} has no description; add 'description: ...' to the front matter "
            "or a paragraph after the '# name' heading."
        )
        raise ConfigError(msg)
    return Skill(name, description, body, _split_list(fields.get("tools", "")))


def load_skills(folder: str | Path) -> list[Skill]:
    """Every ``*.md`` file of ``folder`` (sorted by file name) as a :class:`Skill`."""
    path = Path(folder)
    if not path.is_dir():
        msg = f"skills: the folder {str(path)!r} does not exist; give a folder of Markdown skill files."
        raise ConfigError(msg)
    return [
        parse_skill(file.read_text(encoding="utf-8"), source=str(file), default_name=file.stem)
        for file in sorted(path.glob("*.md"))
    ]


def _skill_of(item: Any, position: int) -> Skill:
    if isinstance(item, Skill):
        return item
    if isinstance(item, Mapping):
        unknown = set(item) - {"name", "description", "instructions", "tools"}
        name, description = item.get("name"), item.get("description")
        tools = item.get("tools", ())
        if (
            not unknown
            and isinstance(name, str)
            and _NAME.match(name)
            and isinstance(description, str)
            and description.strip()
            and isinstance(item.get("instructions", ""), str)
            and not isinstance(tools, str)
            and all(isinstance(t, str) for t in tools)
        ):
            return Skill(name, description, item.get("instructions", ""), tuple(tools))
    msg = (
        f"skills_filter: skills[{position}] is {item!r}; give a Skill or a table with name, description "
        "and optionally instructions and tools (a list of tool names)."
    )
    raise ConfigError(msg)


def _query(messages: Sequence[Message]) -> str | None:
    for message in reversed(messages):
        if message.role == "user":
            return message.text or None
    return None


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "skills": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]*$"},
                    "description": {"type": "string", "minLength": 1},
                    "instructions": {"type": "string"},
                    "tools": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["name", "description"],
                "additionalProperties": False,
                "x-hint": "a Skill or a table with name, description and optionally instructions and tools "
                "(a list of tool names)",
            },
        },
        "folder": {"type": "string", "minLength": 1, "x-path": True},
        "min_score": {"type": "number", "minimum": 0},
        "index_header": {"type": "string", "minLength": 1},
        "name": {"type": "string", "minLength": 1},
    },
    "anyOf": [{"required": ["skills"]}, {"required": ["folder"]}],
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def skills_filter(
    skills: Iterable[Skill | Mapping[str, Any]] | None = None,
    *,
    folder: str | None = None,
    tools: Sequence[Tool] = (),
    router: SkillRouter | None = None,
    min_score: float = 0.0,
    index_header: str = DEFAULT_INDEX_HEADER,
    build: BuildContext | None = None,
    name: str = "skills",
) -> Filter:
    """A turn + chat filter that routes each turn to the best-matching skill.

    Every LLM call gets a compact skill index (one ``- name: description`` line per
    skill) appended to the system prompt. Once per run, the last user entry message (on
    resume: the last user message of the prompt) is routed (BM25 over descriptions by
    default; a re-entry of the same run keeps the skill): the chosen skill's instructions are appended to
    the system prompt and its tools are advertised. A tool named by any skill is
    advertised only while one of its skills is active; other tools are untouched.

    Args:
        skills: Skills, or tables with ``name``, ``description``, ``instructions``, ``tools``.
        folder: a folder of Markdown skill files (see :func:`parse_skill`); relative to
            the config file's folder when built from config.
        tools: Tool objects the skills use; the kernel registers them
            (``filter.tools``). Skills may also name the kernel's own tools.
        router: any :class:`SkillRouter`; default :class:`BM25SkillRouter`.
        min_score: the BM25 score the best skill must exceed (default router only).
        index_header: the first line of the skill index.
        build: given by ``Kernel.from_config``.
        name: the filter's name.
    """
    catalogue: list[Skill] = [_skill_of(item, i) for i, item in enumerate(skills or ())]
    if folder is not None:
        base = Path(build.config_dir) if build is not None and build.config_dir else Path()
        catalogue += load_skills(base / folder)
    if not catalogue:
        msg = "skills_filter: the catalogue is empty; give skills=[...] or folder= with at least one skill."
        raise ConfigError(msg)
    by_name: dict[str, Skill] = {}
    for skill in catalogue:
        if skill.name in by_name:
            msg = f"skills_filter: two skills are named {skill.name!r}; skill names must be unique."
            raise ConfigError(msg)
        by_name[skill.name] = skill
    for position, item in enumerate(tools):
        if not isinstance(item, Tool):
            msg = f"skills_filter: tools[{position}] is {item!r}; give Tool objects (made with @tool)."
            raise ConfigError(msg)
    if router is None:
        router = BM25SkillRouter(min_score=min_score)
    elif not isinstance(router, SkillRouter):
        msg = f"skills_filter(router={router!r}) has no build(skills)/route(query) methods; see SkillRouter."
        raise ConfigError(msg)
    router.build(catalogue)
    gated = frozenset(tool_name for skill in catalogue for tool_name in skill.tools)
    index = "\n".join([index_header, *(f"- {s.name}: {s.description}" for s in catalogue)])
    # the system prompt addition per active skill (None = no skill), built once
    additions: dict[str | None, str] = {None: index}
    for skill in catalogue:
        active = f"Active skill: {skill.name}"
        additions[skill.name] = (
            f"{index}\n\n{active}\n{skill.instructions}" if skill.instructions else f"{index}\n\n{active}"
        )

    def choose(messages: Sequence[Message]) -> str | None:
        query = _query(messages)
        chosen = router.route(query) if query else None
        if chosen is not None and chosen not in by_name:
            msg = f"skills_filter: the router chose {chosen!r}, which is not a skill of the catalogue."
            raise ConfigError(msg)
        return chosen

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        # a re-entry of the same run (validation feedback) keeps its skill; a resume has no
        # entry messages: the first LLM call routes from its prompt instead
        if "skill" not in state and request.messages:
            state["skill"] = choose(request.messages)
        return await call_next(request)

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        if "skill" not in state:
            state["skill"] = choose(request.messages)
        chosen = state["skill"]
        enabled = by_name[chosen].tools if chosen is not None else ()
        system = additions[chosen] if request.system is None else f"{request.system}\n\n{additions[chosen]}"
        shown = tuple(t for t in request.tools if t.name not in gated or t.name in enabled)
        return await call_next(request.replace(system=system, tools=shown))

    return Filter(
        name,
        around_turn=around_turn,
        around_chat=around_chat,
        tools=tuple(tools),
        extras={"skills": tuple(catalogue), "router": router},
    )


SPEC = FilterSpec(
    "skills",
    skills_filter,
    OPTIONS,
    "Skill catalogue in the system prompt; each turn activates the best-matching skill's instructions and tools.",
    ("turn", "chat"),
)
