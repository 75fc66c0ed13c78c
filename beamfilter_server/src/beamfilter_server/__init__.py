"""beamfilter-server: ``beamfilter serve``, an OpenAI-compatible gateway in front of the
config's onion, with an approvals inbox in the browser. See docs/serve.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beamfilter_core import lazy_exports

if TYPE_CHECKING:
    from ._app import create_app
    from ._auth import client_id
    from ._client_tools import CLIENT_TOOLS_FILTER
    from ._gateway import CONVERSATION_HEADER, WAIT_HEADER, Gateway
    from ._options import SERVER_OPTIONS, ServerOptions

__version__ = "0.1.0"

__all__ = [
    "CLIENT_TOOLS_FILTER",
    "CONVERSATION_HEADER",
    "SERVER_OPTIONS",
    "WAIT_HEADER",
    "Gateway",
    "ServerOptions",
    "__version__",
    "client_id",
    "create_app",
]

# Imported on first use: `beamfilter --help` and `beamfilter plugins` load this package's
# entry point, and should not pay for what only a command or a config section needs.
_LAZY = {
    "create_app": "._app",
    "client_id": "._auth",
    "CLIENT_TOOLS_FILTER": "._client_tools",
    "CONVERSATION_HEADER": "._gateway",
    "WAIT_HEADER": "._gateway",
    "Gateway": "._gateway",
    "SERVER_OPTIONS": "._options",
    "ServerOptions": "._options",
}

__getattr__ = lazy_exports(__name__, globals(), _LAZY)
