"""The inbox page: server-rendered HTML, one small inline script, no build step.

Every value shown comes from a tool call or a reviewer and is HTML-escaped. Each form carries
a token bound to its pause and to the reviewer's key, so another site cannot submit it.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
from collections.abc import Sequence
from html import escape

from ._inbox import Entry

__all__ = ["form_token", "inbox_page", "message_page"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;padding:0 1rem;color:#222}
h1{font-size:1.4rem}.pause{border:1px solid #ccc;border-radius:6px;padding:1rem;margin:1rem 0}
.meta{color:#555;font-size:.9rem}.call{margin:.6rem 0;padding:.6rem;background:#f6f6f6;border-radius:4px}
textarea{width:100%;font-family:monospace;font-size:.9rem}input[type=text]{width:60%}
button{margin-right:.5rem;padding:.35rem .9rem}.empty{color:#666}.flash{padding:.6rem;background:#eef6ee}
.error{background:#fbeaea}
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


def form_token(key: str, pause_id: str) -> str:
    """The form token of ``pause_id`` for a reviewer holding ``key``."""
    return hmac.new(key.encode(), f"inbox-decide:{pause_id}".encode(), hashlib.sha256).hexdigest()


def _when(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _call(entry: Entry, call_id: str) -> str:
    call = next(c for c in entry.pause.calls if c.id == call_id)
    arguments = json.dumps(dict(call.arguments), indent=2, ensure_ascii=False)
    cid = escape(call_id)
    return f"""
  <div class="call" data-call="{cid}">
    <div><strong>{escape(call.name)}</strong> <span class="meta">call {cid}</span></div>
    <label>Decision
      <select name="action:{cid}">
        <option value="approve">approve</option>
        <option value="reject">reject</option>
      </select></label>
    <label>Reason (for a rejection) <input type="text" name="reason:{cid}"></label>
    <div><label>Arguments (edit them to approve other arguments)
      <textarea name="arguments:{cid}" rows="{min(12, arguments.count(chr(10)) + 2)}">{escape(arguments)}</textarea>
    </label></div>
  </div>"""


def _pause(entry: Entry, token: str) -> str:
    pid = escape(entry.pause_id)
    calls = "".join(_call(entry, call_id) for call_id in entry.pause.awaiting)
    reason = escape(entry.pause.reason or "(no reason given)")
    conversation = escape(entry.shown_conversation or entry.conversation_id or "(none)")
    client = f" · client {escape(entry.client)}" if entry.client else ""
    refused = (
        f'<p class="flash error">The last decision was refused: {escape(entry.refusal)}</p>' if entry.refusal else ""
    )
    return f"""
<section class="pause" id="pause-{pid}">
  <div class="meta">pause {pid}{client} · conversation {conversation} · since {_when(entry.created)}</div>
  <div>Why it paused: <em>{reason}</em></div>{refused}
  <form method="post" action="/inbox/{pid}/decide">
    <input type="hidden" name="token" value="{escape(token)}">
    {calls}
    <button type="submit" name="all" value="">Submit decisions</button>
    <button type="submit" name="all" value="approve">Approve all</button>
    <button type="submit" name="all" value="reject">Reject all</button>
  </form>
</section>"""


def inbox_page(entries: Sequence[Entry], version: int, key: str, flash: str = "", failed: bool = False) -> str:
    """The inbox: every pending pause with its awaited calls and their decision forms."""
    body = "".join(_pause(entry, form_token(key, entry.pause_id)) for entry in entries)
    if not entries:
        body = '<p class="empty">No pending pauses.</p>'
    note = f'<p class="flash{" error" if failed else ""}" role="status">{escape(flash)}</p>' if flash else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>beamfilter inbox</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head>
<body data-version="{version}">
<h1>beamfilter inbox <span class="meta">{len(entries)} pending</span></h1>
{note}{body}
<script>{_SCRIPT}</script>
</body></html>"""


def message_page(title: str, text: str) -> str:
    """A short page for an outcome that is not the inbox (already decided, bad form)."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title><style>{_STYLE}</style></head>
<body><h1>{escape(title)}</h1><p class="flash error" role="status">{escape(text)}</p>
<p><a href="/inbox">Back to the inbox</a></p></body></html>"""
