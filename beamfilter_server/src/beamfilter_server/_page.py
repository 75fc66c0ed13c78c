"""The inbox page: server-rendered HTML, one small inline script, no build step.

Every value shown comes from a tool call, a conversation or a reviewer: it is HTML-escaped,
and its control, format and bidi characters (``U+202E``, zero-width spaces...) are written
visibly as ``\\u202e`` with a warning, so what the reviewer reads is what runs. Arguments
are edited as JSON in which those characters are escaped the same way: JSON decodes them
back to the very same text. Each form carries a token bound to its pause and to the
reviewer's key, so another site cannot submit it. No decision is preselected.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from beamfilter_core import Message

from ._inbox import Entry

__all__ = ["confirm_page", "form_token", "hidden_characters", "inbox_page", "message_page", "visible", "visible_json"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;padding:0 1rem;color:#222}
h1{font-size:1.4rem}.pause{border:1px solid #ccc;border-radius:6px;padding:1rem;margin:1rem 0}
.meta{color:#555;font-size:.9rem}.call{margin:.6rem 0;padding:.6rem;background:#f6f6f6;border-radius:4px}
textarea{width:100%;font-family:monospace;font-size:.9rem}input[type=text]{width:60%}
button{margin-right:.5rem;padding:.35rem .9rem}.empty{color:#666}.flash{padding:.6rem;background:#eef6ee}
.error{background:#fbeaea}.ctl{background:#ffe08a;color:#7a2e00;font-family:monospace;border-radius:2px}
.warn{background:#fff4d6;border-left:4px solid #d89b00;padding:.4rem .6rem}.said{white-space:pre-wrap;margin:.2rem 0}
table.diff{border-collapse:collapse}
table.diff td,table.diff th{border:1px solid #ccc;padding:.3rem .5rem;font-family:monospace}
"""

# Reload when the inbox changes, unless the reviewer is typing in a form.
_SCRIPT = """
(function(){
  var version = document.body.dataset.version, submitting = false;
  document.addEventListener('submit', function(){ submitting = true; });
  async function watch(){
    while(true){
      try{
        var r = await fetch('/inbox/version?since=' + version, {credentials:'same-origin'});
        var v = (await r.json()).version;
        if(submitting){ return; }
        if(String(v) !== String(version)){
          var a = document.activeElement;
          if(!(a && (a.tagName === 'TEXTAREA' || a.tagName === 'INPUT' || a.tagName === 'SELECT'))){
            location.reload(); return;
          }
        }
      }catch(e){ await new Promise(function(ok){ setTimeout(ok, 2000); }); }
    }
  }
  watch();
})();
"""

# Characters a reader does not see, or that reorder what is seen: C0/C1 controls (but for
# line breaks and tabs in prose), format characters (bidi overrides and isolates,
# zero-width space/joiners, the BOM), line and paragraph separators.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)
# json.dumps escapes C0 controls itself (a raw line break in its output is layout)
_HIDDEN_IN_JSON = re.compile(
    "[\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)


def _code(char: str) -> str:
    return f"\\u{ord(char):04x}"


def _name(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, 'CONTROL CHARACTER')}"


def hidden_characters(texts: Iterable[str]) -> list[str]:
    """The distinct hidden characters in ``texts``, named (``U+202E RIGHT-TO-LEFT OVERRIDE``)."""
    found: dict[str, None] = {}
    for text in texts:
        for match in _HIDDEN.finditer(text):
            found[_name(match.group())] = None
    return list(found)


def visible(text: str) -> str:
    """``text`` as HTML, each hidden character shown as a highlighted ``\\uXXXX``."""
    out: list[str] = []
    last = 0
    for match in _HIDDEN.finditer(text):
        char = match.group()
        out.append(escape(text[last : match.start()]))
        out.append(f'<span class="ctl" title="{escape(_name(char))}">{_code(char)}</span>')
        last = match.end()
    out.append(escape(text[last:]))
    return "".join(out)


