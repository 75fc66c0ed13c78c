"""Answering tool calls that never got a result: the one transcript-heal rule.

Providers reject a transcript in which an assistant message's tool calls are not each
followed by a ``tool`` result (OpenAI: "An assistant message with 'tool_calls' must be
followed by tool messages..."). A cancelled run, a paused turn that is abandoned, or a
crashed worker leaves such calls; the run, the memory filter and ``heal_dangling`` all
heal them with this function.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._messages import Message

__all__ = ["heal_tool_calls"]


def heal_tool_calls(
    messages: Sequence[Message], text: str, *, drop_orphans: bool = False
) -> tuple[Message, ...] | None:
    """``messages`` with a ``tool`` result ``text`` for every call that has none, or None
    when nothing needed healing (the common case, and no copy is made).

    The results of an assistant message's calls are the ``tool`` messages right after it;
    a synthetic result goes after them, in call order. With ``drop_orphans``, ``tool``
    messages that answer no call of the assistant message before them are removed.

    Example::

        call = ToolCall("search", {"q": "x"}, "c1")
        healed = heal_tool_calls([Message.user("q"), Message.assistant(None, (call,))], "cancelled")
        assert healed[-1] == Message.tool("c1", "cancelled", "search")
    """
    healed: list[Message] = []
    open_calls: dict[str, str] = {}  # id -> name of the unanswered calls of the last assistant message
    changed = False

    def close() -> None:
        for call_id, call_name in open_calls.items():
            healed.append(Message.tool(call_id, text, call_name))
        open_calls.clear()

    for message in messages:
        if message.role == "tool":
            if message.tool_call_id in open_calls:
                del open_calls[message.tool_call_id]
            elif drop_orphans:
                changed = True
                continue
            healed.append(message)
            continue
        if open_calls:
            changed = True
            close()
        healed.append(message)
        if message.tool_calls:
            open_calls = {call.id: call.name for call in message.tool_calls}
    if open_calls:
        changed = True
        close()
    return tuple(healed) if changed else None
