"""The ``beamfilter`` command (also ``python -m beamfilter_core``).

Exit codes: 0 success, 1 the run failed, 2 usage or config error. The listing command
works even when plugins fail to import: failures are listed, never fatal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import re
import sys
import traceback
import uuid
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from ._masking import mask_secrets
from .errors import BeamfilterError, ConfigError, PluginError

T = TypeVar("T")

if TYPE_CHECKING:
    from ._config import BuiltConfig
    from ._kernel import Kernel
    from ._records import TurnResult
    from ._registry import Registered

__all__ = ["main"]

OK, RUN_ERROR, USAGE_ERROR = 0, 1, 2


_BUILTIN_COMMANDS = frozenset({"plugins", "chain", "run", "chat", "demo", "new"})


def _plain(doc: str | None) -> str:
    """A docstring as --help shows it: no reStructuredText markup (``x``, :class:`X`)."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc or "")
    return text.replace("``", "")


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 filter``, ``2 filters``, ``0 filters``."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def _run_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--trace",
        action="store_true",
        help="print each filter's before/after lines (scope, filter, what changed, time) to stderr",
    )
    command.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="MODULE:FUNCTION",
        help="add a Python function (or list of tools) as tools; repeatable; the current folder is importable",
    )
    command.add_argument(
        "--debug", action="store_true", help="print the traceback of a failure (or BEAMFILTER_DEBUG=1)"
    )
    command.add_argument(
        "--log",
        metavar="LEVEL",
        help="print log records of this level and above on stderr: the logging filter's, an MCP server's "
        "stderr, other libraries' (debug, info, warning, error; or BEAMFILTER_LOG=LEVEL)",
    )


def _parser(argv: Sequence[str] = (), registry: Any = None) -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="beamfilter",
        description="Run and inspect beamfilter kernels built from a beamfilter.toml config.",
        epilog="Exit codes: 0 success, 1 the run failed, 2 usage or config error.",
    )
    parser.add_argument("--version", action="version", version=f"beamfilter-core {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    plugins = sub.add_parser(
        "plugins", help="list plugins and what they provide", description=_plain(_cmd_plugins.__doc__)
    )
    plugins.add_argument("--json", action="store_true", help="print JSON instead of a table")
    plugins.set_defaults(handler=_cmd_plugins)
    check = plugins.add_subparsers(dest="action", metavar="ACTION").add_parser(
        "check",
        help="check an installed plugin distribution before publishing it",
        description=_plain(_cmd_plugins_check.__doc__),
    )
    check.add_argument("dist", nargs="?", metavar="DIST", help="the distribution, e.g. beamfilter-shout (default: all)")
    check.set_defaults(handler=_cmd_plugins_check)

    new = sub.add_parser("new", help="create a new project from a template", description=_plain(_cmd_new.__doc__))
    new_sub = new.add_subparsers(dest="kind", metavar="KIND", required=True)
    from ._scaffold import configure_new_plugin

    configure_new_plugin(new_sub.add_parser("plugin", help="a plugin package: filters, toolset, store, tests, CI"))
    new.set_defaults(handler=_cmd_new)

    chain = sub.add_parser("chain", help="draw the filter onion of each scope", description=_plain(_cmd_chain.__doc__))
    chain.add_argument("config", help="path to a beamfilter.toml")
    chain.set_defaults(handler=_cmd_chain)

    run = sub.add_parser("run", help="run one prompt, streaming the answer", description=_plain(_cmd_run.__doc__))
    run.add_argument("config", help="path to a beamfilter.toml")
    run.add_argument("prompt", help="the prompt ('-' reads it from stdin)")
    run.add_argument(
        "--json", action="store_true", help="print the TurnResult as JSON (or a JSON error object) instead of streaming"
    )
    run.add_argument("--conversation-id", help="context conversation_id (used by the memory filter)")
    _run_options(run)
    run.set_defaults(handler=_cmd_run)

    chat = sub.add_parser("chat", help="an interactive conversation", description=_plain(_cmd_chat.__doc__))
    chat.add_argument("config", help="path to a beamfilter.toml")
    chat.add_argument("--conversation-id", help="continue this conversation (default: a new id)")
    _run_options(chat)
    chat.set_defaults(handler=_cmd_chat)

    demo = sub.add_parser(
        "demo",
        help="the README's demo on the embedded local model",
        description=_plain(_cmd_demo.__doc__),
        add_help=False,
    )
    demo.set_defaults(handler=_cmd_demo)
    _add_plugin_commands(sub, argv, registry)
    return parser