def visible_json(value: Any) -> str:
    """``value`` as indented JSON in which every hidden character is a ``\\uXXXX`` escape:
    ``json.loads`` gives back exactly ``value``."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return _HIDDEN_IN_JSON.sub(lambda m: _code(m.group()), text)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _warning(texts: Iterable[str]) -> str:
    names = hidden_characters(texts)
    if not names:
        return ""
    return (
        '<p class="warn" role="alert">Warning: hidden or direction-changing characters, shown as \\uXXXX: '
        f"{escape(', '.join(names))}. They run exactly as written.</p>"
    )


def form_token(key: str, pause_id: str) -> str:
    """The form token of ``pause_id`` for a reviewer holding ``key``."""
    return hmac.new(key.encode(), f"inbox-decide:{pause_id}".encode(), hashlib.sha256).hexdigest()


def _when(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _last(messages: Sequence[Message], role: str, calls: bool = False) -> str | None:
    for message in reversed(messages):
        if message.role == role and (not calls or message.tool_calls):
            return message.text
    return None


def _said(label: str, text: str | None) -> str:
    if not text:
        return ""
    return f'<div class="context">{escape(label)}:<div class="said">{visible(text)}</div></div>'


def _call(entry: Entry, call_id: str) -> str:
    call = next(c for c in entry.pause.calls if c.id == call_id)
    arguments = dict(call.arguments)
    text = visible_json(arguments)
    cid = escape(call_id)
    tool = next((t for t in entry.kernel.tools if t.name == call.name), None)
    described = _said("What the tool does", tool.description if tool is not None else None)
    by = entry.paused_by.get(call_id)
    why = ""
    if by is not None:
        reason = f": {visible(by['reason'])}" if by.get("reason") else ""
        why = f'<div class="paused-by">Paused by the filter <strong>{visible(by["filter"])}</strong>{reason}</div>'
    return f"""
  <div class="call" data-call="{cid}">
    <div><strong class="tool">{visible(call.name)}</strong> <span class="meta">call {cid}</span></div>
    {why}{described}{_warning([call.name, *_strings(arguments)])}
    <fieldset><legend>Decision (choose one)</legend>
      <label><input type="radio" name="action:{cid}" value="approve"> approve</label>
      <label><input type="radio" name="action:{cid}" value="reject"> reject</label>
    </fieldset>
    <label>Reason (for a rejection) <input type="text" name="reason:{cid}"></label>
    <div><label>Arguments (edit them to approve other arguments; you confirm the change)
      <textarea name="arguments:{cid}" rows="{min(12, text.count(chr(10)) + 2)}">{escape(text)}</textarea>
    </label></div>
  </div>"""


def _pause(entry: Entry, token: str) -> str:
    pid = escape(entry.pause_id)
    messages = entry.pause.messages
    calls = "".join(_call(entry, call_id) for call_id in entry.pause.awaiting)
    reason = visible(entry.pause.reason or "(no reason given)")
    conversation = visible(entry.shown_conversation or entry.conversation_id or "(none)")
    client = f" · client {escape(entry.client)}" if entry.client else ""
    refused = (
        f'<p class="flash error">The last decision was refused: {visible(entry.refusal)}</p>' if entry.refusal else ""
    )
    user, model = _last(messages, "user"), _last(messages, "assistant", calls=True)
    return f"""
<section class="pause" id="pause-{pid}">
  <div class="meta">pause {pid}{client} · conversation {conversation} · since {_when(entry.created)}</div>
  <div>Why it paused: <em>{reason}</em></div>{refused}
  {_said("The user's last message", user)}{_said("The model, before the call", model)}
  {_warning([user or "", model or ""])}
  <form method="post" action="/inbox/{pid}/decide">
    <input type="hidden" name="token" value="{escape(token)}">
    {calls}
    <button type="submit" name="all" value="">Submit decisions</button>
    <button type="submit" name="all" value="approve">Approve all</button>
    <button type="submit" name="all" value="reject">Reject all</button>
  </form>
</section>"""


def _document(title: str, body: str, version: int | None = None) -> str:
    data = f' data-version="{version}"' if version is not None else ""
    script = f"\n<script>{_SCRIPT}</script>" if version is not None else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head>
<body{data}>
{body}{script}
</body></html>"""


def inbox_page(entries: Sequence[Entry], version: int, key: str, flash: str = "") -> str:
    """The inbox: every pending pause with its context, its awaited calls and their forms."""
    body = "".join(_pause(entry, form_token(key, entry.pause_id)) for entry in entries)
    if not entries:
        body = '<p class="empty">No pending pauses.</p>'
    note = f'<p class="flash" role="status">{escape(flash)}</p>' if flash else ""
    heading = f'<h1>beamfilter inbox <span class="meta">{len(entries)} pending</span></h1>\n'
    return _document("beamfilter inbox", heading + note + body, version)


def _diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    rows = []
    for name in dict.fromkeys([*before, *after]):
        old = visible_json(before[name]) if name in before else "(absent)"
        new = visible_json(after[name]) if name in after else "(removed)"
        if old != new:
            rows.append(f"<tr><td>{visible(name)}</td><td>{escape(old)}</td><td>{escape(new)}</td></tr>")
    return '<table class="diff"><tr><th>argument</th><th>as the model sent it</th><th>as you edited it</th></tr>' + (
        "".join(rows) + "</table>"
    )


def confirm_page(pause_id: str, form: Mapping[str, str], edits: Mapping[str, tuple[Any, Any]]) -> str:
    """The changes a reviewer made to arguments, to confirm before they run."""
    tables = "".join(
        f"<h2>Call {escape(call_id)}</h2>{_diff(before, after)}{_warning(_strings(after))}"
        for call_id, (before, after) in edits.items()
    )
    fields = "".join(
        f'<input type="hidden" name="{escape(name)}" value="{escape(value)}">'
        for name, value in form.items()
        if name != "confirm"
    )
    body = f"""<h1>Confirm the edited arguments</h1>
<p role="status">Pause {escape(pause_id)}: these calls run with the arguments you edited.</p>{tables}
<form method="post" action="/inbox/{escape(pause_id)}/decide">{fields}
<input type="hidden" name="confirm" value="1"><button type="submit">Approve with these arguments</button></form>
<p><a href="/inbox">Back to the inbox</a></p>"""
    return _document("Confirm the edited arguments", body)


def message_page(title: str, text: str) -> str:
    """A short page for an outcome that is not the inbox (already decided, bad form)."""
    body = (
        f'<h1>{escape(title)}</h1><p class="flash error" role="status">{visible(text)}</p>'
        '<p><a href="/inbox">Back to the inbox</a></p>'
    )
    return _document(title, body)
