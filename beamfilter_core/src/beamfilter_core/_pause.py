"""Pauses that leave the process: signed, sealed, and checked before anything resumes.

A pause is signed with HMAC-SHA256 over its canonical JSON (sorted keys, no spaces,
UTF-8; the ``signature`` field left out) with a key derived from the kernel's
``pause_key``; without one, from a random key made once per process (such states resume
in this process only). The per-run state filters persist (:class:`PersistHook`) is
sealed with AES-GCM under another key derived from the same secret, bound to the pause
id. See docs/approvals.md.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ._records import Decision, PauseState
from .errors import ConfigError, PauseSignatureError, ResumeError

if TYPE_CHECKING:
    from ._filter import CompiledFilter
    from ._messages import ToolCall
    from ._tools import Tool

_PROCESS_SECRET = os.urandom(32)  # signs pauses of kernels without a pause_key
_canonical_encoder = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


class PauseKeys:
    """The two keys derived from one pause secret: one signs, one seals filter state."""

    __slots__ = ("configured", "seal", "sign")

    def __init__(self, secret: str | bytes | None) -> None:
        if secret is None:
            raw = _PROCESS_SECRET
        elif isinstance(secret, str | bytes) and len(secret) >= 16:
            raw = secret.encode() if isinstance(secret, str) else secret
        else:
            shown = f"a {type(secret).__name__}" if not isinstance(secret, str | bytes) else f"{len(secret)} characters"
            msg = (
                f"Kernel(pause_key=...) is {shown}; give a secret str or bytes of at least 16 characters "
                '(e.g. pause_key = { "$env" = "BEAMFILTER_PAUSE_KEY" } in the config, from `openssl rand -hex 32`).'
            )
            raise ConfigError(msg)
        self.configured = secret is not None
        # HMAC as a key-derivation function: independent keys for independent uses
        self.sign = hmac.new(raw, b"beamfilter pause signature v1", hashlib.sha256).digest()
        self.seal = hmac.new(raw, b"beamfilter pause sealing v1", hashlib.sha256).digest()

    def __repr__(self) -> str:
        return f"PauseKeys(configured={self.configured})"  # never the key


def canonical(pause: PauseState) -> bytes:
    """The bytes a signature covers: the state's JSON, keys sorted, without ``signature``."""
    from ._serde import unstructure

    data = unstructure(pause)
    data.pop("signature", None)
    return _canonical_encoder.encode(data).encode()


def _mac(keys: PauseKeys, pause: PauseState) -> str:
    return hmac.new(keys.sign, canonical(pause), hashlib.sha256).hexdigest()


def sign(pause: PauseState, keys: PauseKeys) -> PauseState:
    """``pause`` with its signature; ConfigError naming the place of a lone surrogate."""
    try:
        return attrs.evolve(pause, signature=_mac(keys, pause))
    except UnicodeEncodeError:
        from ._serde import unstructure

        where, value = _surrogate(unstructure(pause), "")
        shown = repr(value) if len(value) <= 60 else repr(value[:60]) + "..."
        msg = (
            f"The run paused with a lone surrogate (an undecodable byte) at {where} = {shown}, which a pause "
            "cannot carry: a pause is signed UTF-8 JSON. Decode the text properly (or encode the bytes, e.g. "
            "as hex or base64) before it reaches the call, the context or the transcript."
        )
        raise ConfigError(msg) from None


def _surrogate(data: Any, where: str) -> tuple[str, str]:
    """The path and text of the first str in ``data`` that UTF-8 cannot encode (calls and
    context first: what a reviewer is shown), or ``("", "")``."""
    if isinstance(data, str):
        try:
            data.encode()
        except UnicodeEncodeError:
            return where, data
        return "", ""
    items: list[tuple[str, Any]] = []
    if isinstance(data, Mapping):
        keyed = where.endswith(("arguments", "context"))
        first = sorted(data, key=lambda key: key not in ("calls", "context")) if not where else list(data)
        for key in first:
            items.append((f"{where}[{key!r}]" if keyed else f"{where}.{key}".lstrip("."), data[key]))
            items.append((f"{where} (a key)", key))
    elif isinstance(data, list | tuple):
        items = [(f"{where}[{index}]", value) for index, value in enumerate(data)]
    for path, value in items:
        found = _surrogate(value, path)
        if found[0]:
            return found
    return "", ""


def check_bound(pause: PauseState, conversation_id: Any) -> None:
    """Refuse to resume ``pause`` in another conversation than the one its signed context names.

    The context is signed, so a pause row copied into another conversation (or a pause
    JSON resumed with another ``conversation_id``) cannot take the victim's context along.
    """
    if conversation_id is None:
        return
    bound = pause.context.get("conversation_id")
    if bound == conversation_id:
        return
    made = "outside any conversation" if bound is None else f"in conversation {bound!r} and is signed for it"
    msg = (
        f"Cannot resume: pause {pause.pause_id!r} was made {made}; it cannot resume in conversation "
        f"{conversation_id!r} (a copied or moved pause)."
    )
    raise PauseSignatureError(msg)