def _add_plugin_commands(sub: Any, argv: Sequence[str], registry: Any) -> None:
    """Add the commands plugins register (``beamfilter_register_commands``), unless ``argv``
    names a built-in command: those run without importing any plugin."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    if first in _BUILTIN_COMMANDS:
        return
    if registry is None:
        from ._registry import Registry

        registry = Registry(strict=False, kinds=("command",))
    from ._registry import quiet_plugin_log

    with quiet_plugin_log():  # a failing plugin is listed by `beamfilter plugins`, not here
        commands = registry.commands()
    taken: set[str] = set()
    for item in commands:
        name = item.name
        if name in _BUILTIN_COMMANDS or name in taken:
            continue  # a built-in command or the first plugin's command of that name wins
        taken.add(name)
        parser = sub.add_parser(
            name, help=item.summary or f"(from the plugin {item.plugin!r})", description=item.summary or None
        )
        item.spec.configure(parser)
        parser.set_defaults(handler=item.spec.run)


def main(argv: Sequence[str] | None = None, *, registry: Any = None) -> int:
    """Run the ``beamfilter`` command with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    ``registry`` is where plugin commands come from (default: the installed plugins).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(argv, registry)
    try:
        args, extra = parser.parse_known_args(argv)
        if args.command == "demo":
            args.args = extra  # the demo parses its own options
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help / --version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else USAGE_ERROR
    if args.command is None:
        parser.print_help(sys.stderr)
        return USAGE_ERROR
    debug = getattr(args, "debug", False) or os.environ.get("BEAMFILTER_DEBUG", "").strip() in ("1", "true", "yes")
    try:
        if args.command in ("run", "chat"):
            _start_logging(args.log if args.log is not None else os.environ.get("BEAMFILTER_LOG"))
        return int(args.handler(args))
    except BrokenPipeError:
        # the reader went away (| head): end quietly, and keep Python from complaining at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return OK
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001  # every failure ends as one clear line (or JSON), never a bare traceback
        usage = isinstance(exc, ConfigError | PluginError)
        code = USAGE_ERROR if usage else RUN_ERROR
        if debug:
            traceback.print_exc()
        # error texts may quote a store URL, a base_url or a refused key: secrets are shown as ***
        text = mask_secrets(str(exc))
        if getattr(args, "json", False) and args.command == "run":
            error = {"type": type(exc).__name__, "message": text, "exit_code": code}
            print(json.dumps({"error": error}, indent=2, ensure_ascii=False))
        elif usage:
            print(f"beamfilter {args.command}: {text}", file=sys.stderr)
        else:
            hint = "" if debug else " (--debug or BEAMFILTER_DEBUG=1 shows the traceback)"
            if "\n" in text:  # a server's stderr lines: the hint on its own line, after them
                hint = hint.replace(" (", "\n(", 1)
            print(f"beamfilter {args.command}: the run failed: {type(exc).__name__}: {text}{hint}", file=sys.stderr)
        return code


_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
_LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


