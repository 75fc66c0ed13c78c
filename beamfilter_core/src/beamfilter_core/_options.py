"""Options: a spec's JSON schema is their one source of truth.

A factory's options are described once, by the JSON schema of its spec. The same
schema checks them on both roads into the factory:

- from a config file, :func:`check_options` reports every problem of a table at once,
  each with its config path (``filters[2].max_retries: must be >= 0, got -1``), then the
  factory is called with the validated data;
- from Python, :func:`options_schema` decorates the factory so that a call such as
  ``tool_retry_filter(max_retries=-1)`` fails with
  ``tool_retry_filter(max_retries=-1) is invalid; give an integer >= 0.``

So a factory never re-checks what its schema says. A property of the schema may carry
``"x-hint"``, the fix a Python caller is told (``"a list of tool names, e.g. ['search']"``);
without it the hint is derived from the schema (``an integer >= 0``, ``one of 'a', 'b'``).
``"x-style": "colon"`` on an option writes its message ``f(x=1): give ...``, for options
shared with a family of filters that words its messages so. ``"x-parsed-by": "ToolPolicy"``
marks an option that a public class parses (and checks, for its own Python callers): the
schema checks it in config, the parser in Python.
``"x-secret": true`` marks an option whose value is never shown in a message (a key).
JSON has no ``nan`` or ``inf`` but TOML and Python have, and a schema's bounds let them
through (``nan <= 0`` is false): on both roads a number must be finite (and an integer
too large for a float is refused where the schema asks for a ``"number"``); a float is
refused where the schema asks for an ``"integer"`` (JSON schema takes ``5.0`` as one).
Checks a schema cannot express (a regular expression that compiles, a file that exists,
two options that exclude each other) stay in the factory.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar

from .errors import ConfigError

if TYPE_CHECKING:  # fastjsonschema is imported on first use: `import beamfilter_core` stays lean
    import fastjsonschema

    from ._registry import Registered

__all__ = ["Style", "check_options", "declared_schema", "options_schema", "unwrap_factory"]

P = ParamSpec("P")
R = TypeVar("R")

#: How a Python caller's mistake is written: ``f(x=1) is invalid; give ...`` or ``f(x=1): give ...``.
Style = Literal["is invalid", "colon"]

#: Stands for a ``$env`` value that could not be resolved (already reported).
UNRESOLVED: Any = type("Unresolved", (), {"__repr__": lambda self: "<unresolved $env>"})()

_ATTRIBUTE = "__beamfilter_options__"
_VALIDATORS: dict[int, tuple[Mapping[str, Any], dict[str, Callable[[Any], Any]]]] = {}


def option_validators(schema: Mapping[str, Any]) -> dict[str, Callable[[Any], Any]]:
    """One compiled validator per declared option of a schema (compiled once, cached):
    fastjsonschema stops at the first error, so each option is checked on its own to
    report every bad value of a table at once."""
    cached = _VALIDATORS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    import fastjsonschema

    validators: dict[str, Callable[[Any], Any]] = {}
    for key, subschema in schema.get("properties", {}).items():
        wrapper = {"type": "object", "properties": {key: subschema}}
        if "$defs" in schema:
            wrapper["$defs"] = schema["$defs"]
        try:
            validators[key] = fastjsonschema.compile(wrapper)
        except fastjsonschema.JsonSchemaDefinitionException:
            continue  # the whole-schema validator still checks this option
    _VALIDATORS[id(schema)] = (schema, validators)
    return validators


# -- Python callers ------------------------------------------------------------------------


def _is_data(value: Any) -> bool:
    """Whether ``value`` is plain data a JSON schema speaks of (a function or an object given
    in Python is the factory's to resolve)."""
    if value is None or isinstance(value, str | bool | int | float):
        return True
    if isinstance(value, list | tuple):
        return all(_is_data(item) for item in value)
    if isinstance(value, Mapping):
        return all(isinstance(key, str) and _is_data(item) for key, item in value.items())
    return False


def _plain(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def hint(schema: Mapping[str, Any]) -> str:
    """What to give for a value of ``schema``: its ``x-hint``, or words derived from it."""
    given = schema.get("x-hint")
    if isinstance(given, str):
        return given
    if "enum" in schema:
        return "one of " + ", ".join(repr(choice) for choice in schema["enum"])
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    nullable = " or None" if "null" in kinds else ""
    if "integer" in kinds or "number" in kinds:
        noun = "an integer" if "integer" in kinds else "a number"
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None:
            return f"{noun} from {_number(low)} to {_number(high)}{nullable}"
        if low is not None:
            return f"{noun} >= {_number(low)}{nullable}"
        if schema.get("exclusiveMinimum") is not None:
            return f"{noun} > {_number(schema['exclusiveMinimum'])}{nullable}"
        return noun + nullable
    if "boolean" in kinds:
        return "true or false"
    if "string" in kinds:
        return ("a non-empty string" if schema.get("minLength") else "a string") + nullable
    if "array" in kinds:
        items = schema.get("items", {})
        of = " of strings" if isinstance(items, Mapping) and items.get("type") == "string" else ""
        return ("a non-empty list" if schema.get("minItems") else "a list") + of + nullable
    if "object" in kinds or "properties" in schema:
        required = schema.get("required")
        return "a mapping" + (f" with {', '.join(required)}" if required else "") + nullable
    return "a value its schema accepts"


def _index(part: Any) -> Any:
    """fastjsonschema names a list index as a string ('0'): give it back as an int."""
    return int(part) if isinstance(part, str) and part.isascii() and part.isdigit() else part


def _steps(schema: Mapping[str, Any], value: Any, path: list[Any]) -> list[tuple[str, Mapping[str, Any], Any, bool]]:
    """``(where, subschema, value, in_list)`` at each step of ``path`` (an option, then keys
    and indexes)."""
    where = str(path[0])
    steps = [(where, schema, value, False)]
    for part in path[1:]:
        if isinstance(value, Mapping) and part in value:
            inner = schema.get("properties", {}).get(part, schema.get("additionalProperties"))
            in_list = False
        elif isinstance(value, list | tuple) and isinstance(_index(part), int) and 0 <= _index(part) < len(value):
            part = _index(part)
            inner = schema.get("items")
            in_list = True
        else:
            break
        schema = inner if isinstance(inner, Mapping) else {}
        value = value[part]
        where += f"[{part!r}]"
        steps.append((where, schema, value, in_list))
    return steps


def _call_problem(
    owner: str,
    style: Style,
    option_schema: Mapping[str, Any],
    value: Any,
    path: list[Any],
    failed: Any,
    *,
    none_ok: bool = False,
) -> str:
    """The message for a Python caller, at the deepest place on the way to the failure whose
    schema gives an ``x-hint`` (else where the schema failed): ``owner(where=value) is
    invalid; give HINT.``, or ``owner: where[i] is value; give HINT.`` for an item of a list."""
    steps = _steps(option_schema, value, path)
    hinted = [step for step in steps if "x-hint" in step[1]]
    where, schema, shown, in_list = hinted[-1] if hinted else steps[-1]
    if not hinted and len(steps) == len(path) and isinstance(failed, Mapping):
        schema = failed  # the branch of an anyOf / oneOf that failed, when there is one
    words = hint(schema)
    if _non_finite(steps[-1][2]) and "x-hint" not in schema:
        words = _finite(words) if "number" in _kinds(schema) else "a finite number"
    if none_ok and len(steps) == 1 and "x-hint" not in schema and not words.endswith(" or None"):
        words += " or None"  # the Python parameter takes None too
    text = "..." if option_schema.get("x-secret") else shown_value(shown)  # a key is never shown
    if in_list:
        return f"{owner}: {where} is {text}; give {words}."
    separator = ":" if option_schema.get("x-style", style) == "colon" else " is invalid;"
    return f"{owner}({where}={text}){separator} give {words}."


def _kinds(schema: Mapping[str, Any]) -> list[Any]:
    kinds = schema.get("type")
    return kinds if isinstance(kinds, list) else [kinds]


def _fits_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def bad_number(schema: Mapping[str, Any], value: Any, path: list[Any]) -> list[Any] | None:
    """The path to the first number a schema's checks let through that JSON has not, or None:
    ``nan`` or ``inf`` anywhere (``nan <= 0`` is false, so no bound refuses it), an integer
    too large for a float where the schema asks for a ``"number"``, or a float where it
    asks for an ``"integer"`` (JSON schema takes 5.0 as one; the factory gets ints)."""
    if isinstance(value, float):
        kinds = _kinds(schema)
        return path if not math.isfinite(value) or ("integer" in kinds and "number" not in kinds) else None
    if isinstance(value, int) and not isinstance(value, bool):
        kinds = _kinds(schema)
        return path if "number" in kinds and "integer" not in kinds and not _fits_float(value) else None
    if isinstance(value, Mapping):
        properties, rest = schema.get("properties", {}), schema.get("additionalProperties")
        pairs: list[tuple[Any, Any, Any]] = [(key, item, properties.get(key, rest)) for key, item in value.items()]
    elif isinstance(value, list | tuple):
        pairs = [(position, item, schema.get("items")) for position, item in enumerate(value)]
    else:
        return None
    for part, item, inner in pairs:
        found = bad_number(inner if isinstance(inner, Mapping) else {}, item, [*path, part])
        if found is not None:
            return found
    return None


def _non_finite(value: Any) -> bool:
    """Whether ``value`` is a number no float can hold as a finite value (nan, inf, 10**400)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and not _fits_float(value)


def shown_value(value: Any) -> str:
    """``repr(value)``, but an integer past a float's range by its size (Python refuses to
    print one of more than 4300 digits)."""
    if isinstance(value, int) and value.bit_length() > 1024:
        return f"<an integer of {value.bit_length()} bits>"
    return repr(value)


def _finite(words: str) -> str:
    """``a number > 0`` as ``a finite number > 0`` (the words of a non-finite value's problem)."""
    return words.replace("a number", "a finite number", 1) if words.startswith("a number") else words


class _CallChecker:
    """Checks the options a Python caller passes against the factory's schema."""

    def __init__(self, schema: Mapping[str, Any], owner: str, style: Style, signature: inspect.Signature) -> None:
        self.schema = schema
        self.owner = owner
        self.style = style
        # None means "off" for an option whose Python type allows it, whatever its schema says
        self.none_ok = {
            name
            for name, param in signature.parameters.items()
            if param.default is None or "None" in str(param.annotation) or "Optional" in str(param.annotation)
        }

    def check(self, given: Mapping[str, Any]) -> None:
        properties = self.schema.get("properties", {})
        if not any(key in properties for key in given):
            return  # nothing to check: no schema is compiled (``Kernel(model)`` stays cheap)
        import fastjsonschema

        validators = option_validators(self.schema)
        problems: list[str] = []
        for key, value in given.items():
            check, option = validators.get(key), properties.get(key, {})
            if check is None or "x-parsed-by" in option or not _is_data(value):
                continue  # not declared, read by a public parser, or a Python object the factory resolves
            if value is None and key in self.none_ok:
                continue
            try:
                check({key: _plain(value)})
            except fastjsonschema.JsonSchemaValueException as exc:
                path = list(exc.path or ["data", key])[1:]  # list indexes come as strings
                problems.append(
                    _call_problem(
                        self.owner, self.style, option, value, path, exc.definition, none_ok=key in self.none_ok
                    )
                )
                continue
            bad = bad_number(option, value, [key])
            if bad is not None:
                problems.append(
                    _call_problem(self.owner, self.style, option, value, bad, None, none_ok=key in self.none_ok)
                )
        if problems:
            raise ConfigError("\n".join(problems), problems)


def options_schema(
    schema: Mapping[str, Any], *, owner: str | None = None, style: Style = "is invalid"
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Declare a factory's options schema, so that Python calls are checked against it.

    The spec given this factory takes the same schema (pass it, or leave
    ``options_schema`` out of the spec); a config's options are checked by the core before
    the factory runs and are not checked twice. ``owner`` names the factory in messages
    (default: its ``__name__``); ``style`` is how they are written.

    Example::

        OPTIONS = {"type": "object", "properties": {"times": {"type": "integer", "minimum": 1}}}

        @options_schema(OPTIONS)
        def echo_filter(*, times: int = 1) -> Filter: ...

        SPEC = FilterSpec("echo", echo_filter, OPTIONS)   # echo_filter(times=0) raises ConfigError
    """

    def decorate(factory: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(factory)
        checker = _CallChecker(schema, owner or factory.__name__, style, signature)

        @functools.wraps(factory)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            checker.check(signature.bind_partial(*args, **kwargs).arguments if args else kwargs)
            return factory(*args, **kwargs)

        setattr(checked, _ATTRIBUTE, schema)
        return checked

    return decorate


def declared_schema(factory: Any) -> Mapping[str, Any] | None:
    """The schema a factory declared with :func:`options_schema`, or None."""
    schema = getattr(factory, _ATTRIBUTE, None)
    return schema if isinstance(schema, Mapping) else None


def unwrap_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
    """The factory behind :func:`options_schema` (what the core calls with validated data)."""
    return getattr(factory, "__wrapped__", factory) if declared_schema(factory) is not None else factory


# -- config tables ---------------------------------------------------------------------------


def has_unresolved(value: Any) -> bool:
    """Whether a ``$env`` value that could not be resolved is inside ``value``."""
    if value is UNRESOLVED:
        return True
    if isinstance(value, Mapping):
        return any(has_unresolved(v) for v in value.values())
    if isinstance(value, list):
        return any(has_unresolved(v) for v in value)
    return False


def schema_problem(exc: fastjsonschema.JsonSchemaValueException, where: str) -> str:
    """A schema failure as a config problem: ``filters[0].max_retries: must be >= 0, got -1``."""
    name = exc.name or "data"
    path = where + name[len("data") :]
    rule, limit, value = exc.rule, exc.rule_definition, exc.value
    words = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if isinstance(exc.definition, Mapping) and exc.definition.get("x-secret"):
        text = f"must be {hint(exc.definition)} (the value given is not shown)"
    elif rule in words:
        text = f"must be {words[rule]} {limit}, got {shown_value(value)}"
    elif rule == "type":
        text = f"must be of type {limit}, got {shown_value(value)}"
    elif rule == "enum":
        text = f"must be one of {', '.join(map(repr, limit))}, got {shown_value(value)}"
    elif rule == "additionalProperties" and isinstance(value, Mapping) and isinstance(exc.definition, Mapping):
        return _unknown_key(path, value, exc.definition)
    elif rule == "required" and isinstance(value, Mapping) and isinstance(limit, list):
        missing = [key for key in limit if key not in value]
        text = f"missing key {', '.join(map(repr, missing))}" if missing else (exc.message or str(exc))
    else:
        text = (exc.message or "")[len(name) :].strip() or str(exc)
    return f"{path}: {text}"


def _number_problem(schema: Mapping[str, Any], value: Any, path: list[Any], where: str) -> str:
    """A number :func:`bad_number` found, as a config problem:
    ``kernel.tool_timeout: must be a finite number > 0, got nan``."""
    place = where + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
    inner, bad = _steps(schema, value, path)[-1][1:3]
    if not _non_finite(bad):  # a float where the schema asks for an integer
        return f"{place}: must be of type integer, got {bad!r}"
    kinds = _kinds(inner)
    derived = hint({key: item for key, item in inner.items() if key != "x-hint"})
    words = _finite(derived).removesuffix(" or None") if "number" in kinds else "a finite number"
    return f"{place}: must be {words}, got {shown_value(bad)}"


def _unknown_key(path: str, value: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """A key a nested table does not take, as the top level says it: ``rules[0].root:
    unknown key 'root'. Did you mean 'roots'? Known keys: ...``."""
    from ._registry import suggest

    known = sorted(schema.get("properties", {}))
    extra = [key for key in value if key not in known]
    key = str(extra[0]) if extra else "?"
    listing = f" Known keys: {', '.join(known)}." if known else " It takes no keys."
    return f"{path}.{key}: unknown key {key!r}.{suggest(key, known)}{listing}"


def _alternatives_problem(schema: Mapping[str, Any], options: Mapping[str, Any]) -> str | None:
    """What is wrong with a table whose schema asks for one of several options, or None.

    A schema says so at its top level with ``"anyOf"`` (at least one) or ``"oneOf"``
    (exactly one) of branches that each require one option, e.g.
    ``"oneOf": [{"required": ["command"]}, {"required": ["url"]}]``; its ``"x-hint"``
    says what to give.
    """
    for rule, amount in (("anyOf", "at least one"), ("oneOf", "one")):
        branches = schema.get(rule)
        if not isinstance(branches, list) or not branches:
            continue
        names = [b["required"][0] for b in branches if isinstance(b, Mapping) and len(b.get("required", ())) == 1]
        if len(names) != len(branches):
            continue  # other branches: the schema's own message is the best there is
        listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        given = [name for name in names if name in options]
        if not given:
            advice = f" Give {schema['x-hint']}." if isinstance(schema.get("x-hint"), str) else ""
            return f"needs {amount} of the options {listed}; none is given.{advice}"
        if rule == "oneOf" and len(given) > 1:
            return f"takes only one of the options {listed}; {' and '.join(given)} are given: keep one."
    return None


def accepted_options(factory: Callable[..., Any]) -> set[str] | None:
    """The keyword options a factory accepts, or None when it takes ``**kwargs``."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"build"}


def wants_build(factory: Callable[..., Any]) -> bool:
    """Whether a factory takes the :class:`BuildContext` as its ``build`` keyword."""
    try:
        param = inspect.signature(factory).parameters.get("build")
    except (TypeError, ValueError):
        return False
    return param is not None and param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)


def check_options(item: Registered[Any], kind: str, options: dict[str, Any], where: str, problems: list[str]) -> Any:
    """Validate a config table against the spec's ``options_schema`` (every problem is
    appended to ``problems`` with its path); the validated options, or None after a problem.
    With ``options_type`` the validated data is structured into that attrs class."""
    import fastjsonschema

    from ._registry import suggest

    spec, qualified = item.spec, item.qualified
    if has_unresolved(options):
        return None  # the missing variable is reported already
    schema = spec.options_schema
    known = schema.get("properties", {})
    start = len(problems)
    closed = schema.get("additionalProperties") is False
    accepted = None if closed or spec.options_type is not None else accepted_options(spec.factory)
    allowed = set(known) if closed else accepted
    if allowed is not None:
        for key in options:
            if key not in allowed:
                listing = f" Known options: {', '.join(sorted(allowed))}." if allowed else " It takes no options."
                problems.append(
                    f"{where}.{key}: unknown option for the {kind} {qualified!r}.{suggest(key, allowed)}{listing}"
                )
    for key in schema.get("required", ()):
        if key not in options:
            problems.append(f"{where}.{key}: required option of the {kind} {qualified!r} is missing.")
    alternatives = _alternatives_problem(schema, options)
    if alternatives is not None:
        problems.append(f"{where}: the {kind} {qualified!r} {alternatives}")
    per_option = option_validators(schema)
    for key, value in options.items():
        if allowed is not None and key not in allowed:
            continue  # reported above
        check = per_option.get(key)
        try:
            if check is not None:
                check({key: copy.deepcopy(value)})
        except fastjsonschema.JsonSchemaValueException as exc:
            problems.append(schema_problem(exc, where))
            continue
        option = known.get(key)
        option = option if isinstance(option, Mapping) else {}
        bad = bad_number(option, value, [key])
        if bad is not None:
            problems.append(_number_problem(option, value, bad, where))
    if len(problems) > start:
        return None
    try:
        validated = item.validator(copy.deepcopy(options))
    except fastjsonschema.JsonSchemaValueException as exc:
        problems.append(schema_problem(exc, where))
        return None
    if spec.options_type is None:
        return validated
    return _structure(validated, spec.options_type, where, problems)


def _structure(validated: Any, options_type: type, where: str, problems: list[str]) -> Any:
    import cattrs

    from ._serde import converter

    try:
        return converter.structure(validated, options_type)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        if isinstance(exc, cattrs.BaseValidationError):
            for line in cattrs.transform_error(exc, path=where):
                text, _, at = line.rpartition(" @ ")
                problems.append(f"{at}: {text}")
        else:
            problems.append(f"{where}: {exc}")
        return None
