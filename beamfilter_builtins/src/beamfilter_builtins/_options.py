"""Schema fragments shared by the built-in filters' options.

Each filter's options are described once, by the JSON schema of its spec: the core
checks a config's options against it, and ``@options_schema`` checks Python calls
against the same schema (see docs/writing-filters.md). These fragments keep the shared
ones, and the fix each tells a Python caller (``x-hint``), written once.
"""

from __future__ import annotations

from typing import Any

__all__ = ["IMPORT_PATH", "TOOL_NAMES"]

#: A list of tool names (``tools``, ``ignore_tools``...).
TOOL_NAMES: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "x-hint": "a list of tool names, e.g. ['search']",
}

#: A ``"package.module:function"`` import path (config files cannot hold Python functions).
IMPORT_PATH: dict[str, Any] = {
    "type": "string",
    "pattern": "^[A-Za-z_][\\w.]*:[A-Za-z_][\\w.]*$",
    "x-hint": "a callable or an import path such as 'mypackage.module:function'",
}
