"""skills: index in the system prompt, BM25 routing per turn, instructions and tools of the active skill."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from beamfilter_builtins import BM25SkillRouter, Skill, parse_skill, skills_filter
from beamfilter_builtins._skills import SPEC as SKILLS_SPEC
from beamfilter_core import ChatResponse, Kernel, ScriptedModel, ToolCall, TurnResult, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


async def run(kernel: Kernel, text: str, stream: bool) -> TurnResult:
    return (await run_turn(kernel, text, stream))[0]


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"sunny in {city}"


@tool
def convert(amount: float, to: str) -> str:
    """Convert money."""
    return f"{amount} {to}"


@tool
def clock() -> str:
    """The time."""
    return "12:00"


SKILLS = [
    Skill("weather", "weather forecasts rain temperature for a city", "Always give degrees Celsius.", ("get_weather",)),
    Skill("money", "currency exchange rates and money conversion", "Round to cents.", ("convert",)),
]
INDEX = (
    "Skills (the one that fits the request is activated with its instructions):\n"
    "- weather: weather forecasts rain temperature for a city\n"
    "- money: currency exchange rates and money conversion"
)


async def test_routes_to_best_skill_adds_instructions_and_tools(stream: bool) -> None:
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("get_weather", {"city": "Oslo"}, "c1")), "Sunny."])
    kernel = Kernel(model, [clock], [skills_filter(SKILLS, tools=[get_weather, convert])], system_prompt="Be brief.")
    result = await run(kernel, "Will there be rain in Oslo tomorrow?", stream)
    assert result.text == "Sunny."
    assert len(model.requests) == 2
    for request in model.requests:
        assert request.system == f"Be brief.\n\n{INDEX}\n\nActive skill: weather\nAlways give degrees Celsius."
        assert [t.name for t in request.tools] == ["clock", "get_weather"]
    assert result.messages[2].text == "sunny in Oslo"  # the skill's tool ran


async def test_other_turn_other_skill_and_no_match_hides_skill_tools(stream: bool) -> None:
    model = ScriptedModel(["1.1", "hello"])
    kernel = Kernel(model, [clock], [skills_filter(SKILLS, tools=[get_weather, convert])])
    await run(kernel, "exchange 10 euro into dollars", stream)
    await run(kernel, "tell me a joke", stream)
    first, second = model.requests
    assert first.system == f"{INDEX}\n\nActive skill: money\nRound to cents."
    assert [t.name for t in first.tools] == ["clock", "convert"]
    assert second.system == INDEX
    assert [t.name for t in second.tools] == ["clock"]


class FixedRouter:
    def __init__(self) -> None:
        self.built: list[str] = []
        self.queries: list[str] = []

    def build(self, skills: Sequence[Skill]) -> None:
        self.built = [s.name for s in skills]

    def route(self, query: str) -> str | None:
        self.queries.append(query)
        return "money"


async def test_pluggable_router() -> None:
    router = FixedRouter()
    model = ScriptedModel(["ok"])
    kernel = Kernel(model, filters=[skills_filter(SKILLS, router=router)])
    await kernel.run("what's the weather")
    assert router.built == ["weather", "money"]
    assert router.queries == ["what's the weather"]
    assert model.requests[0].system == f"{INDEX}\n\nActive skill: money\nRound to cents."


def test_parse_front_matter_and_heading_convention(tmp_path: Path) -> None:
    (tmp_path / "b_weather.md").write_text(
        "---\nname: weather\ndescription: forecasts\ntools: [get_weather, clock]\n---\nUse Celsius.\n", encoding="utf-8"
    )
    (tmp_path / "a_money.md").write_text(
        "# money\n\nCurrency\nconversion.\n\nRound to cents.\n\nNever guess rates.\n", encoding="utf-8"
    )
    (tmp_path / "notes.txt").write_text("ignored", encoding="utf-8")
    flt = skills_filter(folder=str(tmp_path))
    assert flt.extras["skills"] == (
        Skill("money", "Currency conversion.", "Round to cents.\n\nNever guess rates.", ()),
        Skill("weather", "forecasts", "Use Celsius.", ("get_weather", "clock")),
    )
    assert parse_skill("---\ndescription: d\n---\nbody", default_name="stem") == Skill("stem", "d", "body", ())


def test_bad_skill_files_and_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"line 2: 'colour: red' is not a known front-matter field"):
        parse_skill("---\ncolour: red\n---\n", source="x.md")
    with pytest.raises(ConfigError, match=r"x.md: the skill 'a' has no description"):
        parse_skill("# a\n", source="x.md")
    with pytest.raises(ConfigError, match=r"the folder '.*nope' does not exist"):
        skills_filter(folder=str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=r"the catalogue is empty"):
        skills_filter([])
    with pytest.raises(ConfigError, match=r"two skills are named 'weather'"):
        skills_filter([SKILLS[0], SKILLS[0]])
    with pytest.raises(ConfigError, match=r"skills\[0\] is \{'name': 'x'\}"):
        skills_filter([{"name": "x"}])


async def test_from_config_with_folder_relative_to_config(tmp_path: Path) -> None:
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "math.md").write_text("# math\n\nArithmetic and sums.\n\nShow the steps.\n")
    (tmp_path / "beamfilter.toml").write_text(
        '[model]\nuse = "scripted"\nscript = ["4"]\n\n[[filters]]\nuse = "skills"\nfolder = "skills"\n'
        'skills = [{ name = "poems", description = "write poems" }]\n'
    )
    kernel = Kernel.from_config(tmp_path / "beamfilter.toml")
    result = await kernel.run("quick arithmetic: 2 + 2")
    assert result.text == "4"
    model = kernel.model
    assert isinstance(model, ScriptedModel)
    assert model.requests[0].system == (
        "Skills (the one that fits the request is activated with its instructions):\n"
        "- poems: write poems\n- math: Arithmetic and sums.\n\nActive skill: math\nShow the steps."
    )
    assert SKILLS_SPEC.scopes == ("turn", "chat")


async def test_resume_routes_from_the_prompt_and_keeps_the_skill_tools() -> None:
    from beamfilter_core import Decision

    @tool(sensitive=True)
    def pay(amount: float) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    async def gate(call: object, tool_: object, context: object) -> Decision:
        return Decision.pause("confirm payment")

    skills = [*SKILLS, Skill("payments", "pay invoices and bills", "Confirm amounts.", ("pay",))]
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("pay", {"amount": 5}, "p1")), "Paid."])
    kernel = Kernel(model, filters=[skills_filter(skills, tools=[pay])], gate=gate)
    paused = await kernel.run("pay the electricity bills")
    assert paused.status == "paused"
    assert paused.pause is not None
    result = await kernel.resume(paused.pause, {"p1": Decision.approve()})
    assert result.text == "Paid."
    assert result.messages[2].text == "paid 5"
    after = model.requests[1]
    assert after.system is not None
    assert after.system.endswith("Active skill: payments\nConfirm amounts.")
    assert [t.name for t in after.tools] == ["pay"]


def test_skills_router_compares_raw_scores_with_min_score() -> None:
    skills = [
        Skill("weather-report", "Forecast and current weather for a city"),
        Skill("trip-planner", "Plan a trip: flights, hotels and a city guide"),
    ]
    router = BM25SkillRouter()
    router.build(skills)
    assert router.route("what's the weather in Oslo?") == "weather-report"
    assert router.route("plan a trip to Rome") == "trip-planner"
    assert router.route("tell me a joke") is None  # stop words only: no score at all
    # "weather" is in the name (x2) and the description of one skill of two.
    idf = math.log(1 + 1.5 / 1.5)
    lengths = [2 * 2 + 7, 2 * 2 + 9]  # name words x2 plus description words (stop words kept)
    norm = 1.2 * (0.25 + 0.75 * lengths[0] / (sum(lengths) / 2))
    score = idf * 3 * 2.2 / (3 + norm)
    assert router._index.scores("weather")[0][1] == pytest.approx(score, rel=1e-12)
    below = BM25SkillRouter(min_score=score - 1e-9)
    below.build(skills)
    assert below.route("weather") == "weather-report"
    at = BM25SkillRouter(min_score=score)
    at.build(skills)
    assert at.route("weather") is None  # the best score must exceed min_score
