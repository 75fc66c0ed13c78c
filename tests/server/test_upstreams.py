"""``beamfilter serve`` in front of other upstreams than llmock: aimock (npm), whose
scripted failures become OpenAI errors and whose tool calls reach the client, and the
embedded local model (llama.cpp), streamed through the gateway."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from _support import require
from llmock_upstream import model_table
from peers._peer import AIMOCK_KEY, Peer
from server._serve import WEATHER, open_config, start

from beamfilter_core import LocalModel

pytestmark = [pytest.mark.peers, pytest.mark.packages]


def test_aimock_upstream_tool_calls_and_failures(aimock: Peer, tmp_path: Path) -> None:
    config = open_config(tmp_path, model_table(aimock.url, AIMOCK_KEY))
    gateway = start(config)
    try:
        client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="open-gateway", max_retries=0, timeout=60)
        # a client tool: the call comes back to the client, its result goes up with the next request
        asked = [{"role": "user", "content": "weather in Paris"}]
        first = client.chat.completions.create(model="assistant", messages=asked, tools=[WEATHER])  # type: ignore[list-item]
        assert first.choices[0].finish_reason == "tool_calls"
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert (call.function.name, json.loads(call.function.arguments)) == (
            "get_weather",
            {"city": "Paris", "unit": "c"},
        )
        answered = [
            *asked,
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "18 C, cloudy"},
        ]
        second = client.chat.completions.create(model="assistant", messages=answered, tools=[WEATHER])  # type: ignore[arg-type,list-item]
        assert second.choices[0].message.content == "It is 18 C and cloudy in Paris."
        # upstream failures: OpenAI errors with the gateway's own words, nothing of the upstream's
        with pytest.raises(openai.RateLimitError) as limited:
            client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "trigger 429"}])
        assert limited.value.body["message"] == "The upstream model is rate limited; retry later."  # type: ignore[index]
        with pytest.raises(openai.APIStatusError) as failed:
            client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "trigger 500"}])
        assert failed.value.status_code == 502
        assert failed.value.body["code"] == "upstream_error"  # type: ignore[index]
        assert "had an error" not in failed.value.body["message"]  # type: ignore[index]
        # an upstream stream that hangs up mid-way ends the client's stream with an error event
        stream = client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "trigger disconnect"}], stream=True
        )
        with pytest.raises(openai.APIError, match=r"The upstream model failed"):
            list(stream)
    finally:
        assert gateway.stop() in (0, -15)


@pytest.mark.local_model
def test_the_local_model_streams_through_the_gateway(tmp_path: Path) -> None:
    require(LocalModel.missing() is None, f"local model unavailable: {LocalModel.missing()}")
    config = open_config(
        tmp_path,
        """
        [model]
        use = "local"
        progress = false
        options = { max_tokens = 24, temperature = 0, seed = 1 }
        """,
    )
    gateway = start(config)
    try:
        client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="open-gateway", max_retries=0, timeout=300)
        asked = [{"role": "user", "content": "What is the capital of France?"}]
        chunks = list(client.chat.completions.create(model="assistant", messages=asked, stream=True))  # type: ignore[arg-type]
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        whole = client.chat.completions.create(model="assistant", messages=asked)  # type: ignore[arg-type]
    finally:
        assert gateway.stop() in (0, -15)
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 3  # token by token
    assert streamed.strip()
    assert streamed == whole.choices[0].message.content  # temperature 0: the same answer both ways
    assert whole.usage is not None
    assert whole.usage.completion_tokens > 0
