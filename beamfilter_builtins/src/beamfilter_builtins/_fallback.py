"""``fallback``: when the kernel's model fails, ask other models in turn.

The primary call goes down the chain as usual. If it fails with a retryable error (see
:func:`._model_retry.is_retryable`), an authentication/permission error (401/403) or a
not-found error (404), and no text was streamed towards the consumer yet, the same
request goes down the rest of the chain again with ``ChatRequest.model`` set to each
fallback model in order. The first answer wins. When every model fails, the last error
is raised with a note per failed model.

Because a fallback call is an ordinary ``call_next``, the chat terminal handles it like
any call: the kernel's system prompt is prepended, a streaming run streams the fallback
answer token by token, and answer token transforms (``redact`` with
``applies_to="answer"``) rewrite it. Filters inside ``fallback`` (``model_retry``) see
and retry fallback calls too. The "never after streaming" rule holds for every model in
the list: once any of them streamed text, its error is raised.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from beamfilter_core import BuildContext, ChatRequest, ChatResponse, Filter, FilterSpec, options_schema
from beamfilter_core.errors import ConfigError

from ._model_retry import is_auth_or_missing, is_retryable
from ._streamwatch import StreamWatch

__all__ = ["SPEC", "fallback_filter"]

_log = logging.getLogger("beamfilter.fallback")


def _should_fall_back(exc: BaseException) -> bool:
    return is_retryable(exc) or is_auth_or_missing(exc)


def _is_chat_model(item: object) -> bool:
    return callable(getattr(item, "complete", None)) and callable(getattr(item, "stream", None))


def _resolve_models(models: Any, build: BuildContext | None) -> tuple[tuple[str, Any], ...]:
    where = "fallback_filter"
    if isinstance(models, str) or not isinstance(models, Sequence) or not models:
        msg = f"{where}(models={models!r}) is invalid; give a non-empty list of model names (config) or ChatModels."
        raise ConfigError(msg)
    known = dict(build.models) if build is not None else {}
    resolved: list[tuple[str, Any]] = []
    for index, item in enumerate(models):
        if isinstance(item, str):
            model = known.get(item)
            if model is None:
                names = ", ".join(sorted(known)) or "none"
                msg = (
                    f"{where}: models[{index}] is {item!r}, which is not a model named in the config "
                    f"(known models: {names}); declare it under [models.{item}] or pass a ChatModel."
                )
                raise ConfigError(msg)
            resolved.append((item, model))
        elif _is_chat_model(item):
            resolved.append((getattr(item, "name", None) or type(item).__name__, item))
        else:
            msg = (
                f"{where}: models[{index}] is {item!r}; give a config model name or a ChatModel "
                "(an object with async complete(request) and stream(request, on_token))."
            )
            raise ConfigError(msg)
    return tuple(resolved)


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "models": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "x-hint": "a non-empty list of model names (config) or ChatModels",
        },
        "name": {"type": "string"},
    },
    "required": ["models"],
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def fallback_filter(*, models: Sequence[Any], build: BuildContext | None = None, name: str = "fallback") -> Filter:
    """Answer with other models when the kernel's model fails.

    Args:
        models: Fallback models, tried in order: names of models declared in the config
            (``[models.<name>]``, resolved through ``build.models``) or ChatModel objects.
        build: Given by ``Kernel.from_config``; not needed with ChatModel objects.
        name: The filter's name.

    Returns:
        A chat-scope filter (plus a pass-through token transform that notices streaming).
        ``state["model"]`` records which model answered the last call (``"primary"`` or a
        fallback's name); ``state["fallbacks"]`` counts calls a fallback model answered.
    """
    chain = _resolve_models(models, build)
    watch = StreamWatch(name)

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        with watch.attempt() as current:
            try:
                response = await call_next(request)
            except Exception as exc:
                if current.streamed or not _should_fall_back(exc):
                    raise
                error: Exception = exc
            else:
                state["model"] = "primary"
                return response
        failures = [f"primary model: {type(error).__name__}: {error}"]
        for label, model in chain:
            _log.warning("LLM call failed (%s); falling back to model %r", error, label)
            with watch.attempt() as current:
                try:
                    response = await call_next(request.replace(model=model))
                except Exception as exc:
                    # A fallback that already streamed text must not be followed by another answer.
                    if current.streamed or not _should_fall_back(exc):
                        raise
                    failures.append(f"fallback {label!r}: {type(exc).__name__}: {exc}")
                    error = exc
                    continue
            state["model"] = label
            state["fallbacks"] = state.get("fallbacks", 0) + 1
            return response
        error.add_note("fallback tried every model: " + "; ".join(failures))
        raise error

    return Filter(name, around_chat=around_chat, token=watch.transform)


SPEC = FilterSpec(
    "fallback",
    fallback_filter,
    OPTIONS,
    "Ask other configured models when the kernel's model fails (retryable, auth or 404 errors).",
    ("chat", "token"),
)