def _start_logging(level: str | None) -> None:
    """Show log records of ``level`` and above on stderr, secrets masked (``--log``,
    ``BEAMFILTER_LOG``); nothing is shown without it.

    Raises:
        ConfigError: ``level`` is not a level name.
    """
    if level is None or not level.strip():
        return
    name = level.strip().lower()
    if name not in _LOG_LEVELS:
        msg = f"--log {level!r} is not a log level; give one of {', '.join(_LOG_LEVELS)} (or set BEAMFILTER_LOG)."
        raise ConfigError(msg)
    import logging

    from ._masking import MaskingFilter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_LOG_FORMAT))
    handler.addFilter(MaskingFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(name.upper())


# -- plugins ----------------------------------------------------------------------------


def _cmd_plugins(args: argparse.Namespace) -> int:
    """List every plugin of the ``beamfilter`` entry point group: distribution, version,
    status (loaded, failed with the reason, blocked) and the filters, stores, models,
    presets, toolsets, config sections and commands it provides. Failing plugins are listed, never fatal."""
    from ._registry import Registry, core_version, quiet_plugin_log

    registry = Registry(strict=False)
    with quiet_plugin_log():  # failures are part of the listing below: no warning lines
        infos = registry.plugins()
    provided: dict[str, list[dict[str, Any]]] = {}
    groups: tuple[tuple[str, Sequence[Registered[Any]]], ...] = (
        ("filter", registry.filters()),
        ("store", registry.stores()),
        ("model", registry.models()),
        ("preset", registry.presets()),
        ("toolset", registry.toolsets()),
        ("section", registry.sections()),
        ("command", registry.commands()),
    )
    for kind, items in groups:
        for item in items:
            entry: dict[str, Any] = {
                "kind": kind,
                "name": item.name,
                "qualified": item.qualified,
                "summary": item.summary,
            }
            if kind == "filter":
                entry["scopes"] = list(item.spec.scopes)
            elif kind == "store":
                entry["schemes"] = list(item.spec.schemes)
            elif kind == "preset":
                entry["version"] = item.spec.version
                entry["filters"] = [table["use"] for table in item.spec.filters]
            elif kind == "model" and item.spec.requirements is not None:
                problem = item.spec.requirements()
                if problem is not None:
                    entry["cannot_run"] = problem
            provided.setdefault(item.plugin, []).append(entry)
    if args.json:
        data = [{**info.to_dict(), "provides": provided.get(info.name, [])} for info in infos]
        print(json.dumps({"core_version": core_version(), "plugins": data}, indent=2))
        return OK
    out = sys.stdout
    print(f"beamfilter-core {core_version()}: {plural(len(infos), 'plugin')}", file=out)
    for info in infos:
        where = f"{info.distribution} {info.version}" if info.distribution else "(registered in code)"
        print(f"\n{info.name}  [{info.status}]  {where}", file=out)
        if info.status == "failed":
            print(f"  error: {info.error}", file=out)
            print(f"  hint:  {info.hint}", file=out)
        elif info.status == "blocked":
            print(f"  not imported: {info.error}", file=out)
        for entry in provided.get(info.name, []):
            extra = ", ".join(entry.get("scopes", []) or entry.get("schemes", []) or entry.get("filters", []))
            extra = f"  ({extra})" if extra else ""
            print(f"  {entry['kind']:<7} {entry['qualified']:<28} {entry['summary']}{extra}", file=out)
            if "cannot_run" in entry:
                print(f"          cannot run here: {entry['cannot_run']}", file=out)
        if info.status == "loaded" and not provided.get(info.name):
            print("  (provides nothing yet)", file=out)
    return OK


def _cmd_plugins_check(args: argparse.Namespace) -> int:
    """Import one installed plugin distribution (DIST, default: every installed one) on its
    own and report, all at once, what would bite its users: an entry point that fails to
    import, hook functions that do not match the hooks, records without summary, scopes or
    options schema, schemas that do not compile, defaults that fail their own schema, names
    other installed plugins use, a factory that fails with default options, a missing
    py.typed. Exit code 0 when nothing was found, 1 otherwise."""
    from ._plugin_check import run_check

    return run_check(args)


# -- chain ------------------------------------------------------------------------------


def _memory_warning(built: BuiltConfig, err: TextIO) -> None:
    for position, item in enumerate(built.filters):
        if position and (item.qualified.rpartition(":")[2] == "memory" or getattr(item.filter, "name", "") == "memory"):
            before = ", ".join(b.qualified for b in built.filters[:position])
            print(
                f"warning: the memory filter is filters[{item.index}], after {before}; put it first so that "
                "every other filter sees the loaded history and its retries are saved.",
                file=err,
            )


def _cmd_chain(args: argparse.Namespace) -> int:
    """Draw the onion of each scope (turn, iteration, chat, tool) and the token transforms,
    outermost filter first, as built from CONFIG. Runs no code the config names: modules
    given as 'package.module:function' options are not imported (installed plugins are)."""
    from ._config import build_config
    from ._filter import SCOPE_SPECS, SCOPES
    from ._imports import import_policy

    with import_policy(inspect_only=True) as policy:
        built = build_config(args.config)
    if policy.skipped:
        print(
            f"note: not imported (chain runs no code a config names): {', '.join(dict.fromkeys(policy.skipped))}",
            file=sys.stderr,
        )
    kernel = built.kernel
    out = sys.stdout
    names = [b.qualified for b in built.filters]
    # filters expanded from a preset are marked with it: "pii (builtins:pii) ← preset:production"
    marks = [f" ← {b.preset}" if b.preset else "" for b in built.filters]
    tools = f", {plural(len(built.toolsets), 'toolset')}" if built.toolsets else ""
    print(
        f"{built.source}: model {built.model or type(kernel.model).__name__}, {plural(len(names), 'filter')}{tools}",
        file=out,
    )
    for entry in built.toolsets:  # its name says what it runs, e.g. an unsandboxed shell
        print(f"tools[{entry.index}] {entry.use}: {entry.toolset.name}", file=out)
    presets: dict[tuple[int, str], list[str]] = {}
    for b in built.filters:
        if b.preset:
            presets.setdefault((b.index, b.preset), []).append(b.qualified)
    for (index, preset), members in presets.items():
        print(f"filters[{index}] {preset} expands to: {', '.join(members)}", file=out)
    _print_places(built, out)
    for scope in SCOPES:
        print(f"\n{scope}", file=out)
        indent = "  "
        for index, _hook in kernel.chain(scope).layers:
            print(f"{indent}└─ {kernel.filters[index].name} ({names[index]}){marks[index]}", file=out)
            indent += "   "
        terminal = f"[the model: {built.model}]" if scope == "chat" and built.model else SCOPE_SPECS[scope].centre
        print(f"{indent}└─ {terminal}", file=out)
    transforms = [
        (flt.name, names[i], flt.token.applies_to) for i, flt in enumerate(kernel.filters) if flt.token is not None
    ]
    print("\ntoken (the streamed text, in this order)", file=out)
    steps = [f"{name} ({qualified}, {applies})" for name, qualified, applies in transforms]
    print("  " + " → ".join(["[model tokens]", *steps, "[output]"]), file=out)
    _memory_warning(built, sys.stderr)
    return OK


def _print_places(built: BuiltConfig, out: TextIO) -> None:
    """The paths the config names, as resolved (relative ones are taken from its folder),
    and the folder each stdio MCP server runs in."""
    lines = [f"  {place.where}: {place.given} -> {place.resolved}" for place in built.places]
    for entry in built.toolsets:
        toolset = entry.toolset
        cwd = getattr(toolset, "cwd", None) or getattr(getattr(toolset, "inner", None), "cwd", None)
        if isinstance(cwd, str):
            lines.append(f"  tools[{entry.index}]: the server runs in {cwd}")
    if built.config_dir is not None and lines:
        print(f"\npaths (relative ones are taken from {built.config_dir})", file=out)
        for line in lines:
            print(line, file=out)


# -- run / chat -------------------------------------------------------------------------


def _build(args: argparse.Namespace, err: TextIO) -> BuiltConfig:
    """The config's kernel, with ``--tool`` functions added and, with ``--trace``, every
    filter wrapped to print its before/after lines."""
    import attrs

    from ._config import build_config
    from ._toolsets import as_toolset, import_reference

    extra = [as_toolset(import_reference(ref, os.getcwd()), ref) for ref in args.tool]
    built = build_config(args.config, tools=extra)
    filters: list[Any] = list(built.kernel.filters)
    if args.trace:
        from ._trace import traced_filters

        filters = list(traced_filters(filters, err))
    # outermost, untraced: it only writes the lines of calls to tools that do not exist
    kernel = built.kernel.with_filters([_unknown_tool_lines(err), *filters])
    return attrs.evolve(built, kernel=kernel)


def _has_memory(built: BuiltConfig) -> bool:
    return any(b.qualified.rpartition(":")[2] == "memory" for b in built.filters)


class _Answer:
    """Writes streamed text, then makes sure the user sees the final answer: a turn
    filter may change the answer after it was streamed (a sign-off, a rewrite)."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.streamed: list[str] = []

    def write(self, text: str) -> None:
        self.streamed.append(text)
        self.out.write(text)
        self.out.flush()

    def finish(self, final: str) -> None:
        streamed = "".join(self.streamed)
        if final == streamed:
            self.out.write("\n")
        elif final.startswith(streamed):
            self.out.write(final[len(streamed) :] + "\n")  # a filter appended: stream the rest
        else:
            self.out.write("\n")
            self.out.flush()
            print("[the final answer, changed by a filter after it was streamed:]", file=self.err)
            self.out.write(final + "\n")
        self.out.flush()


#: How long the reason on a ``[tool X: failed: ...]`` line may be.
_REASON_CHARS = 160
_FAILED_PREFIX = re.compile(r"^Tool '[^']*' failed: ")
_CALL_PREFIX = re.compile(r"^The call to '[^']*' was ")


def outcome(result: Any) -> str:
    """``ok``, or ``failed: REASON`` with one short reason: the first sentence of the
    message the model reads (``denied by the tool policy (...): ...``, ``Not run: ...``,
    ``ToolServerError: the MCP server ... failed``...)."""
    if result.ok:
        return "ok"
    text = result.error.message if result.error is not None else result.content
    first = " ".join(text.strip().split("\n", 1)[0].split())
    end = first.find(". ")
    if end > 0:
        first = first[:end]
    first = _CALL_PREFIX.sub("", _FAILED_PREFIX.sub("", first)).rstrip(".")
    if len(first) > _REASON_CHARS:
        first = first[: _REASON_CHARS - 1] + "…"
    return f"failed: {first}" if first else "failed"


def _unknown_tool_lines(err: TextIO) -> Any:
    """A chat filter (the outermost: it sees every tool of the run) that writes the
    ``[tool ...]`` lines of calls to a tool that does not exist: the run answers them itself
    (the model reads the available tools), without the events the other lines come from."""
    from ._filter import Filter
    from ._records import ChatRequest, ChatResponse

    async def around_chat(request: ChatRequest, state: dict[str, Any], call_next: Any) -> ChatResponse:
        response: ChatResponse = await call_next(request)
        calls = response.message.tool_calls
        if calls:
            known = {tool.name for tool in request.tools}
            for call in calls:
                if call.name not in known:
                    print(f"[tool {call.name}({json.dumps(call.arguments)})]", file=err)
                    print(f"[tool {call.name}: failed: the model asked for a tool that does not exist]", file=err)
        return response

    return Filter("cli_unknown_tools", around_chat=around_chat)


async def _stream(kernel: Kernel, entry: Any, context: dict[str, Any] | None, out: TextIO, err: TextIO) -> TurnResult:
    from ._streaming import RunFinished, TextDelta, ToolCallFinished, ToolCallStarted

    answer = _Answer(out, err)
    result: TurnResult | None = None
    async for event in kernel.run_stream(entry, context=context):
        kind = type(event)
        if kind is TextDelta:
            answer.write(event.text)  # type: ignore[union-attr]
        elif kind is ToolCallStarted:
            call = event.call  # type: ignore[union-attr]
            print(f"[tool {call.name}({json.dumps(call.arguments)})]", file=err)
        elif kind is ToolCallFinished:
            print(f"[tool {event.call.name}: {outcome(event.result)}]", file=err)  # type: ignore[union-attr]
        elif isinstance(event, RunFinished):
            result = event.result
    if result is None:  # pragma: no cover - run_stream always ends with RunFinished
        msg = "the stream ended without a result"
        raise BeamfilterError(msg)
    answer.finish(result.text if result.status == "completed" else "".join(answer.streamed))
    return result


def _report_status(result: TurnResult, err: TextIO) -> None:
    if result.status == "paused" and result.pause is not None:
        calls = plural(len(result.pause.awaiting), "tool call")
        print(f"paused: awaiting a decision on {calls}: {', '.join(result.pause.awaiting)}", file=err)
        if result.pause.reason:
            print(f"  reason: {result.pause.reason}", file=err)
    elif result.status == "cancelled":
        print("cancelled", file=err)
    if result.blocked_by:
        print(f"blocked by the filter {result.blocked_by!r}", file=err)


def _cmd_run(args: argparse.Namespace) -> int:
    """Run PROMPT through the kernel built from CONFIG, streaming the answer to stdout
    (tool calls are shown on stderr). --json prints the whole TurnResult instead, with
    the final answer in "text"; on failure it prints {"error": {...}}."""
    # a prompt piped in ends with the newline of its last line: not part of the prompt
    prompt = sys.stdin.read().removesuffix("\n").removesuffix("\r") if args.prompt == "-" else args.prompt
    built = _build(args, sys.stderr)
    kernel = built.runner()  # the kernel, or e.g. its durable runner ([durable])
    conversation_id = args.conversation_id
    if conversation_id is None and _has_memory(built):
        # without an id the memory filter has nothing to key the history by
        conversation_id = uuid.uuid4().hex
        print(
            f"conversation: {conversation_id} (new; continue it with --conversation-id {conversation_id})",
            file=sys.stderr,
        )
    context = {"conversation_id": conversation_id} if conversation_id else None
    if args.json:
        from ._serde import converter

        result = asyncio.run(_closing(kernel, kernel.run(prompt, context=context)))
        data = {"text": result.text, **converter.unstructure(result)}
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        result = asyncio.run(_closing(kernel, _stream(kernel, prompt, context, sys.stdout, sys.stderr)))
    _report_status(result, sys.stderr)
    return OK


_CHAT_COMMANDS = {"/exit": "end the conversation (also /quit, Ctrl-D)", "/help": "list these commands"}


def _cmd_chat(args: argparse.Namespace) -> int:
    """An interactive conversation with the kernel built from CONFIG. Each turn runs with
    context {"conversation_id": ID}, so a memory filter keeps the history; without one the
    history is kept in this process. Lines starting with / are commands (/help), never
    sent to the model. End with Ctrl-D or /exit. Through a pipe, stdout holds the answers
    only, one a line: no prompts."""
    built = _build(args, sys.stderr)
    has_memory = _has_memory(built)
    conversation_id = args.conversation_id or uuid.uuid4().hex
    print(f"conversation: {conversation_id}", file=sys.stderr)
    if not has_memory:
        print("(no memory filter: the history lives in this process only)", file=sys.stderr)
    _memory_warning(built, sys.stderr)
    runner = built.runner()  # the kernel, or e.g. its durable runner ([durable])
    interactive = sys.stdin.isatty()
    asyncio.run(
        _closing(runner, _chat_loop(runner, conversation_id, keep_history=not has_memory, interactive=interactive))
    )
    return OK


def _read_line(prompt: str) -> str:
    """One line from stdin; on a terminal with a prompt and line editing (arrows, history),
    through a pipe without a prompt (stdout holds the answers only)."""
    if sys.stdin.isatty():
        with contextlib.suppress(ImportError):  # Windows has no readline
            import readline  # noqa: F401  # importing it gives input() line editing
        try:
            return input(prompt) + "\n"
        except EOFError:
            return ""
    return sys.stdin.readline()


async def _chat_loop(kernel: Kernel, conversation_id: str, *, keep_history: bool, interactive: bool = True) -> None:
    from ._messages import Message

    history: tuple[Message, ...] = ()
    context = {"conversation_id": conversation_id}
    while True:
        line = await asyncio.to_thread(_read_line, "you> ")
        if not line:  # EOF
            if interactive:
                print()  # end the prompt's line
            return
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            command = text.split()[0]
            if command in ("/exit", "/quit"):
                return
            if command != "/help":
                print(f"unknown command {command}; it was not sent to the model.", file=sys.stderr)
            for name, meaning in _CHAT_COMMANDS.items():
                print(f"  {name:<6} {meaning}", file=sys.stderr)
            continue
        entry = (*history, Message("user", text)) if keep_history else text
        if interactive:
            print("assistant> ", end="", flush=True)
        result = await _stream(kernel, entry, context, sys.stdout, sys.stderr)
        _report_status(result, sys.stderr)
        if keep_history:
            history = result.messages


async def _closing(kernel: Kernel, work: Awaitable[T]) -> T:
    """Await ``work``, then close the kernel while the loop still runs (its connections
    belong to this event loop)."""
    try:
        return await work
    finally:
        await kernel.aclose()


# -- new ------------------------------------------------------------------------------


def _cmd_new(args: argparse.Namespace) -> int:
    """Create a new project from a template: `beamfilter new plugin NAME` writes a plugin
    package (pyproject with the entry point, filter module, README, tests on the shipped
    pytest fixtures, a CI workflow) whose tests, mypy --strict and ruff pass as generated."""
    from ._scaffold import run_new_plugin

    return run_new_plugin(args)


# -- demo -------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    """Run the README's demo (see ``beamfilter demo --help`` for its options)."""
    try:
        demo = importlib.import_module(f"{__package__}._demo")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}._demo":
            raise
        missing = "the demo is not part of this installation of beamfilter-core."
        if {"-h", "--help"} & set(args.args):
            print(f"usage: beamfilter demo [ARGS ...]\n\n{_cmd_demo.__doc__}\n{missing}")
            return OK
        print(f"beamfilter demo: {missing}", file=sys.stderr)
        return RUN_ERROR
    try:
        return int(demo.run_demo(list(args.args)) or 0)
    except SystemExit as exc:  # the demo's own --help or usage error
        return exc.code if isinstance(exc.code, int) else USAGE_ERROR
