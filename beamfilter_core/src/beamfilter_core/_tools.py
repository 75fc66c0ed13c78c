"""Tools: declarations the model can call, built from Python functions by :func:`tool`,
and the threads that run the synchronous ones."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import re
import threading
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import attrs

from ._lazy import lazy_module
from .errors import ToolDefinitionError

if TYPE_CHECKING:
    import asyncio
else:
    # asyncio is the one heavy module beamfilter_core can import late (see bench/RESULTS.md)
    asyncio = lazy_module("asyncio", globals())

F = TypeVar("F", bound=Callable[..., Any])

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _compile_validator(name: str, schema: Mapping[str, Any]) -> Callable[[Any], Any]:
    import fastjsonschema

    try:
        validator: Callable[[Any], Any] = fastjsonschema.compile(dict(schema))
        return validator
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        msg = f"Tool {name!r} has an invalid parameters schema: {exc}. Fix the schema."
        raise ToolDefinitionError(msg) from exc


def _check_timeout(name: str, timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < float("inf"):
        msg = f"Tool {name!r} has timeout={timeout!r}; give a positive number of seconds or None."
        raise ToolDefinitionError(msg)
    return float(timeout)


@attrs.frozen(slots=True, eq=False)
class Tool:
    """A callable the model may ask for, with its JSON-schema parameters.

    Build one with :func:`tool`; ``Tool.declaration`` builds one that only describes a
    tool (for schemas restored from JSON) and fails if run.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[..., Any] | None = attrs.field(default=None, repr=False)
    sensitive: bool = False
    serial: bool = False
    timeout: float | None = None
    return_direct: bool = False
    is_async: bool = attrs.field(default=False, repr=False)
    takes_context: bool = attrs.field(default=False, repr=False)
    validate: Callable[[Any], Any] | None = attrs.field(default=None, repr=False)
    #: The folder where the tool resolves a relative path (an MCP server's working folder);
    #: ``""`` when nobody here knows it (a remote server); None when the tool does not say.
    workdir: str | None = None

    @classmethod
    def declaration(cls, name: str, description: str, parameters: Mapping[str, Any]) -> Tool:
        """A tool that is only described (no function to run)."""
        return cls(name, description, parameters)

    @property
    def definition(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


def _schema_for(annotation: Any, where: str) -> dict[str, Any]:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if annotation is type(None):
        return {"type": "null"}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema_for(arg, where) for arg in args]}
    # typing.Sequence[int] and Mapping[...] have the collections.abc classes as origin
    if annotation in (list, tuple, Sequence) or origin in (list, tuple, Sequence):
        item = args[0] if args else Any
        return {"type": "array", "items": _schema_for(item, where)}
    if annotation in (dict, Mapping) or origin in (dict, Mapping):
        return {"type": "object"}
    msg = (
        f"Cannot derive a JSON schema for {where} annotated {annotation!r}; "
        "use str, int, float, bool, Literal, list, dict or a union of them, "
        "or pass parameters= explicitly."
    )
    raise ToolDefinitionError(msg)


def _resolve(annotation: str, fn: Callable[..., Any], where: str) -> Any:
    namespace = {**vars(typing), **getattr(fn, "__globals__", {})}
    try:
        return eval(annotation, namespace)  # a type annotation of the user's own function
    except Exception as exc:
        msg = f"Cannot resolve the annotation {annotation!r} of {where}: {exc}. Import the type at module level."
        raise ToolDefinitionError(msg) from exc


def _signature_schema(fn: Callable[..., Any], name: str) -> tuple[dict[str, Any], bool]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001  # e.g. a name imported inside a function: resolve one by one
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    takes_context = False
    for param in inspect.signature(fn).parameters.values():
        if param.name == "context":
            takes_context = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            msg = f"Tool {name!r} takes *{param.name}; tools need named parameters only."
            raise ToolDefinitionError(msg)
        annotation = hints.get(param.name, param.annotation)
        if isinstance(annotation, str):
            annotation = _resolve(annotation, fn, f"parameter {param.name!r} of tool {name!r}")
        properties[param.name] = _schema_for(annotation, f"parameter {param.name!r} of tool {name!r}")
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema, takes_context


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    sensitive: bool = False,
    serial: bool = False,
    timeout: float | None = None,
    return_direct: bool = False,
) -> Tool:
    """Build a :class:`Tool` from ``fn`` (see :func:`tool`)."""
    if not callable(fn):
        msg = f"Cannot make a tool from {fn!r}: it is not callable."
        raise ToolDefinitionError(msg)
    tool_name: str = name or str(getattr(fn, "__name__", ""))
    if not _NAME.match(tool_name):
        msg = f"Tool name {tool_name!r} is invalid; use 1-64 letters, digits, '_' or '-'."
        raise ToolDefinitionError(msg)
    doc = inspect.getdoc(fn) or ""
    text = description if description is not None else doc.split("\n\n", 1)[0].strip()
    schema, takes_context = _signature_schema(fn, tool_name)
    if parameters is not None:
        schema = dict(parameters)
    return Tool(
        tool_name,
        text,
        schema,
        fn,
        sensitive=sensitive,
        serial=serial,
        timeout=_check_timeout(tool_name, timeout),
        return_direct=return_direct,
        is_async=inspect.iscoroutinefunction(fn),
        takes_context=takes_context,
        validate=_compile_validator(tool_name, schema),
    )