def verify(pause: PauseState, keys: PauseKeys, *, allow_unsigned: bool = False) -> None:
    """Raise :class:`PauseSignatureError` unless ``pause`` was signed with ``keys``."""
    if type(pause) is not PauseState:
        msg = f"Cannot resume: {pause!r} is not a PauseState (give result.pause or its JSON text)."
        raise ResumeError(msg)
    signature = pause.signature
    if signature is None:
        if allow_unsigned:
            return
        msg = (
            "Cannot resume: the pause state is unsigned, so it may have been forged or edited. "
            "Resume states that a kernel returned (they are signed), or, only for states you "
            "produce and trust yourself, build the kernel with unsafe_unsigned_pauses=True."
        )
        raise PauseSignatureError(msg)
    try:
        expected = _mac(keys, pause)
    except (TypeError, ValueError) as exc:
        msg = f"Cannot resume: the pause state cannot be read as signed JSON ({exc})."
        raise PauseSignatureError(msg) from None
    if not (isinstance(signature, str) and hmac.compare_digest(signature, expected)):
        hint = (
            "or was signed with another pause_key"
            if keys.configured
            else "or comes from another process: configure the same pause_key on every worker"
        )
        msg = f"Cannot resume: the signature of pause {pause.pause_id!r} does not match: the state was changed, {hint}."
        raise PauseSignatureError(msg)


def check_context(context: Mapping[str, Any], transient: Iterable[str]) -> dict[str, Any]:
    """The context a pause carries: JSON values only (``transient`` keys left out)."""
    skipped = frozenset(transient)
    kept: dict[str, Any] = {}
    for key, value in context.items():
        if key in skipped:
            continue
        try:
            _canonical_encoder.encode(value)
        except (TypeError, ValueError):
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:60] + "..."
            msg = (
                f"The run paused with context[{key!r}] = {shown} (a {type(value).__name__}), which a pause "
                "cannot carry: a pause is JSON that any worker may resume. Put a JSON value in the context "
                f"(e.g. a date as its isoformat() text), or list the key in Kernel(transient_context=[{key!r}]) "
                "to leave it out of the pause and pass it again with resume(context=...)."
            )
            raise ConfigError(msg) from None
        kept[key] = value
    return kept


def seal(keys: PauseKeys, pause_id: str, data: Mapping[str, Any]) -> str:
    """Filter state as AES-GCM ciphertext (nonce + ciphertext, base64), bound to the pause id."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    plain = _canonical_encoder.encode(data).encode()
    sealed = AESGCM(keys.seal).encrypt(nonce, plain, pause_id.encode())
    return base64.b64encode(nonce + sealed).decode()


def unseal(keys: PauseKeys, pause_id: str, text: str) -> dict[str, Any]:
    """The filter state sealed in a pause; PauseSignatureError if it was changed."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        raw = base64.b64decode(text, validate=True)
        plain = AESGCM(keys.seal).decrypt(raw[:12], raw[12:], pause_id.encode())
    except (InvalidTag, ValueError) as exc:
        msg = f"Cannot resume: the sealed filter state of pause {pause_id!r} cannot be opened ({type(exc).__name__})."
        raise PauseSignatureError(msg) from None
    data: dict[str, Any] = json.loads(plain)
    return data


