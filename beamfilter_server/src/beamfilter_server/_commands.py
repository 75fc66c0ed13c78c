"""``beamfilter serve CONFIG``: the gateway on Uvicorn.

SIGTERM (or Ctrl-C) stops accepting connections, lets running requests and streams finish
for ``[server] shutdown_grace`` seconds, then closes the kernel: its stores, MCP servers and
model connections.
"""

from __future__ import annotations

import argparse
import logging
import tomllib
from pathlib import Path

from beamfilter_core.errors import ConfigError
from beamfilter_core.secrets import MaskingFilter

from ._options import ServerOptions

__all__ = ["AccessLogFilter", "check_literal_keys", "configure", "mask_logs", "run"]

_KEY_LISTS = ("api_keys", "inbox_keys")


def check_literal_keys(config: str | Path) -> None:
    """Refuse keys written in the file itself (``[server] api_keys = ["sk-..."]``): keys come
    from ``{ "$env" = "NAME" }``, unless ``allow_literal_keys = true`` says otherwise."""
    path = Path(config)
    if path.suffix != ".toml" or not path.is_file():
        return
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    server = data.get("server")
    if not isinstance(server, dict) or server.get("allow_literal_keys") is True:
        return
    for name in _KEY_LISTS:
        keys = server.get(name)
        for index, key in enumerate(keys if isinstance(keys, list) else ()):
            if not (isinstance(key, dict) and "$env" in key):
                msg = (
                    f'{config}: [server] {name}[{index}] is written in the file; give it as {{ "$env" = "NAME" }} '
                    "so the key stays out of the file (or set allow_literal_keys = true)."
                )
                raise ConfigError(msg)


class AccessLogFilter(logging.Filter):
    """Drops the query string from Uvicorn's access lines: a client that puts a key in the
    URL (``?api_key=...``) does not get it written to the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True


def mask_logs() -> None:
    """Mask secrets and escape control characters in every line the process logs (each
    handler of the root and Uvicorn loggers), and keep query strings out of the access log."""
    masking = MaskingFilter()
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, MaskingFilter) for f in handler.filters):
                handler.addFilter(masking)
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, AccessLogFilter) for f in access.filters):
        access.addFilter(AccessLogFilter())


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``beamfilter serve``."""
    parser.add_argument("config", help="a beamfilter.toml (its [server] section holds keys and limits)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument(
        "--proxy-headers",
        action="store_true",
        help="trust X-Forwarded-For/-Proto from --forwarded-allow-ips (behind a reverse proxy)",
    )
    parser.add_argument("--forwarded-allow-ips", default="127.0.0.1", help="the proxies trusted for those headers")


def run(args: argparse.Namespace) -> int:
    """Run ``beamfilter serve``."""
    import uvicorn

    from beamfilter_core import build_config

    from ._app import create_app

    # the gateway's own lines (pauses, decisions, failures) at --log-level; libraries at warning
    logging.basicConfig(format="%(levelname)-9s %(name)s: %(message)s", level=logging.WARNING)
    logging.getLogger("beamfilter").setLevel(args.log_level.upper())
    check_literal_keys(args.config)
    built = build_config(args.config)
    options = built.sections.get("server")
    if options is None:
        options = ServerOptions()
    elif not isinstance(options, ServerOptions):  # pragma: no cover - the section always builds ServerOptions
        msg = f"{args.config}: [server] built {options!r}, not ServerOptions."
        raise ConfigError(msg)
    if built.runner() is not built.kernel:
        msg = f"{args.config}: beamfilter serve runs turns on its own kernel; remove the section that runs them."
        raise ConfigError(msg)
    app = create_app(built.kernel, options)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        timeout_graceful_shutdown=int(options.shutdown_grace) or None,
        proxy_headers=args.proxy_headers,
        forwarded_allow_ips=args.forwarded_allow_ips,
        server_header=False,
    )
    mask_logs()  # after uvicorn.Config, which sets up its loggers
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1
