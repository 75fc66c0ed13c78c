"""docs/builtins/index.md lists every registered built-in exactly as its FilterSpec says.

The table rows are rendered here from the registered specs (name, scopes, summary) and the
factories' signatures (options and defaults); the page must contain exactly these rows, in
registration order. When a spec changes, the failure message prints the rows to paste.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from beamfilter_builtins._plugin import beamfilter_register_filters
from beamfilter_core import FilterSpec

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "builtins" / "index.md"
HEADER = "| filter | scopes | summary | main options (Python defaults) |"
# Factory parameters that are not options a reader chooses.
_HIDDEN = frozenset({"build", "name"})
# Longer defaults (prompt templates, messages) are named, not quoted.
_LONGEST_SHOWN = 40
_ROW = re.compile(r"^\| \[`(?P<name>[a-z_]+)`\]\((?P<link>[^)]+)\) \| (?P<scopes>[^|]+) \| (?P<summary>[^|]+) \| ")

SPECS: list[FilterSpec] = beamfilter_register_filters()


def _option(param: inspect.Parameter, schema: dict[str, Any]) -> str:
    note = "" if param.name in schema else " (Python only)"
    if param.default is inspect.Parameter.empty:
        return f"`{param.name}` (required){note}"
    shown = repr(param.default)
    if len(shown) > _LONGEST_SHOWN:
        return f"`{param.name}` (see page){note}"
    return f"`{param.name}={shown}`{note}"


def render_row(spec: FilterSpec) -> str:
    """The table row of ``spec``: linked name, scopes, exact summary, options with defaults."""
    properties = dict(spec.options_schema.get("properties", {}))
    params = [p for p in inspect.signature(spec.factory).parameters.values() if p.name not in _HIDDEN]
    options = ", ".join(_option(p, properties) for p in params) or "none"
    scopes = ", ".join(f"`{scope}`" for scope in spec.scopes)
    return f"| [`{spec.name}`]({spec.name}.md) | {scopes} | {spec.summary} | {options} |"


def render_table() -> str:
    """The whole table, header included, in registration order."""
    return "\n".join([HEADER, "|---|---|---|---|", *(render_row(spec) for spec in SPECS)])


def page_rows() -> dict[str, re.Match[str]]:
    rows: dict[str, re.Match[str]] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match is not None:
            rows[match["name"]] = match
    return rows


def test_every_builtin_is_registered_once() -> None:
    names = [spec.name for spec in SPECS]
    assert len(names) == len(set(names)) == 27


@pytest.mark.parametrize("spec", SPECS, ids=[spec.name for spec in SPECS])
def test_each_builtin_appears_with_its_exact_summary_scopes_and_page(spec: FilterSpec) -> None:
    row = page_rows().get(spec.name)
    assert row is not None, f"docs/builtins/index.md has no row for {spec.name!r}; add:\n{render_row(spec)}"
    assert row["summary"] == spec.summary
    assert row["scopes"] == ", ".join(f"`{scope}`" for scope in spec.scopes)
    assert row["link"] == f"{spec.name}.md"
    assert (PAGE.parent / row["link"]).is_file()


def test_the_table_is_exactly_the_rendered_one() -> None:
    text = PAGE.read_text(encoding="utf-8")
    expected = render_table()
    assert expected in text, f"the table in docs/builtins/index.md is out of date; replace it with:\n\n{expected}\n"


def test_no_row_for_an_unregistered_filter() -> None:
    assert sorted(page_rows()) == sorted(spec.name for spec in SPECS)


def test_the_row_regex_rejects_a_changed_summary() -> None:
    # The checks above can fail: a row with another summary does not match the spec.
    spec = SPECS[0]
    changed = render_row(spec).replace(spec.summary, "Something else.")
    match = _ROW.match(changed)
    assert match is not None
    assert match["summary"] != spec.summary


if __name__ == "__main__":
    print(render_table())