def save_filter_state(filters: Iterable[CompiledFilter], states: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """What each filter with a :class:`PersistHook` keeps across the pause, by filter name."""
    kept: dict[str, Any] = {}
    for item, state in zip(filters, states, strict=True):
        persist = item.filter.persist
        if persist is not None:
            data = persist.save(state)
            if data is not None:
                kept[item.filter.name] = data
    return kept


def restore_filter_state(
    filters: Iterable[CompiledFilter], states: Iterable[dict[str, Any]], kept: Mapping[str, Any]
) -> None:
    """Give each filter back what it kept; ResumeError if a filter is missing."""
    names = {item.filter.name for item in filters}
    missing = sorted(set(kept) - names)
    if missing:
        msg = (
            f"Cannot resume: the pause carries the state of filter(s) {', '.join(map(repr, missing))}, which "
            "this kernel does not have; resume with a kernel built with the same filters."
        )
        raise ResumeError(msg)
    for item, state in zip(filters, states, strict=True):
        persist = item.filter.persist
        name = item.filter.name
        if persist is not None and name in kept:
            persist.restore(state, kept[name])


def as_decision(value: Any, where: str) -> Decision:
    """``value`` as a Decision (also ``"approve"``, ``"reject"``, ``"pause"``, True, False)."""
    if isinstance(value, Decision):
        return value
    if value == "approve" or value == "reject" or value == "pause":  # narrows for mypy
        return Decision(value)
    if value is True:
        return Decision("approve")
    if value is False:
        return Decision("reject")
    msg = (
        f"{where} is {value!r}; give a Decision (Decision.approve(), Decision.reject(reason), "
        "Decision.reply(text), Decision.pause()) or one of 'approve', 'reject', 'pause'."
    )
    raise ConfigError(msg)


def check_pause(pause: PauseState) -> None:
    """Refuse a pause state whose parts contradict each other (ResumeError naming them)."""
    ids = [call.id for call in pause.calls]
    problems = []
    if len(set(ids)) != len(ids):
        problems.append(f"its calls repeat an id ({', '.join(ids)})")
    last = pause.messages[-1] if pause.messages else None
    if last is None or last.role != "assistant" or last.tool_calls != pause.calls:
        problems.append("its calls are not the tool calls of its last assistant message")
    known = set(ids)
    if not pause.awaiting:
        problems.append("it awaits no call")
    strays = [i for i in (*pause.awaiting, *pause.decided) if i not in known]
    if strays:
        problems.append(f"it names calls it does not hold: {', '.join(strays)}")
    both = sorted(set(pause.awaiting) & set(pause.decided))
    if both:
        problems.append(f"calls both decided and awaiting a decision: {', '.join(both)}")
    if len(set(pause.awaiting)) != len(pause.awaiting):
        problems.append("it awaits a call twice")
    if problems:
        msg = "Cannot resume: the pause state is inconsistent: " + "; ".join(problems) + "."
        raise ResumeError(msg)


def check_decisions(pause: PauseState, decisions: Any, tools: Mapping[str, Tool] | None = None) -> dict[str, Decision]:
    """Validate the decisions given to resume ``pause``: exactly one per awaited call.

    Any other id (a call the gate already decided, a call that never awaited, an unknown
    id), a missing decision, a value that is no decision, or approved arguments that break
    the tool's schema raise :class:`ResumeError` naming the call; nothing runs.
    """
    if not isinstance(decisions, Mapping):
        msg = f"Cannot resume: decisions is {decisions!r}; give a mapping of call id -> Decision."
        raise ResumeError(msg)
    awaiting = set(pause.awaiting)
    calls = {call.id: call for call in pause.calls}
    problems = []
    for call_id in decisions:
        if call_id in awaiting:
            continue
        if call_id in pause.decided:
            problems.append(
                f"call {call_id!r} was decided before the pause ({pause.decided[call_id].kind}); that is final"
            )
        elif call_id in calls:
            problems.append(f"call {call_id!r} did not await a decision")
        else:
            problems.append(f"call {call_id!r} is not in this pause")
    missing = [call_id for call_id in pause.awaiting if call_id not in decisions]
    if missing:
        problems.append(f"no decision for awaited calls: {', '.join(missing)}")
    checked: dict[str, Decision] = {}
    for call_id, value in decisions.items():
        if call_id not in awaiting:
            continue
        try:
            decision = as_decision(value, f"decisions[{call_id!r}]")
        except ConfigError as exc:
            problems.append(str(exc).rstrip("."))
            continue
        if decision.kind == "pause":
            problems.append(f"decisions[{call_id!r}] is 'pause'; at resume give approve, reject or reply")
            continue
        if decision.kind == "approve" and decision.arguments is not None:
            problem = _check_arguments(calls[call_id], decision.arguments, tools)
            if problem is not None:
                problems.append(f"decisions[{call_id!r}]: {problem}")
                continue
        checked[call_id] = decision
    if problems:
        msg = "Cannot resume: " + "; ".join(problems) + f". Awaited calls: {', '.join(pause.awaiting)}."
        raise ResumeError(msg)
    return checked


def _check_arguments(call: ToolCall, arguments: Any, tools: Mapping[str, Tool] | None) -> str | None:
    if not isinstance(arguments, Mapping) or not all(isinstance(key, str) for key in arguments):
        return f"the approved arguments {arguments!r} are not a mapping of argument names"
    tool = tools.get(call.name) if tools is not None else None
    validate = tool.validate if tool is not None else None
    if validate is None:
        return None
    try:
        validate(dict(arguments))
    except Exception as exc:  # noqa: BLE001  # fastjsonschema.JsonSchemaValueException, imported lazily
        detail = getattr(exc, "message", str(exc))
        return f"the approved arguments break the schema of tool {call.name!r}: {detail}"
    return None
