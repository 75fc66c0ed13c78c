"""End to end: a real answer from the embedded SmolLM2 model, streamed through a Kernel."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest
from _support import require

from beamfilter_core import ChatRequest, Filter, Kernel, LocalModel, Message, TextDelta, TokenTransform
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import collect_stream

pytestmark = [pytest.mark.local_model, pytest.mark.anyio]


def _upper_vowels() -> TokenTransform:
    # Rewrites the answer itself, so the streamed text and the returned text must agree.
    table = str.maketrans("aeiou", "AEIOU")
    return TokenTransform(lambda token, state: ((token.translate(table),), state), applies_to="answer")


async def test_streamed_text_equals_returned_text_through_an_answer_transform() -> None:
    require(LocalModel.missing() is None, f"local model unavailable: {LocalModel.missing()}")
    async with LocalModel(options={"max_tokens": 48, "temperature": 0}, progress=False) as model:
        base_url = model.base_url
        assert base_url is not None
        host = urlsplit(base_url)
        assert host.hostname == "127.0.0.1"
        assert host.port is not None
        assert host.port > 0
        kernel = Kernel(model, filters=[Filter("vowels", token=_upper_vowels())], system_prompt="Answer briefly.")
        text, events = await collect_stream(kernel.run_stream("Name three colours."))
        result = events[-1].result  # type: ignore[union-attr]
        deltas = [e for e in events if isinstance(e, TextDelta)]
    assert result.status == "completed"
    assert len(deltas) > 3  # really streamed, token by token
    assert text == result.text
    assert text.strip()
    assert not set("aeiou") & set(text)  # the transform ran on every token
    assert result.usage.completion_tokens > 0
    # aclose() stopped llama.cpp's server: the port no longer accepts connections.
    with pytest.raises(ConnectionRefusedError), socket.create_connection((host.hostname, host.port), timeout=1):
        pass


async def test_complete_and_stream_agree_at_temperature_zero() -> None:
    require(LocalModel.missing() is None, f"local model unavailable: {LocalModel.missing()}")
    request = ChatRequest((Message.user("What is the capital of France?"),))
    async with LocalModel(options={"max_tokens": 24, "temperature": 0, "seed": 1}, progress=False) as model:
        whole = await model.complete(request)
        tokens: list[str] = []
        streamed = await model.stream(request, tokens.append)
    assert whole.text
    assert "".join(tokens) == streamed.text == whole.text
    assert streamed.finish_reason in ("stop", "length")


def test_a_missing_gguf_file_is_a_config_error(tmp_path: object) -> None:
    with pytest.raises(ConfigError, match=r"no such file; give the path of a \.gguf model"):
        LocalModel(model_path="/nonexistent/model.gguf")


def test_the_demo_runs_on_the_local_model_in_well_under_a_minute() -> None:
    import io
    import time

    from beamfilter_core._demo import SECRET, run_demo

    require(LocalModel.missing() is None, f"local model unavailable: {LocalModel.missing()}")
    out = io.StringIO()
    started = time.perf_counter()
    assert run_demo(["--max-tokens", "32"], out=out) == 0
    elapsed = time.perf_counter() - started
    text = out.getvalue()
    assert "model: LocalModel, SmolLM2-135M-Instruct served by llama.cpp in this process" in text
    assert text.count("returned text == streamed text: yes") == 3  # the blocked turn is delivered too
    assert "[changed the request (messages 1 -> 3)]" in text  # memory gave turn 2 the history
    assert "blocked by safeguard" in text
    assert "assistant> " + SECRET not in text  # answers are redacted
    assert "a key in a stored answer: no" in text
    assert "the tool ran 1 time(s); answer: There are 5 words." in text
    assert elapsed < 60
