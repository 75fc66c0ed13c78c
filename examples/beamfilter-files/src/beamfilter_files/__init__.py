"""beamfilter-files: a memory store that keeps each conversation in one JSON file.

``files:///path/to/folder`` (``files://relative/folder`` too). One file per conversation
and one per user, named by a hash of the id; every write replaces its file atomically, so a
crash leaves the old file or the new one, never half of it. For one process: a second
process writing the same folder could lose an append (use SQLite for that).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from beamfilter_core import StoreSpec, hookimpl
from beamfilter_core.errors import ConfigError
from beamfilter_memory import KEEP_PAUSE, Fact, StoreBase


class FilesStore(StoreBase):
    """Conversations, pauses and facts as JSON files in a folder."""

    def __init__(self, url: str) -> None:
        folder = url.removeprefix("files://")
        if not url.startswith("files://") or not folder:
            msg = f"FilesStore URL {url!r} is invalid; write files:///absolute/folder or files://relative/folder."
            raise ConfigError(msg)
        super().__init__(url)
        self.folder = Path(folder)

    def _path(self, kind: str, key: str) -> Path:
        return self.folder / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()}.json"

    def _get(self, kind: str, key: str) -> dict[str, Any]:
        try:
            return json.loads(self._path(kind, key).read_text("utf-8"))  # type: ignore[no-any-return]
        except FileNotFoundError:
            return {}

    def _put(self, kind: str, key: str, data: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(temporary, self._path(kind, key))  # atomic: readers see the old or the new file

    # The primitives never await between reading and writing a file, so in one event loop
    # each of them is atomic (the files are small: the blocking reads and writes are short).

    async def _read(self, cid: str, limit: int | None) -> list[str]:
        rows: list[str] = self._get("conversation", cid).get("messages", [])
        return rows if limit is None else rows[-limit:]

    async def _write(self, cid: str, rows: Sequence[str], pause: Any, *, clear: bool = False) -> None:
        data = {} if clear else self._get("conversation", cid)
        data["id"] = cid  # the file name is a hash: listing the pauses reads the id here
        data["messages"] = [*data.get("messages", []), *rows]
        if pause is None:
            data.pop("pause", None)
        elif pause is not KEEP_PAUSE:
            data["pause"] = pause
        self._put("conversation", cid, data)

    async def _read_pause(self, cid: str) -> str | None:
        return self._get("conversation", cid).get("pause")

    async def _take_pause(self, cid: str, pause_id: str | None) -> str | None:
        data = self._get("conversation", cid)
        text = data.get("pause")
        if text is None or (pause_id is not None and self.pause_id_of(text) != pause_id):
            return None  # nothing paused, or a newer pause than the one asked for: leave it
        del data["pause"]
        self._put("conversation", cid, data)
        return text  # type: ignore[no-any-return]

    async def _claim(self, pause_id: str) -> bool:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:  # O_EXCL: of several claims, even from several processes, one creates the file
            os.close(os.open(self._path("resumed", pause_id), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    # Optional (all three or none): several workers then share their pauses' inbox.

    async def _list_pauses(self, limit: int | None) -> list[tuple[str, str]]:
        stored = (json.loads(path.read_text("utf-8")) for path in self.folder.glob("conversation-*.json"))
        found = sorted((data["id"], data["pause"]) for data in stored if "pause" in data)
        return found if limit is None else found[:limit]

    async def _put_outcome(self, pause_id: str, text: str | None, first: bool) -> bool:
        if text is None:
            self._path("outcome", pause_id).unlink(missing_ok=True)
            return True
        if not first:
            self._put("outcome", pause_id, {"text": text})
            return True
        self.folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({"text": text}, out)
        try:  # a link fails when the name exists: of several first outcomes, one is stored whole
            os.link(temporary, self._path("outcome", pause_id))
        except FileExistsError:
            return False
        finally:
            os.unlink(temporary)
        return True

    async def _get_outcome(self, pause_id: str) -> str | None:
        return self._get("outcome", pause_id).get("text")

    async def _save_facts(self, uid: str, facts: list[Fact]) -> None:
        subjects = {fact.subject for fact in facts}
        kept = [pair for pair in self._get("user", uid).get("facts", []) if pair[0] not in subjects]
        self._put("user", uid, {"facts": [*kept, *([f.subject, f.text] for f in facts)]})

    async def _load_facts(self, uid: str) -> list[tuple[str, str]]:
        return [(subject, text) for subject, text in self._get("user", uid).get("facts", [])]

    async def _clear_facts(self, uid: str) -> None:
        self._path("user", uid).unlink(missing_ok=True)


SPEC = StoreSpec("files", FilesStore, ("files",), {"type": "object", "additionalProperties": False}, "JSON files")


@hookimpl
def beamfilter_register_stores() -> list[StoreSpec]:
    """The ``files://`` store."""
    return [SPEC]
