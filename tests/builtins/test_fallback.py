"""fallback: other models answer when the kernel's model fails; never after streaming."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from beamfilter_builtins import fallback_filter, model_retry_filter, redact_filter
from beamfilter_builtins._fallback import SPEC
from beamfilter_core import (
    BuildContext,
    ChatRequest,
    ChatResponse,
    Kernel,
    RunFinished,
    ScriptedModel,
    TextDelta,
    ToolCall,
    tool,
)
from beamfilter_core.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    IncompleteStreamError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
)
from beamfilter_core.testing import collect_stream, run_turn

pytestmark = pytest.mark.anyio


class Failing:
    """A model that always fails with ``error`` (after streaming ``partial``, if any)."""

    def __init__(self, error: Exception, partial: str = "") -> None:
        self.error = error
        self.partial = partial
        self.calls = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        raise self.error

    async def stream(self, request: ChatRequest, on_token: Callable[[str], None]) -> ChatResponse:
        self.calls += 1
        if self.partial:
            on_token(self.partial)
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        RateLimitError("slow", status_code=429),
        InternalServerError("boom", status_code=503),
        AuthenticationError("bad key", status_code=401),
        NotFoundError("no such model", status_code=404),
    ],
    ids=["429", "503", "401", "404"],
)
async def test_falls_back_on_retryable_auth_and_not_found(error: Exception, stream: bool) -> None:
    primary = Failing(error)
    backup = ScriptedModel(["from backup"])
    kernel = Kernel(primary, filters=[fallback_filter(models=[backup])], system_prompt="Be brief.")
    result, streamed = await run_turn(kernel, "hi", stream)
    assert result.text == "from backup"
    assert primary.calls == 1
    sent = backup.requests[0].messages
    assert [(m.role, m.content) for m in sent] == [("system", "Be brief."), ("user", "hi")]
    if stream:
        assert streamed == "from backup"  # streamed through the chat terminal like any call


async def test_walks_the_list_in_order_and_by_config_name() -> None:
    second = Failing(InternalServerError("down too", status_code=500))
    third = ScriptedModel(["third answers"])
    build = BuildContext(models={"second": second, "third": third})
    flt = fallback_filter(models=["second", "third"], build=build)
    result = await Kernel(Failing(RateLimitError("slow", status_code=429)), filters=[flt]).run("hi")
    assert result.text == "third answers"
    assert second.calls == 1


async def test_every_model_failing_raises_the_last_error_with_notes() -> None:
    flt = fallback_filter(models=[Failing(InternalServerError("b down", status_code=500))])
    with pytest.raises(InternalServerError) as caught:
        await Kernel(Failing(RateLimitError("slow", status_code=429)), filters=[flt]).run("hi")
    assert caught.value.message == "b down"
    assert caught.value.__notes__ == [
        "fallback tried every model: primary model: RateLimitError: HTTP 429: slow; "
        "fallback 'Failing': InternalServerError: HTTP 500: b down"
    ]


async def test_other_errors_do_not_fall_back() -> None:
    backup = ScriptedModel(["unused"])
    flt = fallback_filter(models=[backup])
    with pytest.raises(BadRequestError):
        await Kernel(Failing(BadRequestError("bad", status_code=400)), filters=[flt]).run("hi")
    assert backup.requests == []


async def test_never_falls_back_after_tokens_were_streamed() -> None:
    backup = ScriptedModel(["unused"])
    kernel = Kernel(Failing(IncompleteStreamError("cut"), partial="Hal"), filters=[fallback_filter(models=[backup])])
    with pytest.raises(IncompleteStreamError):
        await collect_stream(kernel.run_stream("hi"))
    assert backup.requests == []


async def test_streaming_fallback_answer_arrives_as_text_deltas_and_is_redacted() -> None:
    backup = ScriptedModel(["Your key is sk-abcdefghijklmnopqrstuv now."], chunk=3)
    primary = Failing(InternalServerError("down", status_code=503))
    filters = [fallback_filter(models=[backup]), redact_filter()]
    kernel = Kernel(primary, filters=filters, system_prompt="Be brief.")
    streamed, events = await collect_stream(kernel.run_stream("key?"))
    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert len(deltas) > 1  # token by token, not one whole answer
    assert streamed == "".join(deltas) == "Your key is [REDACTED] now."
    assert last.result.text == streamed
    assert [m.content for m in last.result.messages if m.role == "assistant"] == ["Your key is [REDACTED] now."]
    assert [(m.role, m.content) for m in backup.requests[0].messages] == [("system", "Be brief."), ("user", "key?")]
    assert primary.calls == 1


async def test_non_streaming_fallback_answer_is_redacted() -> None:
    backup = ScriptedModel(["token sk-abcdefghijklmnopqrstuv"])
    primary = Failing(RateLimitError("slow", status_code=429))
    kernel = Kernel(primary, filters=[fallback_filter(models=[backup]), redact_filter()])
    assert (await kernel.run("hi")).text == "token [REDACTED]"


async def test_never_falls_back_further_after_a_fallback_streamed() -> None:
    second = Failing(IncompleteStreamError("cut"), partial="Par")
    third = ScriptedModel(["unused"])
    primary = Failing(InternalServerError("down", status_code=503))
    kernel = Kernel(primary, filters=[fallback_filter(models=[second, third])])
    with pytest.raises(IncompleteStreamError) as caught:
        await collect_stream(kernel.run_stream("hi"))
    assert str(caught.value) == "cut"
    assert (primary.calls, second.calls, third.requests) == (1, 1, [])


async def test_a_fallback_failing_before_streaming_moves_on(stream: bool) -> None:
    second = Failing(IncompleteStreamError("cut"))
    third = ScriptedModel(["third answers"])
    kernel = Kernel(
        Failing(InternalServerError("down", status_code=503)), filters=[fallback_filter(models=[second, third])]
    )
    result, streamed = await run_turn(kernel, "hi", stream)
    assert result.text == "third answers"
    assert second.calls == 1
    if stream:
        assert streamed == "third answers"


async def test_model_retry_inside_fallback_retries_the_fallback_model(stream: bool) -> None:
    class Flaky:
        """Fails once with 503, then answers."""

        def __init__(self) -> None:
            self.calls = 0

        async def complete(self, request: ChatRequest) -> ChatResponse:
            self.calls += 1
            if self.calls == 1:
                raise InternalServerError("blip", status_code=503)
            return ChatResponse.from_text("backup after a retry")

        async def stream(self, request: ChatRequest, on_token: Callable[[str], None]) -> ChatResponse:
            response = await self.complete(request)
            on_token(response.text)
            return response

    primary = Failing(AuthenticationError("bad key", status_code=401))  # not retryable: straight to fallback
    backup = Flaky()
    retry = model_retry_filter(initial_delay=0.0, jitter=False)
    kernel = Kernel(primary, filters=[fallback_filter(models=[backup]), retry])
    result, streamed = await run_turn(kernel, "hi", stream)
    assert result.text == "backup after a retry"
    assert (primary.calls, backup.calls) == (1, 2)
    if stream:
        assert streamed == "backup after a retry"


async def test_fallback_answers_with_tool_calls_drive_the_loop(stream: bool) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    backup = ScriptedModel([ChatResponse.tool_calls(ToolCall("add", {"a": 2, "b": 3})), "5"])
    primary = Failing(InternalServerError("down", status_code=500))
    kernel = Kernel(primary, tools=[add], filters=[fallback_filter(models=[backup])])
    result, _ = await run_turn(kernel, "2+3?", stream)
    assert result.text == "5"
    assert primary.calls == 2
    assert [m.content for m in result.messages if m.role == "tool"] == ["5"]


def test_bad_options() -> None:
    with pytest.raises(ConfigError) as caught:
        fallback_filter(models=["backup"], build=BuildContext(models={"big": object()}))
    assert str(caught.value) == (
        "fallback_filter: models[0] is 'backup', which is not a model named in the config (known models: big); "
        "declare it under [models.backup] or pass a ChatModel."
    )
    with pytest.raises(ConfigError) as caught:
        fallback_filter(models=[object()])
    assert str(caught.value).startswith("fallback_filter: models[0] is <object object at ")
    assert str(caught.value).endswith(
        "; give a config model name or a ChatModel "
        "(an object with async complete(request) and stream(request, on_token))."
    )
    with pytest.raises(ConfigError) as caught:
        fallback_filter(models=[])
    assert str(caught.value) == (
        "fallback_filter(models=[]) is invalid; give a non-empty list of model names (config) or ChatModels."
    )


def test_spec() -> None:
    assert (SPEC.name, tuple(SPEC.scopes)) == ("fallback", ("chat", "token"))
    assert SPEC.options_schema["required"] == ["models"]


async def test_from_config_resolves_fallback_models_by_name() -> None:
    config = {
        "model": {"use": "scripted", "script": ["unused"]},
        "models": {"backup": {"use": "scripted", "script": ["from the configured backup"]}},
        "filters": [{"use": "fallback", "models": ["backup"]}],
    }
    primary = Failing(RateLimitError("slow", status_code=429))
    kernel = Kernel.from_config(config, model=primary)
    result = await kernel.run("hi")
    assert result.text == "from the configured backup"
    assert [f.name for f in kernel.filters] == ["fallback"]


def test_from_config_reports_unknown_model_names() -> None:
    config = {
        "model": {"use": "scripted", "script": ["x"]},
        "filters": [{"use": "fallback", "models": ["nope"]}],
    }
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(config)
    assert "models[0] is 'nope', which is not a model named in the config (known models: none)" in str(caught.value)
