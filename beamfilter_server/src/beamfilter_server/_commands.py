"""``beamfilter serve CONFIG``: the gateway on Uvicorn.

SIGTERM (or Ctrl-C) stops accepting connections, lets running requests and streams finish
for ``[server] shutdown_grace`` seconds, then closes the kernel: its stores, MCP servers and
model connections.
"""

from __future__ import annotations

import argparse
import logging

from beamfilter_core.errors import ConfigError

from ._options import ServerOptions

__all__ = ["configure", "run"]


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

    from beamfilter_core._config import build_config

    from ._app import create_app

    # the gateway's own lines (pauses, decisions, failures) at --log-level; libraries at warning
    logging.basicConfig(format="%(levelname)-9s %(name)s: %(message)s", level=logging.WARNING)
    logging.getLogger("beamfilter").setLevel(args.log_level.upper())
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
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1
