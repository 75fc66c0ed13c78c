"""``budget``: token and cost accounting per turn and per conversation, with limits."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from beamfilter_core import (
    BuildContext,
    ChatRequest,
    ChatResponse,
    Filter,
    FilterSpec,
    Message,
    TurnRequest,
    TurnResult,
    Usage,
    options_schema,
)
from beamfilter_core.errors import ConfigError, LimitExceeded

__all__ = ["DEFAULT_FINISH_MESSAGE", "SPEC", "Totals", "budget_filter", "model_key"]

DEFAULT_FINISH_MESSAGE = "I have to stop here: {reason}."


@attrs.define(slots=True)
class Totals:
    """Accumulated usage: tokens, cost, and how many calls were reported or estimated."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    reported_calls: int = 0
    estimated_calls: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def add(self, prompt: int, completion: int, cost: float, *, reported: bool) -> None:
        """Count one LLM call."""
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cost += cost
        if reported:
            self.reported_calls += 1
        else:
            self.estimated_calls += 1

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cost": round(self.cost, 10),
            "reported_calls": self.reported_calls,
            "estimated_calls": self.estimated_calls,
        }


def model_key(request: ChatRequest, kernel_model: Any = None) -> str:
    """The name usage is calibrated and priced under: the request's model (a fallback sets
    it), else the kernel's model when known, by its ``model`` attribute (``"gpt-4o-mini"``)
    or class name; else ``options["model"]``; else ``"default"``."""
    model = request.model if request.model is not None else kernel_model
    if model is not None:
        named = getattr(model, "model", None)
        return named if isinstance(named, str) else type(model).__name__
    named = request.options.get("model")
    return named if isinstance(named, str) else "default"


