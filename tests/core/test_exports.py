"""The public façade: ``__all__`` lists exactly the public names, and importing the core
does not import httpx or pluggy."""

from __future__ import annotations

import subprocess
import sys

import beamfilter_core


def test_all_names_resolve_and_are_sorted() -> None:
    names = beamfilter_core.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(beamfilter_core, name) is not None, name


def test_no_public_name_is_missing_from_all() -> None:
    # "@py_*" names come from pytest rewriting the package that ships its pytest plugin
    public = {n for n in vars(beamfilter_core) if not n.startswith(("_", "@"))}
    modules = {"errors", "testing", "text", "annotations"}  # annotations: the __future__ import
    assert public - set(beamfilter_core.__all__) - modules == set()


def test_import_is_lean() -> None:
    heavy = ("httpx", "pluggy", "fastjsonschema", "cattrs", "asyncio")
    code = f"import sys, beamfilter_core; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
