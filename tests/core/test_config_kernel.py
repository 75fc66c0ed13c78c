"""The kernel's own options: one schema (``KERNEL_OPTIONS``) checks a config's ``[kernel]``
table, through the same validator as every other section, and a Python caller's
``Kernel(...)`` arguments. Each rule of the schema is pinned on both roads; numbers a JSON
schema lets through (nan, inf, a float for an integer, an integer past a float's range)
are refused on both."""

from __future__ import annotations

import inspect
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from beamfilter_core import Kernel, Registry, ScriptedModel, SectionSpec, hookimpl
from beamfilter_core._kernel_options import KERNEL_OPTIONS
from beamfilter_core._options import declared_schema
from beamfilter_core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MODEL = {"use": "scripted", "script": ["hi"]}
KEY = "k" * 16


def config_problems(kernel: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        Kernel.from_config({"model": MODEL, "kernel": kernel})
    return list(refused.value.problems)


def python_message(**arguments: Any) -> str:
    with pytest.raises(ConfigError) as refused:
        Kernel(ScriptedModel(["hi"]), **arguments)
    return str(refused.value)


# (option, value, the config's problem, the Python caller's message); each row fails when
# the rule it names is taken out of the schema
RULES: list[tuple[str, Any, str, str]] = [
    (
        "max_iterations",  # type integer
        "3",
        "kernel.max_iterations: must be of type integer, got '3'",
        "Kernel(max_iterations='3') is invalid; give an integer >= 1.",
    ),
    (
        "max_iterations",  # a bool is no integer
        True,
        "kernel.max_iterations: must be of type integer, got True",
        "Kernel(max_iterations=True) is invalid; give an integer >= 1.",
    ),
    (
        "max_iterations",  # JSON schema takes 2.0 as an integer: refused all the same
        2.0,
        "kernel.max_iterations: must be of type integer, got 2.0",
        "Kernel(max_iterations=2.0) is invalid; give an integer >= 1.",
    ),
    (
        "max_iterations",  # minimum 1
        0,
        "kernel.max_iterations: must be >= 1, got 0",
        "Kernel(max_iterations=0) is invalid; give an integer >= 1.",
    ),
    (
        "tool_timeout",  # type number
        "5",
        "kernel.tool_timeout: must be of type number, got '5'",
        "Kernel(tool_timeout='5') is invalid; give a number > 0 or None.",
    ),
    (
        "tool_timeout",  # exclusiveMinimum 0
        0,
        "kernel.tool_timeout: must be > 0, got 0",
        "Kernel(tool_timeout=0) is invalid; give a number > 0 or None.",
    ),
    (
        "tool_timeout",  # nan <= 0 is false: the bound alone lets it through
        math.nan,
        "kernel.tool_timeout: must be a finite number > 0, got nan",
        "Kernel(tool_timeout=nan) is invalid; give a finite number > 0 or None.",
    ),
    (
        "tool_timeout",
        math.inf,
        "kernel.tool_timeout: must be a finite number > 0, got inf",
        "Kernel(tool_timeout=inf) is invalid; give a finite number > 0 or None.",
    ),
    (
        "tool_timeout",
        -math.inf,
        "kernel.tool_timeout: must be > 0, got -inf",
        "Kernel(tool_timeout=-inf) is invalid; give a finite number > 0 or None.",
    ),
    (
        "tool_timeout",  # no float holds it: float(10**400) raises OverflowError
        10**400,
        "kernel.tool_timeout: must be a finite number > 0, got <an integer of 1329 bits>",
        "Kernel(tool_timeout=<an integer of 1329 bits>) is invalid; give a finite number > 0 or None.",
    ),
    (
        "system_prompt",  # type string
        3,
        "kernel.system_prompt: must be of type string, got 3",
        "Kernel(system_prompt=3) is invalid; give a string or None.",
    ),
    (
        "options",  # type object
        "hot",
        "kernel.options: must be of type object, got 'hot'",
        "Kernel(options='hot') is invalid; give a mapping or None.",
    ),
    (
        "options",  # model options go out as JSON, which has no nan
        {"temperature": math.nan},
        "kernel.options.temperature: must be a finite number, got nan",
        "Kernel(options['temperature']=nan) is invalid; give a finite number.",
    ),
    (
        "transient_context",  # type array
        "day",
        "kernel.transient_context: must be of type array, got 'day'",
        "Kernel(transient_context='day') is invalid; give a list of context keys, e.g. ['day'].",
    ),
    (
        "transient_context",  # items string
        ["day", 1],
        "kernel.transient_context[1]: must be of type string, got 1",
        "Kernel(transient_context=['day', 1]) is invalid; give a list of context keys, e.g. ['day'].",
    ),
    (
        "unsafe_unsigned_pauses",  # type boolean
        "yes",
        "kernel.unsafe_unsigned_pauses: must be of type boolean, got 'yes'",
        "Kernel(unsafe_unsigned_pauses='yes') is invalid; give true or false.",
    ),
]


@pytest.mark.parametrize(("option", "value", "problem", "message"), RULES, ids=[f"{r[0]}={r[1]!r}" for r in RULES])
def test_each_rule_of_the_schema_refuses_on_both_roads(option: str, value: Any, problem: str, message: str) -> None:
    assert config_problems({option: value}) == [problem]
    assert python_message(**{option: value}) == message


def test_an_unknown_key_is_reported_like_any_sections_and_all_problems_at_once() -> None:
    # an unknown key is reported once, whatever its value
    assert config_problems({"timeout": math.nan, "max_iterations": 0, "tool_timeout": math.nan}) == [
        "kernel.timeout: unknown option for the section 'core:kernel'. Did you mean 'tool_timeout'? "
        "Known options: max_iterations, options, pause_key, system_prompt, tool_timeout, transient_context, "
        "unsafe_unsigned_pauses.",
        "kernel.max_iterations: must be >= 1, got 0",
        "kernel.tool_timeout: must be a finite number > 0, got nan",
    ]


def test_good_values_reach_the_kernel_including_a_huge_max_iterations() -> None:
    kernel = Kernel.from_config(
        {
            "model": MODEL,
            "kernel": {
                "max_iterations": 10**30,
                "tool_timeout": 1,
                "system_prompt": "Be brief.",
                "options": {"temperature": 0.5},
                "pause_key": KEY,
                "transient_context": ["db"],
                "unsafe_unsigned_pauses": True,
            },
        }
    )
    assert (kernel.max_iterations, kernel.tool_timeout, kernel.system_prompt) == (10**30, 1.0, "Be brief.")
    assert (dict(kernel.options), kernel.transient_context) == ({"temperature": 0.5}, ("db",))
    assert (kernel.has_pause_key, kernel.unsafe_unsigned_pauses) == (True, True)
    assert Kernel(ScriptedModel([]), max_iterations=1, tool_timeout=1e-9).max_iterations == 1
    # an iterable other than a list is read once, as the keys
    assert Kernel(ScriptedModel([]), transient_context=iter(["a", "b"])).transient_context == ("a", "b")


@pytest.mark.parametrize("value", ["k" * 15, 1234567890123456, ["k" * 16]])
def test_a_bad_pause_key_is_refused_without_showing_it(value: Any) -> None:
    problems = config_problems({"pause_key": value})
    assert problems == [
        'kernel.pause_key: must be a secret string of at least 16 characters, e.g. { "$env" = "NAME" } '
        "(the value given is not shown)"
    ]
    assert str(value) not in problems[0]


def test_a_pause_key_of_16_characters_is_enough() -> None:
    assert Kernel.from_config({"model": MODEL, "kernel": {"pause_key": KEY}}).has_pause_key is True


def test_python_callers_pause_key_is_checked_by_its_parser_which_takes_bytes() -> None:
    assert Kernel(ScriptedModel([]), pause_key=KEY.encode()).has_pause_key is True
    assert python_message(pause_key="short") == (
        "Kernel(pause_key=...) is 5 characters; give a secret str or bytes of at least 16 characters "
        '(e.g. pause_key = { "$env" = "BEAMFILTER_PAUSE_KEY" } in the config, from `openssl rand -hex 32`).'
    )


def test_a_secret_option_is_never_shown_to_a_python_caller_either() -> None:
    from beamfilter_core import options_schema

    @options_schema({"type": "object", "properties": {"key": {"type": "string", "minLength": 4, "x-secret": True}}})
    def signer(*, key: str) -> str:
        return key

    with pytest.raises(ConfigError) as refused:
        signer(key="abc")
    assert str(refused.value) == "signer(key=...) is invalid; give a non-empty string."


def test_one_schema_the_config_and_the_constructor_share() -> None:
    assert declared_schema(Kernel.__init__) is KERNEL_OPTIONS
    parameters = inspect.signature(Kernel).parameters
    assert set(KERNEL_OPTIONS["properties"]) <= set(parameters)
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in KERNEL_OPTIONS["properties"])