@overload
def tool(fn: F, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    sensitive: bool = False,
    serial: bool = False,
    timeout: float | None = None,
    return_direct: bool = False,
) -> Callable[[F], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    sensitive: bool = False,
    serial: bool = False,
    timeout: float | None = None,
    return_direct: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function (sync or async) into a :class:`Tool`.

    The JSON schema comes from the type hints, the description from the docstring's
    first paragraph. A parameter named ``context`` receives the run's read-only context
    and is not shown to the model.

    Example::

        @tool
        def add(a: int, b: int) -> int:
            \"\"\"Add two integers.\"\"\"
            return a + b

        @tool(sensitive=True, timeout=5)
        async def delete_file(path: str) -> str: ...
    """
    options = {
        "name": name,
        "description": description,
        "parameters": parameters,
        "sensitive": sensitive,
        "serial": serial,
        "timeout": timeout,
        "return_direct": return_direct,
    }
    if fn is not None:
        return make_tool(fn, **options)  # type: ignore[arg-type]

    def decorate(func: Callable[..., Any]) -> Tool:
        return make_tool(func, **options)  # type: ignore[arg-type]

    return decorate


# -- running sync tools -----------------------------------------------------------------

#: At most this many sync tool calls run at once in the process; a call beyond it fails
#: fast (transient) instead of queueing behind tools that may hang.
SYNC_TOOL_THREADS = 32


class _SyncCalls:
    """Counts sync tool calls whose thread has not returned (a timed-out call still counts)."""

    busy = 0
    _lock: threading.Lock | None = None

    @classmethod
    def lock(cls) -> threading.Lock:
        if cls._lock is None:
            cls._lock = threading.Lock()
        return cls._lock


def _settle(future: asyncio.Future[Any], ok: bool, outcome: Any) -> None:
    if future.cancelled():  # the caller timed out or was cancelled
        return
    if ok:
        future.set_result(outcome)
    else:
        future.set_exception(outcome)


def _work(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    context: contextvars.Context,
    fn: Callable[..., Any],
    arguments: Mapping[str, Any],
) -> None:
    """The body of a tool thread: run ``fn``, hand the outcome to the loop."""
    ok, outcome = True, None
    try:
        outcome = context.run(fn, **arguments)
    except BaseException as exc:  # noqa: BLE001  # handed to the awaiting task, which decides
        ok, outcome = False, exc
    finally:
        with _SyncCalls.lock():
            _SyncCalls.busy -= 1
    # RuntimeError: the loop has closed, nobody waits for this result any more
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, future, ok, outcome)
    # The tool's frames (in the exception's traceback) point back to this one: without
    # these references there is no cycle, so what a failed tool opened (a socket) is
    # freed at once, not at the next garbage collection.
    del future, outcome


async def _outcome(future: asyncio.Future[Any]) -> Any:
    try:
        return await future
    finally:
        del future  # the same cycle, through the awaiting frame


def start_sync_call(fn: Callable[..., Any], arguments: Mapping[str, Any]) -> Awaitable[Any] | None:
    """Run ``fn(**arguments)`` on a thread of its own; None when :data:`SYNC_TOOL_THREADS` are busy.

    Sync tools never use the event loop's default executor: a tool that hangs would
    otherwise starve everything else queued there (DNS lookups of model calls, other
    kernels' tools). The threads are daemons, so a hung tool cannot block the exit.
    """
    with _SyncCalls.lock():
        if _SyncCalls.busy >= SYNC_TOOL_THREADS:
            return None
        _SyncCalls.busy += 1
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    args = (loop, future, contextvars.copy_context(), fn, arguments)
    name = getattr(fn, "__name__", "tool")
    try:
        threading.Thread(target=_work, args=args, name=f"beamfilter-tool-{name}", daemon=True).start()
    except BaseException:
        with _SyncCalls.lock():
            _SyncCalls.busy -= 1
        raise
    return _outcome(future)


def busy_message(name: str) -> str:
    """The transient failure of a sync call refused because every tool thread is busy."""
    return (
        f"Tool {name!r} was not run: all {SYNC_TOOL_THREADS} threads for sync tools are busy "
        "(tools that hang past their timeout keep theirs); try again later."
    )
