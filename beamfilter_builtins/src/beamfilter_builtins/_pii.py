"""``pii``: keep personal data away from the model, and give it back to tools.

Before every LLM call the text of every message (text parts of multimodal content
included) is scanned for e-mail addresses, phone numbers, payment card numbers (Luhn
checked), IBANs (mod-97 checked), IPv4/IPv6 addresses and any ``patterns`` given, and
each value is replaced according to ``mode``:

- ``"mask"`` (default): a numbered placeholder per value and kind, ``<EMAIL_1>``;
- ``"hash"``: a placeholder from a hash of the value, ``<EMAIL_5f4dcc3b>``, the same in
  every run (a stored conversation keeps matching);
- ``"redact"``: ``replacement`` (``[REDACTED]``) for every value; not reversible.

The same value always gets the same placeholder within a run. With
``restore_in_tools=True`` (default) placeholders in tool arguments are replaced by the
real values before the tool runs, so a tool can e-mail ``<EMAIL_1>`` while the model
never saw the address. The mapping lives in the filter's private state of the run; when
the run pauses it travels with the pause, sealed (encrypted and authenticated by the
kernel, see docs/approvals.md), so the resumed run's tools get the real values too. The
kernel's system prompt is not scanned (it is the developer's text).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    ContentPart,
    Filter,
    FilterSpec,
    Message,
    PersistHook,
    ToolRequest,
    ToolResult,
    options_schema,
)
from beamfilter_core.errors import ConfigError

__all__ = ["DETECTORS", "SPEC", "luhn_valid", "iban_valid", "pii_filter"]

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
_CARD = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![\w.])(?:{_OCTET}\.){{3}}{_OCTET}(?![\w.]*\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){1,4}(?![\w])")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_PLACEHOLDER = re.compile(r"<[A-Z][A-Z0-9_]*_[0-9a-f]+>")


def luhn_valid(digits: str) -> bool:
    """True when ``digits`` passes the Luhn checksum of payment cards."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """True when ``text`` (spaces allowed) passes the IBAN mod-97 check."""
    compact = text.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(char, 36)) for char in moved)
    return int(number) % 97 == 1


def _card(match: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", match.group())
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


def _iban(match: re.Match[str]) -> bool:
    return iban_valid(match.group())


def _ipv6(match: re.Match[str]) -> bool:
    try:
        ipaddress.IPv6Address(match.group())
    except ValueError:
        return False
    return True


def _phone(match: re.Match[str]) -> bool:
    text = match.group()
    digits = sum(char.isdigit() for char in text)
    if not 7 <= digits <= 15 or _ISO_DATE.fullmatch(text):
        return False
    separators = sum(text.count(sep) for sep in " .-")
    # A bare number is an id or an amount, not a phone: ask for some phone-like shape.
    return text.startswith(("+", "(")) or separators >= 2 or (text.startswith("0") and digits >= 10)


def _always(match: re.Match[str]) -> bool:
    return True


#: Built-in detectors, in the order they run: kind -> (pattern, check).
DETECTORS: Mapping[str, tuple[re.Pattern[str], Callable[[re.Match[str]], bool]]] = {
    "email": (_EMAIL, _always),
    "iban": (_IBAN, _iban),
    "credit_card": (_CARD, _card),
    "ip": (_IPV4, _always),
    "ipv6": (_IPV6, _ipv6),
    "phone": (_PHONE, _phone),
}
_DEFAULT_DETECT = ("email", "phone", "credit_card", "iban", "ip")

# Cheap tests that rule a detector out before its regex scans the text (most prose has
# no "@" and few digits): kind -> minimum digits, required substring.
_GATES: Mapping[str, tuple[int, str]] = {
    "email": (0, "@"),
    "iban": (4, ""),
    "credit_card": (13, ""),
    "ip": (4, "."),
    "ipv6": (0, ":"),
    "phone": (7, ""),
}


def _digits(text: str) -> int:
    return sum(text.count(digit) for digit in "0123456789")


class _Vault:
    """The run's mapping between real values and placeholders."""

    __slots__ = ("by_value", "counters", "real", "seen")

    def __init__(self) -> None:
        self.by_value: dict[tuple[str, str], str] = {}
        self.real: dict[str, str] = {}
        self.counters: dict[str, int] = {}
        self.seen: dict[int, tuple[Message, Message]] = {}


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "detect": {
            "type": "array",
            "items": {"enum": list(DETECTORS)},
            "x-hint": f"a list among {', '.join(DETECTORS)}",
        },
        "patterns": {"type": "object", "additionalProperties": {"type": "string"}},
        "mode": {"enum": ["mask", "hash", "redact"]},
        "replacement": {"type": "string"},
        "restore_in_tools": {"type": "boolean"},
        "name": {"type": "string"},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def pii_filter(
    *,
    detect: Sequence[str] = _DEFAULT_DETECT,
    patterns: Mapping[str, str] | None = None,
    mode: str = "mask",
    replacement: str = "[REDACTED]",
    restore_in_tools: bool = True,
    name: str = "pii",
) -> Filter:
    """Mask personal data before the model sees it; restore it in tool arguments.

    Args:
        detect: Built-in detectors to use, among ``email``, ``phone``, ``credit_card``,
            ``iban``, ``ip`` (IPv4) and ``ipv6``. ``ip`` includes ``ipv6``.
        patterns: Extra detectors: kind name -> regular expression, e.g.
            ``{"employee_id": r"EMP-\\d{6}"}`` (placeholders ``<EMPLOYEE_ID_1>``). They run
            before the built-in ones.
        mode: ``"mask"``, ``"hash"`` or ``"redact"``.
        replacement: The text of ``"redact"`` mode.
        restore_in_tools: Put real values back into tool arguments (not with ``redact``).
        name: The filter's name.

    Returns:
        A chat- and tool-scope filter.
    """
    where = "pii_filter"
    style = mode
    # Built-ins run in DETECTORS order whatever the order of ``detect``: phone numbers
    # last, so their loose digit pattern never eats a card number or an IBAN.
    selected = {*detect, *(["ipv6"] if "ip" in detect else [])}
    kinds = [kind for kind in DETECTORS if kind in selected]
    detectors: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool], int, str]] = []
    for kind, pattern in (patterns or {}).items():
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", kind):
            msg = f"{where}: patterns key {kind!r} is invalid; use letters, digits and '_' (it names the placeholder)."
            raise ConfigError(msg)
        try:
            compiled = re.compile(pattern)
        except (re.error, TypeError) as exc:
            msg = f"{where}: patterns[{kind!r}] = {pattern!r} is not a valid regular expression ({exc})."
            raise ConfigError(msg) from exc
        detectors.append((kind.upper(), compiled, _always, 0, ""))
    for kind in kinds:
        builtin, check = DETECTORS[kind]
        digits, needle = _GATES[kind]
        detectors.append(("IP" if kind == "ipv6" else kind.upper(), builtin, check, digits, needle))
    restore = bool(restore_in_tools) and style != "redact"

    def placeholder(vault: _Vault, kind: str, value: str) -> str:
        if style == "redact":
            return replacement
        key = (kind, value)
        found = vault.by_value.get(key)
        if found is None:
            if style == "hash":
                found = f"<{kind}_{hashlib.sha256(value.encode()).hexdigest()[:8]}>"
            else:
                number = vault.counters.get(kind, 0) + 1
                vault.counters[kind] = number
                found = f"<{kind}_{number}>"
            vault.by_value[key] = found
            vault.real[found] = value
        return found

    def mask_text(vault: _Vault, text: str) -> str:
        digits = -1
        for kind, pattern, check, min_digits, needle in detectors:
            if needle and needle not in text:
                continue
            if min_digits:
                if digits < 0:
                    digits = _digits(text)
                if digits < min_digits:
                    continue

            def swap(match: re.Match[str], kind: str = kind, check: Any = check) -> str:
                if not check(match):
                    return match.group()
                return placeholder(vault, kind, match.group())

            text = pattern.sub(swap, text)
        return text

    def mask_message(vault: _Vault, message: Message) -> Message:
        # Messages of a run are the same objects from call to call: mask each once.
        cached = vault.seen.get(id(message))
        if cached is not None and cached[0] is message:
            return cached[1]
        content = message.content
        masked = message
        if isinstance(content, str):
            text = mask_text(vault, content)
            if text != content:
                masked = message.replace(content=text)
        elif content:
            parts = tuple(
                part if part.type != "text" or not part.text else ContentPart("text", mask_text(vault, part.text))
                for part in content
            )
            if parts != content:
                masked = message.replace(content=parts)
        if message.tool_calls:
            # Arguments of earlier calls are part of the prompt too (e.g. a loaded transcript).
            calls = tuple(
                call
                if (args := mask_value(vault, call.arguments)) == call.arguments
                else attrs.evolve(call, arguments=args)
                for call in message.tool_calls
            )
            if calls != message.tool_calls:
                masked = masked.replace(tool_calls=calls)
        vault.seen[id(message)] = (message, masked)
        return masked

    def mask_value(vault: _Vault, value: Any) -> Any:
        if isinstance(value, str):
            return mask_text(vault, value)
        if isinstance(value, Mapping):
            return {key: mask_value(vault, item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [mask_value(vault, item) for item in value]
        return value

    def vault_of(state: dict[str, Any]) -> _Vault:
        vault = state.get("vault")
        if vault is None:
            vault = state["vault"] = _Vault()
        return vault

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        vault = vault_of(state)
        messages = tuple(mask_message(vault, m) for m in request.messages)
        return await call_next(request.replace(messages=messages))

    def unmask(vault: _Vault, value: Any) -> Any:
        if isinstance(value, str):
            if "<" not in value:
                return value
            return _PLACEHOLDER.sub(lambda m: vault.real.get(m.group(), m.group()), value)
        if isinstance(value, Mapping):
            return {key: unmask(vault, item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [unmask(vault, item) for item in value]
        return value

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        vault = state.get("vault")
        if vault is not None and vault.real:
            arguments = unmask(vault, request.arguments)
            if arguments != request.arguments:
                request = request.replace(arguments=arguments)
        return await call_next(request)

    def save_vault(state: dict[str, Any]) -> Any:
        # kept with a pause (sealed by the kernel, never in clear) so that the resumed run's
        # tools get the real values of the placeholders the model and the human saw
        vault = state.get("vault")
        if vault is None or not vault.real:
            return None
        entries = [[kind, value, found] for (kind, value), found in vault.by_value.items()]
        return {"entries": entries, "counters": dict(vault.counters)}

    def restore_vault(state: dict[str, Any], data: Any) -> None:
        vault = vault_of(state)
        for kind, value, found in data["entries"]:
            vault.by_value[(kind, value)] = found
            vault.real[found] = value
        vault.counters.update(data["counters"])

    return Filter(
        name,
        around_chat=around_chat,
        around_tool=around_tool if restore else None,
        persist=PersistHook(save_vault, restore_vault) if restore else None,
    )


SPEC = FilterSpec(
    "pii",
    pii_filter,
    OPTIONS,
    "Mask e-mails, phones, cards (Luhn), IBANs, IPs and custom patterns before the LLM; restore them for tools.",
    ("chat", "tool"),
)
