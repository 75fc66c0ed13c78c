"""What a gateway client receives: completions built from a turn's outcome, in the consumer view.

A filter's token transform with ``applies_to = "stream"`` (``redact``'s, for one) changes only
what a stream's consumer reads; the turn's own text keeps the secret. A gateway client is
that consumer on every path: a streamed answer, a non-streamed one, a poll result, and the
answer sent after a reviewer's decision all pass through the same transforms, in the order
the stream applies them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from beamfilter_core import Kernel, Message, PauseState, TokenTransform
from beamfilter_core.errors import (
    AlreadyResumedError,
    BeamfilterError,
    ConversationBusyError,
    FilterError,
    GatewayError,
    LimitError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ResumeError,
)
from beamfilter_core.secrets import escape_controls, mask_secrets

from ._inbox import Outcome
from ._options import ServerOptions
from ._wire import completion

__all__ = ["Answers", "error_for", "stream_error", "stream_transforms"]

logger = logging.getLogger("beamfilter.server")


def stream_error(exc: BaseException) -> GatewayError:
    """:func:`error_for` a stream that failed after its status was sent, logging a failure
    of the gateway's own (masked, its control characters escaped: one log line each)."""
    error = error_for(exc)
    if error.status >= 500 and not isinstance(exc, GatewayError):
        logger.error("streamed turn failed: %s: %s", type(exc).__name__, escape_controls(mask_secrets(str(exc))))
    return error


def error_for(exc: BaseException) -> GatewayError:
    """The HTTP error a failed turn answers with; nothing of a secret or a stack trace."""
    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, RateLimitError):
        return GatewayError("The upstream model is rate limited; retry later.", status=429, type="rate_limit_error")
    if isinstance(exc, ProviderTimeoutError):
        return GatewayError("The upstream model timed out.", status=504, type="server_error", code="upstream_timeout")
    if isinstance(exc, ProviderError):  # an error status, a dropped or an incomplete answer
        name = type(exc).__name__
        msg = f"The upstream model failed ({name}); see the gateway's log."
        return GatewayError(msg, status=502, type="server_error", code="upstream_error")
    if isinstance(exc, LimitError):
        return GatewayError(str(exc), status=429, type="limit_exceeded", code=type(exc).__name__)
    if isinstance(exc, FilterError):
        msg = f"The filter {exc.filter_name!r} failed; see the gateway's log."
        return GatewayError(msg, status=500, type="server_error", code="filter_error")
    if isinstance(exc, AlreadyResumedError):
        return GatewayError("already decided: this pause was decided before.", status=409, code="already_decided")
    if isinstance(exc, ConversationBusyError):
        msg = "A decision on this conversation's pause is being carried out; send the turn again after it."
        return GatewayError(msg, status=409, code="conversation_busy")
    if isinstance(exc, ResumeError):
        return GatewayError(str(exc), status=422, code="decision_refused")
    name = type(exc).__name__ if isinstance(exc, BeamfilterError) else "an internal error"
    return GatewayError(f"The turn failed ({name}); see the gateway's log.", status=500, type="server_error")


def stream_transforms(kernel: Kernel) -> tuple[TokenTransform, ...]:
    """The token transforms that change only what a stream's consumer reads, in stream order."""
    found = (getattr(item, "token", None) for item in kernel.filters)
    return tuple(t for t in found if isinstance(t, TokenTransform) and t.applies_to != "answer")


def consumer_view(transforms: Sequence[TokenTransform], text: str) -> str:
    """``text`` as a stream's consumer reads it: each transform sees it as one token, then
    flushes (``redact``'s engine gives the same result at every split)."""
    for transform in transforms:
        state = transform.new_state()
        tokens, state = transform.step(text, state)
        parts = list(tokens)
        if transform.flush is not None:
            parts.extend(transform.flush(state))
        text = "".join(parts)
    return text


def _text_of(messages: tuple[Message, ...]) -> str | None:
    for message in reversed(messages):
        if message.role == "assistant":
            return message.content if isinstance(message.content, str) else None
    return None


class Answers:
    """Completions of one gateway: its options, and the consumer view of its kernel."""

    def __init__(self, options: ServerOptions, transforms: Sequence[TokenTransform]) -> None:
        self.options = options
        self.transforms = tuple(transforms)

    def __repr__(self) -> str:
        return f"Answers({len(self.transforms)} stream transforms)"

    def view(self, text: str) -> str:
        """``text`` in the consumer view."""
        return consumer_view(self.transforms, text) if self.transforms and text else text

    def pause_info(self, pause: PauseState) -> dict[str, Any]:
        calls = {c.id: c for c in pause.calls}
        base = self.options.public_url or ""
        return {
            "status": "paused",
            "pause_id": pause.pause_id,
            "reason": pause.reason,
            "awaiting": [
                {"id": i, "name": calls[i].name, "arguments": dict(calls[i].arguments)} for i in pause.awaiting
            ],
            "inbox": f"{base}/inbox#pause-{pause.pause_id}",
            "poll": f"{base}/v1/pauses/{pause.pause_id}",
        }

    @staticmethod
    def _pause_text(info: dict[str, Any]) -> str:
        names = ", ".join(a["name"] for a in info["awaiting"])
        why = f" ({info['reason']})" if info["reason"] else ""
        return (
            f"Paused: {names} waits for a human decision{why}. Pause {info['pause_id']}; "
            f"decide at {info['inbox']}; the outcome is at {info['poll']}."
        )

    def final(self, outcome: Outcome) -> tuple[Message, str, dict[str, Any]]:
        """The answer's message (in the consumer view), finish reason and ``beamfilter`` extras."""
        result, calls = outcome.result, outcome.calls
        extra: dict[str, Any] = {}
        if calls.refused:
            extra["refused"] = list(calls.refused)
        if result.blocked_by:
            extra["blocked_by"] = result.blocked_by
        if result.status == "paused" and result.pause is not None:
            info = self.pause_info(result.pause)
            extra.update(info)
            return Message("assistant", self._pause_text(info)), "paused", extra
        if result.status == "cancelled":
            msg = "The turn was cancelled (the gateway is shutting down)."
            raise GatewayError(msg, status=503)
        if calls.handed:
            text = _text_of(result.messages)
            return Message("assistant", self.view(text) if text else text, tuple(calls.handed)), "tool_calls", extra
        message = result.message
        if message is None or message.role != "assistant":
            message = Message("assistant", result.text)
        content = message.content
        finish = "content_filter" if result.blocked_by else "stop"
        return Message("assistant", self.view(content) if isinstance(content, str) else content, ()), finish, extra

    def check_size(self, message: Message) -> None:
        size = len(message.text) + sum(len(c.arguments_json) for c in message.tool_calls)
        if size > self.options.max_answer_chars:
            msg = f"The answer is longer than max_answer_chars={self.options.max_answer_chars}."
            raise GatewayError(msg, status=502, type="server_error", code="answer_too_large")

    def render(self, outcome: Outcome, completion_id: str, model: str) -> tuple[int, dict[str, Any]]:
        """The HTTP status and ``chat.completion`` body of a turn's outcome."""
        message, finish, extra = self.final(outcome)
        self.check_size(message)
        status = 202 if finish == "paused" else 200
        return status, completion(completion_id, model, message, finish, outcome.result.usage, extra)
