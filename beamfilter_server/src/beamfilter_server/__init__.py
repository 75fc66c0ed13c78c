"""beamfilter-server: ``beamfilter serve``, an OpenAI-compatible gateway in front of the
config's onion, with an approvals inbox in the browser. See docs/serve.md.
"""

from __future__ import annotations

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