def _chars(message: Message) -> int:
    size = len(message.text)
    for call in message.tool_calls:
        size += len(call.name) + len(call.arguments_json)
    return size


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_tokens_per_turn": {"type": "integer", "minimum": 1},
        "max_cost": {"type": "number", "minimum": 0},
        "prompt_price": {"type": "number", "minimum": 0},
        "completion_price": {"type": "number", "minimum": 0},
        "prices": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "prompt": {"type": "number", "minimum": 0},
                    "completion": {"type": "number", "minimum": 0},
                },
                "additionalProperties": False,
                "x-hint": "{'prompt': 0.5, 'completion': 1.5} per 1k",
            },
        },
        "on_limit": {"enum": ["raise", "finish"]},
        "finish_message": {"type": "string"},
        "chars_per_token": {"type": "number", "exclusiveMinimum": 0},
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def budget_filter(
    *,
    max_tokens_per_turn: int | None = None,
    max_cost: float | None = None,
    prompt_price: float = 0.0,
    completion_price: float = 0.0,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    on_limit: str = "raise",
    finish_message: str = DEFAULT_FINISH_MESSAGE,
    chars_per_token: float = 4.0,
    build: BuildContext | None = None,
    name: str = "budget",
) -> Filter:
    """A chat + turn filter that counts tokens and cost, and stops a turn over budget.

    Each LLM call counts the provider's reported usage when the response has it;
    otherwise an estimate (characters / ``chars_per_token``) times the ratio
    reported/estimated learned from earlier reported calls of the same model
    (:func:`model_key`). Totals are kept per turn and per conversation
    (``context["conversation_id"]``; a run without one is its own conversation) for the
    filter's lifetime. Limits are checked before each LLM call: once the turn's tokens
    reached ``max_tokens_per_turn`` or the conversation's cost reached ``max_cost``, no
    further call starts; ``on_limit="raise"`` raises :class:`LimitExceeded`,
    ``"finish"`` ends the turn completed with ``finish_message`` as the answer (not
    streamed as tokens) and ``blocked_by`` set to the filter's name.

    The completed turn's ``TurnResult.usage`` is replaced by the turn's counted usage.
    ``extras["report"](conversation_id)`` returns the conversation's totals (a dict) and
    ``extras["calibration"]`` the learned ratio per model.

    Args:
        max_tokens_per_turn: stop the turn once it used this many tokens.
        max_cost: stop once the conversation cost this much (needs a price).
        prompt_price: price per 1000 prompt tokens.
        completion_price: price per 1000 completion tokens.
        prices: per model key, ``{"prompt": p, "completion": c}`` per 1000 tokens.
        on_limit: ``"raise"`` or ``"finish"``.
        finish_message: the answer on ``"finish"``; ``{reason}`` names the limit.
        chars_per_token: characters per token of the estimate.
        build: given by ``Kernel.from_config`` (names the kernel's model for :func:`model_key`).
        name: the filter's name.
    """
    where = "budget_filter"
    turn_cap = max_tokens_per_turn
    cost_cap = None if max_cost is None else float(max_cost)
    default_price = (float(prompt_price), float(completion_price))
    price_table = {
        str(key): (float(entry.get("prompt", 0.0)), float(entry.get("completion", 0.0)))
        for key, entry in (prices or {}).items()
    }
    if cost_cap is not None and not any(default_price) and not any(p for pair in price_table.values() for p in pair):
        msg = f"{where}(max_cost={max_cost!r}) needs prices; give prompt_price/completion_price or prices."
        raise ConfigError(msg)
    mode = on_limit
    ratio_chars = float(chars_per_token)
    if "{reason}" not in finish_message:
        finish_message += " ({reason})"

    kernel_model = build.model if build is not None else None
    conversations: dict[str, Totals] = {}
    # model key -> [sum of reported tokens, sum of estimated tokens]
    calibration: dict[str, list[int]] = {}

    def estimate(request: ChatRequest, response: ChatResponse) -> tuple[int, int]:
        chars = sum(_chars(m) for m in request.messages) + len(request.system or "")
        prompt = math.ceil(chars / ratio_chars)
        completion = math.ceil(_chars(response.message) / ratio_chars)
        return prompt, completion

    def totals_of(state: dict[str, Any]) -> tuple[Totals, Totals]:
        turn = state.get("turn")
        if turn is None:  # chat without the turn hook having run (e.g. used in a sub-chain)
            turn = state["turn"] = Totals()
            state["conversation"] = Totals()
        return turn, state["conversation"]

    def exceeded(turn: Totals, conversation: Totals) -> tuple[str, LimitExceeded] | None:
        if turn_cap is not None and turn.total_tokens >= turn_cap:
            reason = f"this turn used {turn.total_tokens} tokens of its budget of {turn_cap} (max_tokens_per_turn)"
            error = LimitExceeded(
                f"Budget exceeded: {reason}.", limit="max_tokens_per_turn", value=turn.total_tokens, maximum=turn_cap
            )
            return reason, error
        if cost_cap is not None and conversation.cost >= cost_cap:
            reason = f"this conversation cost {conversation.cost:.4f} of its budget of {cost_cap:g} (max_cost)"
            error = LimitExceeded(
                f"Budget exceeded: {reason}.", limit="max_cost", value=conversation.cost, maximum=cost_cap
            )
            return reason, error
        return None

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        turn, conversation = totals_of(state)
        over = exceeded(turn, conversation)
        if over is not None:
            reason, error = over
            if mode == "raise":
                raise error
            state["finished"] = True
            return ChatResponse.from_text(finish_message.replace("{reason}", reason))
        response = await call_next(request)
        key = model_key(request, kernel_model)
        guess_prompt, guess_completion = estimate(request, response)
        usage = response.usage
        if usage is not None and (usage.prompt_tokens or usage.completion_tokens):
            prompt, completion, reported = usage.prompt_tokens, usage.completion_tokens, True
            learned = calibration.setdefault(key, [0, 0])
            learned[0] += prompt + completion
            learned[1] += guess_prompt + guess_completion
        else:
            known = calibration.get(key)
            scale = known[0] / known[1] if known and known[1] else 1.0
            prompt, completion, reported = round(guess_prompt * scale), round(guess_completion * scale), False
        prompt_rate, completion_rate = price_table.get(key, default_price)
        cost = (prompt * prompt_rate + completion * completion_rate) / 1000
        turn.add(prompt, completion, cost, reported=reported)
        if conversation is not turn:
            conversation.add(prompt, completion, cost, reported=reported)
        return response

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        conversation_id = request.context.get("conversation_id")
        turn = Totals()
        state["turn"] = turn
        if isinstance(conversation_id, str):
            state["conversation"] = conversations.setdefault(conversation_id, Totals())
        else:
            state["conversation"] = turn  # a run without a conversation id is its own conversation
        state["finished"] = False
        result = await call_next(request)
        if result.status != "completed":
            return result  # paused / cancelled pass through unchanged
        usage = Usage(turn.prompt_tokens, turn.completion_tokens, turn.total_tokens)
        blocked_by = (result.blocked_by or name) if state["finished"] else result.blocked_by
        summarised: TurnResult = result.replace(usage=usage, blocked_by=blocked_by)
        return summarised

    def report(conversation_id: str) -> dict[str, Any]:
        totals = conversations.get(conversation_id)
        return (totals or Totals()).as_dict()

    def ratios() -> dict[str, float]:
        return {key: reported / guessed for key, (reported, guessed) in calibration.items() if guessed}

    return Filter(
        name,
        around_turn=around_turn,
        around_chat=around_chat,
        extras={"report": report, "calibration": ratios},
    )


SPEC = FilterSpec(
    "budget",
    budget_filter,
    OPTIONS,
    "Token and cost accounting per turn and conversation (reported or calibrated estimate); limits raise or finish.",
    ("turn", "chat"),
)
