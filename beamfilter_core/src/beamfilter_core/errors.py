"""Every exception beamfilter raises, in one module.

The tree::

    BeamfilterError
      ConfigError (ValueError)           a kernel, filter, tool or config value is wrong
        ToolDefinitionError              a tool declaration cannot be used
        SandboxError                     the OS sandbox cannot run (bubblewrap missing or refused)
      PluginError                        entry-point plugins
        PluginLoadError                  a plugin failed to import or register
        AmbiguousFilterError             an unqualified name has several providers
        UnknownNameError (LookupError)   no installed plugin provides that name
      FilterError                        a filter raised; ``.filter_name`` names it
      ProviderError                      talking to a chat model failed
        ProviderConnectionError          connection refused, reset, DNS
        ProviderTimeoutError             the request or stream stalled past the timeout
        ProviderHTTPError                the server answered with an error status
          BadRequestError                400
          AuthenticationError            401
          PermissionDeniedError          403
          NotFoundError                  404
          ConflictError                  409
          UnprocessableEntityError       422
          RateLimitError                 429
          InternalServerError            5xx
        ProviderResponseError            the body broke the wire protocol
          IncompleteStreamError          a stream ended without finish_reason / [DONE]
          ResponseTooLargeError          a line, an answer or tool arguments over their cap
        ContentBlockedError              the provider's safety system blocked the prompt or the answer
      ScriptExhaustedError               a ScriptedModel ran out of responses
      LimitError                         a run hit a hard limit
        MaxIterationsExceeded            more LLM calls than ``max_iterations``
        LimitExceeded                    a configured call or token limit
      ResumeError (ValueError)           a pause state or its decisions cannot resume
        PauseSignatureError              a pause state is unsigned, changed or signed with another key
        AlreadyResumedError              the pause was resumed already (or a newer turn answered it)
      ConversationBusyError              a new turn while a resume of the conversation is in flight
      StoreError                         a memory store failed
      DurableError                       a durable turn cannot be started, decided or found
      RunningLoopError (RuntimeError)    a *_sync method was called inside a running event loop
      GatewayError                       a request to ``beamfilter serve`` is refused; ``.status`` is its HTTP status
      ToolsetError                       a toolset could not be opened (a server did not start)
      ToolServerError (ConnectionError)  a tool's server died, hung up or answered garbage;
                                         a tool call that meets it fails as "transient"

Errors raised *by a filter's own code* are re-raised as :class:`FilterError` with the
filter's name, unless they already are a :class:`BeamfilterError`, in which case the
name is attached as ``.filter_name`` and the original type is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._messages import Message

__all__ = [
    "AlreadyResumedError",
    "AmbiguousFilterError",
    "AuthenticationError",
    "BadRequestError",
    "BeamfilterError",
    "ConfigError",
    "ConflictError",
    "ConversationBusyError",
    "ContentBlockedError",
    "DurableError",
    "FilterError",
    "GatewayError",
    "IncompleteStreamError",
    "InternalServerError",
    "LimitError",
    "LimitExceeded",
    "MaxIterationsExceeded",
    "NotFoundError",
    "PauseSignatureError",
    "PermissionDeniedError",
    "PluginError",
    "PluginLoadError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderResponseError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ResponseTooLargeError",
    "ResumeError",
    "RunningLoopError",
    "SandboxError",
    "ScriptExhaustedError",
    "StoreError",
    "ToolDefinitionError",
    "ToolServerError",
    "ToolsetError",
    "UnknownNameError",
    "UnprocessableEntityError",
]


class BeamfilterError(Exception):
    """Base of every beamfilter exception.

    ``filter_name`` is set when the error was raised by a filter's code.
    """

    filter_name: str | None = None


class ConfigError(BeamfilterError, ValueError):
    """A value given to beamfilter is wrong; ``problems`` lists every problem found.

    Each problem is one line such as ``filters[2].max_retries: must be >= 0``.
    """

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        self.problems: tuple[str, ...] = tuple(problems) or (message,)
        super().__init__(message)


class ToolDefinitionError(ConfigError):
    """A tool declaration cannot be used (bad schema, timeout, duplicate name)."""


class SandboxError(ConfigError):
    """The OS sandbox asked for (``sandbox = "auto"``) cannot run: bubblewrap is missing,
    or it cannot create its namespaces. Never answered by running unconfined instead."""


class PluginError(BeamfilterError):
    """Base of plugin discovery and lookup errors."""


class PluginLoadError(PluginError):
    """A plugin failed to import or register.

    Attributes name the plugin, its distribution and version, and a hint.
    """

    def __init__(
        self,
        message: str,
        *,
        plugin: str,
        distribution: str | None = None,
        version: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.plugin = plugin
        self.distribution = distribution
        self.version = version
        self.hint = hint
        super().__init__(message)


class AmbiguousFilterError(PluginError):
    """An unqualified name is provided by several plugins; ``candidates`` lists them."""

    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        self.candidates = tuple(candidates)
        super().__init__(message)


class UnknownNameError(PluginError, LookupError):
    """No installed plugin provides the requested filter, store or model name."""


class FilterError(BeamfilterError):
    """A filter raised an exception; ``__cause__`` holds the original one."""

    def __init__(self, message: str, filter_name: str) -> None:
        self.filter_name = filter_name
        super().__init__(message)


class ProviderError(BeamfilterError):
    """Talking to a chat model failed."""


class ProviderConnectionError(ProviderError):
    """The model server could not be reached or dropped the connection."""


class ProviderTimeoutError(ProviderError):
    """The request, or the gap between two stream chunks, exceeded the timeout."""


class ProviderHTTPError(ProviderError):
    """The server answered with an error status.

    Attributes: ``status_code``, ``message`` (the server's own text), ``error_type``,
    ``code`` and ``body`` (decoded JSON or raw text).
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        error_type: str | None = None,
        code: str | None = None,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        self.status_code = status_code
        self.message = message
        self.error_type = error_type
        self.code = code
        self.body = body
        self.retry_after = retry_after
        super().__init__(f"HTTP {status_code}: {message}")


class BadRequestError(ProviderHTTPError):
    """400: the server rejected the request body."""


class AuthenticationError(ProviderHTTPError):
    """401: the API key is missing or wrong."""


class PermissionDeniedError(ProviderHTTPError):
    """403: the key may not use this model or endpoint."""


class NotFoundError(ProviderHTTPError):
    """404: unknown model or endpoint."""


class ConflictError(ProviderHTTPError):
    """409: the server reports a conflict (retried)."""


class UnprocessableEntityError(ProviderHTTPError):
    """422: the request was well-formed but not acceptable."""


class RateLimitError(ProviderHTTPError):
    """429: rate limited or out of quota (``code == "insufficient_quota"``)."""


class InternalServerError(ProviderHTTPError):
    """5xx: the server failed."""


class ProviderResponseError(ProviderError):
    """The server's answer broke the wire protocol (bad JSON, bad chunk, no choices)."""


class IncompleteStreamError(ProviderResponseError):
    """A stream ended without ``finish_reason``/``[DONE]``, or a 200 had an empty body."""


class ContentBlockedError(ProviderError):
    """The provider's safety system blocked the prompt or the answer; not retried.

    Raised instead of returning an empty answer (Gemini ``finishReason`` ``SAFETY`` or a
    ``promptFeedback.blockReason``, Anthropic ``stop_reason`` ``refusal``). ``reason`` is
    the provider's own word for it, ``text`` what was streamed before the block and
    ``details`` the provider's ratings or feedback as it sent them.
    """

    def __init__(self, message: str, *, reason: str, text: str = "", details: Any = None) -> None:
        self.reason = reason
        self.text = text
        self.details = details
        super().__init__(message)


class ResponseTooLargeError(ProviderResponseError):
    """An SSE line, the whole answer or one tool call's arguments went over its cap.

    Not retried: the same request would most likely get the same answer.
    """


class ScriptExhaustedError(BeamfilterError):
    """A :class:`~beamfilter_core.ScriptedModel` was called more often than scripted."""


class LimitError(BeamfilterError):
    """A run hit a hard limit."""


class MaxIterationsExceeded(LimitError):
    """The run needed more LLM calls than ``max_iterations``.

    ``messages`` holds the transcript up to the limit; ``max_iterations`` the limit.
    """

    def __init__(self, message: str, *, messages: Sequence[Message], max_iterations: int) -> None:
        self.messages = tuple(messages)
        self.max_iterations = max_iterations
        super().__init__(message)


class LimitExceeded(LimitError):
    """A configured limit (model calls, tool calls, tokens, cost) was exceeded."""

    def __init__(self, message: str, *, limit: str, value: float, maximum: float) -> None:
        self.limit = limit
        self.value = value
        self.maximum = maximum
        super().__init__(message)


class ResumeError(BeamfilterError, ValueError):
    """A pause state, or the decisions given to resume it, cannot be used."""


class PauseSignatureError(ResumeError):
    """A pause state is unsigned, was changed, or was signed with another pause key."""


class AlreadyResumedError(ResumeError):
    """The pause was resumed already (or a newer turn answered its calls); nothing ran."""


class ConversationBusyError(BeamfilterError):
    """A new turn was refused: a resume of the conversation's pause is in flight (its calls
    have no results yet and no pause is stored). Nothing ran; send the turn again after it."""


class StoreError(BeamfilterError):
    """A memory store failed to load or save."""


class DurableError(BeamfilterError):
    """A durable turn (beamfilter-durable) cannot be started, decided, resumed or found:
    an unknown turn id, a decision for a turn that is not paused, a cancelled turn."""


class ToolsetError(BeamfilterError):
    """A toolset could not be opened (an MCP server did not start or did not answer).

    ``toolset`` names it.
    """

    def __init__(self, message: str, *, toolset: str | None = None) -> None:
        self.toolset = toolset
        super().__init__(message)


class ToolServerError(BeamfilterError, ConnectionError):
    """The server behind a tool died, hung up or answered something that is not the protocol.

    Being a ``ConnectionError``, a tool that raises it fails as ``"transient"``: the model
    reads the message and the loop goes on (``tool_retry`` may retry it).
    """


class RunningLoopError(BeamfilterError, RuntimeError):
    """``Kernel.run_sync`` (or ``resume_sync``) was called inside a running event loop;
    ``await kernel.run(...)`` there instead."""


class GatewayError(BeamfilterError):
    """A request to the ``beamfilter serve`` gateway is refused (beamfilter-server).

    ``status`` is the HTTP status, ``type`` and ``code`` the fields of OpenAI's error JSON,
    ``param`` the request field at fault (or None).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        self.status = status
        self.type = type
        self.code = code
        self.param = param
        super().__init__(message)
