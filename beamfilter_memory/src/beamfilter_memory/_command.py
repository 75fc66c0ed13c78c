"""``beamfilter memory migrate URL``: create a store's tables ahead of a deployment."""

from __future__ import annotations

import argparse
import asyncio

from ._stores import migrate


def configure_command(parser: argparse.ArgumentParser) -> None:
    """The ``memory`` command's arguments (one action today: ``migrate URL``)."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = actions.add_parser(
        "migrate",
        help="create a store's tables ahead of a deployment",
        description="Create the tables of the memory store a URL names (idempotent), through the store "
        "that serves the URL's scheme; SQLite and PostgreSQL create tables, memory:// and Redis need none.",
    )
    run.add_argument("url", help="the store URL, e.g. postgresql://app@db/chats or sqlite:///chats.db")


def run_command(args: argparse.Namespace) -> int:
    """Run ``beamfilter memory migrate URL``; print what was done (credentials masked)."""
    print(asyncio.run(migrate(args.url)))
    return 0
