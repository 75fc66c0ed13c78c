"""AzureOpenAIChatModel: the deployment URL, the api-key header, the chat wire on Azure's
captures (a prompt-filter chunk first, content-filter results in every chunk), retries."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from _support import record_retry_waits
from core.models._mock import Server
from core.models._mock import captured as capture

from beamfilter_core import AzureOpenAIChatModel, ChatRequest, Kernel, Message, Registry, Usage
from beamfilter_core.errors import ConfigError, RateLimitError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio

REQUEST = ChatRequest((Message.system("Be brief."), Message.user("capital of France?")))
KEY = "azure-key-0123456789abcdef0123456789abcdef"


def model(server: Server, **options: Any) -> AzureOpenAIChatModel:
    options.setdefault("api_key", KEY)
    options.setdefault("base_url", "https://my-resource.openai.azure.com")
    return AzureOpenAIChatModel("gpt-4o-prod", transport=httpx.MockTransport(server.handle), **options)


@pytest.mark.parametrize("chunk", [None, 3, 64])
async def test_stream_capture_url_and_key_header(chunk: int | None) -> None:
    server = Server([capture("azure_chat_stream.http", chunk)])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert result.text == "".join(tokens) == "Paris is the capital of France."
    assert (result.finish_reason, result.usage) == ("stop", Usage(24, 8, 32))
    (sent,) = server.requests
    assert str(sent.url) == (
        "https://my-resource.openai.azure.com/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
    )
    assert sent.headers["api-key"] == KEY
    assert "authorization" not in sent.headers
    assert server.bodies[0]["model"] == "gpt-4o-prod"
    assert server.bodies[0]["messages"][0] == {"role": "system", "content": "Be brief."}


async def test_rate_limit_is_retried_after_retry_after_and_the_key_never_shows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits = record_retry_waits(monkeypatch)
    server = Server([lambda _: capture("azure_chat_429.http")])
    async with model(server, max_retries=1, base_url="https://my-resource.openai.azure.com/openai/") as m:
        with pytest.raises(RateLimitError) as caught:
            await m.complete(REQUEST)
        shown = repr(m)
    assert waits == [2.0]
    assert caught.value.message.startswith("Requests to the ChatCompletions_Create Operation under Azure OpenAI")
    assert (caught.value.code, caught.value.retry_after) == ("429", 2.0)
    assert str(server.requests[0].url).startswith("https://my-resource.openai.azure.com/openai/deployments/")
    assert shown == (
        "AzureOpenAIChatModel(deployment='gpt-4o-prod', base_url='https://my-resource.openai.azure.com/openai', "
        "api_version='2024-10-21')"
    )
    assert KEY not in shown + str(caught.value) + repr(caught.value)


async def test_key_from_the_environment_and_a_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "from-env")
    server = Server([lambda _: capture("azure_chat_stream.http")])
    async with model(server, api_key=None, api_version="2025-01-01-preview") as m:
        result, streamed = await run_turn(Kernel(m), "hi", stream=True)
    assert result.text == streamed == "Paris is the capital of France."
    assert server.requests[0].headers["api-key"] == "from-env"
    assert server.requests[0].url.params["api-version"] == "2025-01-01-preview"
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    async with model(server, api_key=None) as m:
        with pytest.raises(ConfigError) as caught:
            await m.complete(REQUEST)
        with pytest.raises(ConfigError):
            await m.stream(REQUEST, lambda _: None)
    assert str(caught.value) == (
        "AzureOpenAIChatModel(deployment='gpt-4o-prod') has no API key; set AZURE_OPENAI_API_KEY or pass api_key=."
    )
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"deployment": ""}, "AzureOpenAIChatModel(deployment='') needs the deployment name of the model."),
        ({"api_version": ""}, "AzureOpenAIChatModel(api_version='') needs an API version such as '2024-10-21'."),
        (
            {"base_url": "my-resource.openai.azure.com"},
            "AzureOpenAIChatModel(base_url='my-resource.openai.azure.com') must be the resource's https URL, "
            "such as 'https://my-resource.openai.azure.com'.",
        ),
        (
            {"api_key_env": "sk-pasted-key!"},
            "AzureOpenAIChatModel(api_key_env=...) must name an environment variable, such as "
            "'AZURE_OPENAI_API_KEY'; to pass the key itself use api_key=.",
        ),
    ],
)
def test_bad_options_are_config_errors(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"deployment": "d", "base_url": "https://r.openai.azure.com", **options}
    with pytest.raises(ConfigError) as caught:
        AzureOpenAIChatModel(arguments.pop("deployment"), **arguments)
    assert str(caught.value) == message


def test_built_from_a_config() -> None:
    kernel = Kernel.from_config(
        {
            "model": {
                "use": "azure_openai",
                "deployment": "gpt-4o-prod",
                "base_url": "https://my-resource.openai.azure.com",
                "api_key": "k",
                "max_retries": 0,
            }
        },
        registry=Registry(autoload=False),
    )
    assert isinstance(kernel.model, AzureOpenAIChatModel)
    assert (kernel.model.deployment, kernel.model.api_version, kernel.model.max_retries) == (
        "gpt-4o-prod",
        "2024-10-21",
        0,
    )
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config({"model": {"use": "azure_openai", "deployment": "d"}}, registry=Registry(autoload=False))
    assert any("base_url" in problem for problem in caught.value.problems)


async def test_a_deployment_name_is_encoded_in_the_path() -> None:
    server = Server([capture("azure_chat_stream.http")])
    m = AzureOpenAIChatModel(
        "prod/gpt 4o",
        base_url="https://r.openai.azure.com",
        api_key=KEY,
        api_version="2024-10-21&x=1",
        transport=httpx.MockTransport(server.handle),
    )
    async with m:
        await m.stream(REQUEST, lambda _: None)
    assert server.requests[0].url.raw_path == (
        b"/openai/deployments/prod%2Fgpt%204o/chat/completions?api-version=2024-10-21%26x%3D1"
    )