def test_the_configuration_page_lists_every_kernel_option() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `[kernel]`"))
    assert re.findall(r"`(\w+)` \(", row) == sorted(KERNEL_OPTIONS["properties"])


def test_a_toml_file_with_nan_inf_and_a_bool_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "beamfilter.toml"
    path.write_text(
        '[model]\nuse = "scripted"\nscript = ["hi"]\n\n[kernel]\nmax_iterations = true\ntool_timeout = -inf\n'
        "[kernel.options]\ntop_p = [0.5, nan]\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as refused:
        Kernel.from_config(path)
    assert list(refused.value.problems) == [
        "kernel.max_iterations: must be of type integer, got True",
        "kernel.tool_timeout: must be > 0, got -inf",
        "kernel.options.top_p[1]: must be a finite number, got nan",
    ]


def test_an_integer_python_cannot_read_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "beamfilter.toml"
    path.write_text("[kernel]\nmax_iterations = " + "9" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        Kernel.from_config(path)
    assert str(refused.value) == f"{path} holds an integer of more than 4300 digits; write a smaller number."


def test_a_dict_config_with_an_integer_too_long_to_print_is_reported_by_its_size() -> None:
    assert config_problems({"tool_timeout": -(10**5000)}) == [
        "kernel.tool_timeout: must be > 0, got <an integer of 16610 bits>"
    ]


def test_every_sections_numbers_are_held_to_the_same_rules() -> None:
    """The rules live in the shared checks: a plugin's options get them too."""
    with pytest.raises(ConfigError) as refused:
        Kernel.from_config(
            {"model": {"use": "scripted", "script": ["hi"], "chunk": 2.0, "token_delay": math.inf}},
        )
    assert list(refused.value.problems) == [
        "model.chunk: must be of type integer, got 2.0",
        "model.token_delay: must be a finite number >= 0, got inf",
    ]


def test_a_kernel_given_no_option_compiles_no_schema() -> None:
    """Only the options a caller gives are checked: ``Kernel(model)`` imports no validator."""
    code = (
        "import sys\n"
        "from beamfilter_core import Kernel, ScriptedModel\n"
        "Kernel(ScriptedModel(['hi']), tools=[], filters=[])\n"
        "assert 'fastjsonschema' not in sys.modules\n"
        "Kernel(ScriptedModel(['hi']), max_iterations=3)\n"
        "assert 'fastjsonschema' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")


class _Pacing:
    @hookimpl
    def beamfilter_register_sections(self) -> list[SectionSpec]:
        schema = {"type": "object", "properties": {"wait": {"type": ["number", "null"], "minimum": 0}}}
        return [SectionSpec("pacing", lambda wait=None: wait, schema)]


def test_a_nullable_number_of_a_plugin_section_is_held_to_the_same_rules() -> None:
    registry = Registry.from_plugins({"pacing": _Pacing()})
    with pytest.raises(ConfigError) as refused:
        Kernel.from_config({"model": MODEL, "pacing": {"wait": math.inf}}, registry=registry)
    assert list(refused.value.problems) == ["pacing.wait: must be a finite number >= 0, got inf"]
