"""The public façade: ``__all__`` lists exactly the public names, and importing the core
does not import httpx or pluggy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import beamfilter_core


def test_all_names_resolve_and_are_sorted() -> None:
    names = beamfilter_core.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(beamfilter_core, name) is not None, name


def test_no_public_name_is_missing_from_all() -> None:
    # "@py_*" names come from pytest rewriting the package that ships its pytest plugin
    public = {n for n in vars(beamfilter_core) if not n.startswith(("_", "@"))}
    modules = {"errors", "secrets", "testing", "text", "wire", "annotations"}  # annotations: the __future__ import
    assert public - set(beamfilter_core.__all__) - modules == set()


def test_import_is_lean() -> None:
    heavy = ("httpx", "pluggy", "fastjsonschema", "cattrs", "asyncio")
    code = f"import sys, beamfilter_core; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_lazy_exports_imports_a_name_on_first_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "lazypkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from beamfilter_core import lazy_exports\n"
        "__getattr__ = lazy_exports(__name__, globals(), {'heavy': '._heavy'})\n",
        encoding="utf-8",
    )
    (package / "_heavy.py").write_text("heavy = 'loaded'\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import lazypkg  # type: ignore[import-not-found]

    assert "lazypkg._heavy" not in sys.modules
    assert lazypkg.heavy == "loaded"
    assert "lazypkg._heavy" in sys.modules
    assert vars(lazypkg)["heavy"] == "loaded"  # kept: a second access costs nothing
    with pytest.raises(AttributeError) as caught:
        _ = lazypkg.light
    assert str(caught.value) == "module 'lazypkg' has no attribute 'light'"
    for name in ("lazypkg", "lazypkg._heavy"):
        monkeypatch.delitem(sys.modules, name)


def test_the_wire_module_gives_the_chat_completions_shape() -> None:
    from beamfilter_core import ChatResponse, Message, ToolCall
    from beamfilter_core.wire import message_to_json, parse_completion

    call = ToolCall("add", {"a": 1}, "c1")
    assert message_to_json(Message("assistant", None, tool_calls=(call,))) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}],
    }
    answer = parse_completion(
        {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    )
    assert isinstance(answer, ChatResponse)
    assert answer.message.text == "hi"
