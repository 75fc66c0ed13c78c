"""Shell commands as bash reads them: every simple command in the tree, its words expanded.

tree-sitter-bash parses the command; :func:`parse_script` walks the whole tree —
lists, pipelines, subshells, groups, functions, loops, ``case``, command and process
substitutions, here-documents — and returns each simple command with its words
expanded the way bash would before running it, as far as that can be known without
running anything: quotes and backslashes removed, ANSI-C strings (``$'\\x72m'``)
decoded, brace expansion (``{rm,-rf,/}``, ``{1..3}``) done, ``$HOME``/``${HOME}``
written as ``~``. A word that depends on run time (another variable, a command or
arithmetic substitution) is :class:`Opaque`. Globs stay as written.
"""

from __future__ import annotations

import re

import attrs
import tree_sitter
import tree_sitter_bash

from ._shell_words import LOCAL as _LOCAL
from ._shell_words import Opaque, Word, expand, expand_parts, leaving_glob
from ._shell_words import node_text as _text

__all__ = ["Opaque", "Redirect", "Script", "SimpleCommand", "Word", "expand", "expand_parts", "parse_script"]

_LANGUAGE = tree_sitter.Language(tree_sitter_bash.language())
MAX_LENGTH = 32_768
#: Blanks and shell metacharacters (counted before parsing: the parser's cost grows with
#: them), then syntax nodes plus :data:`COMMAND_COST` per simple command (the checks' cost
#: grows with them, in nested code too), past which a command is unreadable: a decision
#: must take milliseconds, whatever the command.
MAX_SEPARATORS = 3000
MAX_NODES = 800
COMMAND_COST = 8
MAX_NESTING = 64  # groups, substitutions, loops inside each other


#: Redirection operators that write to their target.
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


@attrs.frozen
class Redirect:
    """One redirection: its operator (``>``, ``>>``, ``<``, ``&>`` ...), target, and the
    descriptor it names (``3`` in ``3< file``; None for the default one)."""

    operator: str
    target: Word
    descriptor: str | None = attrs.field(default=None, eq=False)

    @property
    def writes(self) -> bool:
        return self.operator in _WRITES


@attrs.frozen
class SimpleCommand:
    """A simple command: ``argv`` (empty for ``FOO=bar`` or a redirected group), the
    assignments before it, its redirections, and where its standard input comes from
    when that is data rather than a terminal or file (``"a pipe"``, ``"a here-document"``)."""

    argv: tuple[Word, ...]
    assignments: tuple[tuple[str, Word], ...] = ()
    redirects: tuple[Redirect, ...] = ()
    stdin: str | None = None
    function: str | None = None  # the function whose body holds this command


@attrs.frozen
class Script:
    """The simple commands of a command line, the functions it defines, or why it is unreadable.

    ``constructs`` names what makes it more than plain simple commands joined by ``;``,
    ``&&``, ``||`` and ``|`` (a group, a loop, a substitution, an expansion, a here-document,
    a glob that may leave the working directory): ``allow_commands`` refuses those.
    ``hidden`` lists code bash would run that no command of ``commands`` shows (a ``$(...)``
    in a quoted array subscript that ``[[ -v ]]`` evaluates).
    """

    commands: tuple[SimpleCommand, ...]
    functions: frozenset[str] = frozenset()
    error: str | None = None
    constructs: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    #: Each construct of ``constructs`` that is a glob leaving the working directory, and the
    #: glob as written (``/srv/*``): a tool's path rules may find it inside their roots.
    globs: tuple[tuple[str, str], ...] = ()


class _Unreadable(Exception):
    pass


def _parser() -> tree_sitter.Parser:
    parser: tree_sitter.Parser | None = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = tree_sitter.Parser(_LANGUAGE)
    return parser


def _ascii_shadow(source: bytes) -> bytes:
    """``source`` with each byte of every non-ASCII character replaced by ``a``.

    tree-sitter-bash's scanner corrupts memory (and crashes the process) on some non-ASCII
    input, e.g. ``{`` followed by a character outside the BMP, so it only ever sees ASCII.
    Byte offsets stay the same and the text of every node is read from the real source;
    to bash a non-ASCII character is a word character, like ``a``.
    """
    return source if source.isascii() else _NON_ASCII.sub(lambda found: b"a" * len(found.group()), source)


_NON_ASCII = re.compile(rb"[\x80-\xff]+")
# a backslash that starts a line (after an unescaped newline): tree-sitter-bash glues the
# newline into the word (ls<newline>\rm -rf / became one command, ls with three arguments)
_LINE_START_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\n[ \t]*\\(.)", re.S)


def _line_start_escapes(shadow: bytes) -> bytes:
    """``shadow`` with each backslash that starts a line made harmless for the parser, same length.

    Before a word character the backslash becomes ``a`` (``\\rm`` parses as a word; its text is
    read from the real source); before anything else the newline becomes ``;`` (``ls;\\rm``
    parses right; where bash forbids a ``;``, after ``then`` or ``|``, the command is refused
    as unparseable).
    """
    if b"\n" not in shadow or b"\\" not in shadow:
        return shadow
    out = bytearray(shadow)
    for found in _LINE_START_ESCAPE.finditer(shadow):
        slash = found.start(1) - 1
        if found.group(1).isalnum() or found.group(1) == b"_":
            out[slash] = ord("a")
        else:
            out[shadow.rindex(b"\n", 0, slash)] = ord(";")
    return bytes(out)


_SEPARATORS = b" \t\n;|&()<>$`\"'{}[]*?\\,"
_NOT_SEPARATORS = bytes(b for b in range(256) if b not in _SEPARATORS)
_OPERATORS = b"\n;|&()<>`"  # each may start a command: about four nodes
_NOT_OPERATORS = bytes(b for b in range(256) if b not in _OPERATORS)


def parse_script(command: str, budget: list[int] | None = None) -> Script:
    """Parse ``command`` and list every simple command in it (see the module docs).

    ``budget`` holds the syntax nodes still allowed (shared by the code nested in one
    command: ``bash -c '…'``); past it, or past :data:`MAX_NESTING`, the command is unreadable.
    """
    if len(command) > MAX_LENGTH:
        return Script((), error=f"the command is longer than {MAX_LENGTH} characters")
    budget = [MAX_NODES] if budget is None else budget
    source = command.encode("utf-8", "replace")  # a lone surrogate becomes "?" (the rule refuses them first)
    parts = len(source.translate(None, _NOT_SEPARATORS)) + 3 * len(source.translate(None, _NOT_OPERATORS))
    if parts > MAX_SEPARATORS:
        return Script((), error=_too_large(parts, MAX_SEPARATORS))
    try:
        return _parse(source, budget)
    except RecursionError:  # a safety net: the walk is bounded by MAX_NESTING
        return Script((), error="the command nests too deeply for the policy to read")


def _too_large(count: int, limit: int = MAX_NODES) -> str:
    return (
        f"the command has {count} words, operators and syntax nodes, more than the {limit} the policy reads "
        "in bounded time; split it into smaller commands"
    )


def _parse(source: bytes, budget: list[int]) -> Script:
    shadow = _line_start_escapes(_ascii_shadow(source))
    root = _parser().parse(shadow).root_node
    if root.has_error and b"{" in shadow:
        # tree-sitter-bash reads a word that starts with "{" ({rm,-rf,/}) as a group and
        # fails, while bash opens a group only with "{" as a word of its own. To bash,
        # ""{rm,-rf,/} is the same word, and tree-sitter reads that: parse again with it.
        starts = [m.start() for m in _BRACE_WORD.finditer(shadow) if not _quoted(root, m.start())]
        for at in reversed(starts):
            source = source[:at] + b'""' + source[at:]
            shadow = shadow[:at] + b'""' + shadow[at:]
        if starts:
            root = _parser().parse(shadow).root_node
    if root.has_error:
        bad = _first_error(root)
        row, column = bad.start_point if bad is not None else (0, 0)
        return Script((), error=f"the command cannot be parsed (syntax error at line {row + 1}, column {column + 1})")
    nodes = root.descendant_count
    if nodes > budget[0]:
        return Script((), error=_too_large(MAX_NODES - budget[0] + nodes))
    budget[0] -= nodes
    walker = _Walker(source, budget)
    outer: bytes = getattr(_LOCAL, "source", b"")
    _LOCAL.source = source
    try:
        walker.walk(root, None, None)
    except _Unreadable as exc:
        return Script((), error=str(exc))
    finally:
        _LOCAL.source = outer
    return Script(
        tuple(walker.commands),
        frozenset(walker.functions),
        constructs=tuple(dict.fromkeys(walker.constructs)),
        hidden=tuple(walker.hidden),
        globs=tuple(walker.globs),
    )


_BRACE_WORD = re.compile(rb"(?:^|(?<=[\s;&|()]))\{(?=[^\s}])")
_QUOTING = frozenset({"string", "raw_string", "ansi_c_string", "translated_string", "heredoc_body", "comment"})


def _quoted(root: tree_sitter.Node, at: int) -> bool:
    node: tree_sitter.Node | None = root.descendant_for_byte_range(at, at + 1)
    while node is not None:
        if node.type in _QUOTING:
            return True
        node = node.parent
    return False


def _first_error(node: tree_sitter.Node) -> tree_sitter.Node | None:
    current: tree_sitter.Node | None = node
    while current is not None:  # a loop: the tree may be deeper than Python's recursion limit
        if current.is_error or current.is_missing:
            return current
        current = next((child for child in current.children if child.has_error), None)
    return None


# Nodes whose children are walked as they are; everything else is handled by name below.
_CONTAINERS = frozenset(
    {
        "program",
        "list",
        "compound_statement",
        "subshell",
        "do_group",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "case_statement",
        "case_item",
        "negated_command",
        "test_command",
        "arithmetic_expansion",
        "binary_expression",
        "unary_expression",
        "ternary_expression",
        "postfix_expression",
        "parenthesized_expression",
        "subscript",
        "array",
        "concatenation",
        "string",
        "translated_string",
        "expansion",
        "heredoc_body",
    }
)
_LEAVES = frozenset(
    {
        "word",
        "raw_string",
        "ansi_c_string",
        "string_content",
        "number",
        "variable_name",
        "special_variable_name",
        "simple_expansion",
        "comment",
        "file_descriptor",
        "regex",
        "extglob_pattern",
        "brace_expression",
        "test_operator",
        "heredoc_content",
        "heredoc_start",
        "heredoc_end",
    }
)
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})


# What each node kind makes of a command that is more than plain simple commands.
_CONSTRUCTS = {
    "compound_statement": "a { … } group",
    "subshell": "a ( … ) subshell",
    "if_statement": "an if statement",
    "while_statement": "a while or until loop",
    "for_statement": "a for loop",
    "c_style_for_statement": "a for loop",
    "case_statement": "a case statement",
    "negated_command": "a ! negation",
    "test_command": "a [[ … ]] test",
    "function_definition": "a function definition",
    "command_substitution": "a command substitution",
    "process_substitution": "a process substitution",
    "arithmetic_expansion": "an arithmetic expansion",
    "expansion": "a parameter expansion",
    "simple_expansion": "a parameter expansion",
    "declaration_command": "a declaration (declare, export, local, readonly, typeset)",
    "unset_command": "unset",
    "brace_expression": "a brace expansion",
    "ansi_c_string": "an ANSI-C $'…' string",
    "translated_string": 'a $"…" string',
    "extglob_pattern": "an extended glob",
    "heredoc_redirect": "a here-document",
    "herestring_redirect": "a here-string",
}
_RUNS_IN_SUBSCRIPT = re.compile(r"\$\(|`|\$\{")
_DATA_SUBSCRIPT = re.compile(r"\[[^\]\n]*(?:\$\(|`)")


class _Walker:
    def __init__(self, source: bytes, budget: list[int]) -> None:
        self.source = source
        self.budget = budget
        self.commands: list[SimpleCommand] = []
        self.functions: set[str] = set()
        self.constructs: list[str] = []
        self.hidden: list[str] = []
        self.globs: list[tuple[str, str]] = []
        self.depth = 0

    def walk(self, node: tree_sitter.Node, stdin: str | None, function: str | None) -> None:
        if not node.is_named:
            return
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                msg = f"the command nests more than {MAX_NESTING} levels deep"
                raise _Unreadable(msg)
            self._walk(node, stdin, function)
        finally:
            self.depth -= 1

    def _walk(self, node: tree_sitter.Node, stdin: str | None, function: str | None) -> None:
        kind = node.type
        construct = _CONSTRUCTS.get(kind)
        if construct is not None:
            self.constructs.append(construct)
        if kind == "test_command":
            self._subscripts(node)
        if kind == "list":  # a && b && c nests to the left: walked flat, it is no deeper
            pending = [node]
            while pending:
                current = pending.pop()
                if current.type == "list":
                    pending.extend(reversed(current.named_children))
                else:
                    self.walk(current, stdin, function)
        elif kind in _CONTAINERS:
            for child in node.named_children:
                self.walk(child, stdin, function)
        elif kind == "pipeline":
            for index, child in enumerate(node.named_children):
                self.walk(child, stdin if index == 0 else "a pipe", function)
        elif kind == "command":
            self._command(node, stdin, function, ())
        elif kind == "redirected_statement":
            self._redirected(node, stdin, function)
        elif kind in {"command_substitution", "process_substitution"}:
            # >(cmd) reads what the outer command writes into it
            inner = "a pipe" if _text(node).startswith(">(") else None
            for child in node.named_children:
                self.walk(child, inner, function)
        elif kind == "for_statement":  # for NAME in WORDS (or select): NAME is assigned each word
            variable = node.child_by_field_name("variable")
            if variable is not None:
                values = node.children_by_field_name("value")
                words = [w for v in values for w in expand(v)] if values else [Opaque('"$@"')]
                assignments = tuple((_text(variable), word) for word in words)
                self._add(SimpleCommand((), assignments, (), stdin, function))
            for child in node.named_children:
                self.walk(child, stdin, function)
        elif kind == "c_style_for_statement":  # for ((i=0; ...)): arithmetic, not commands
            for child in node.named_children:
                if child.type == "variable_assignment":
                    self._walk_value(child, function)
                else:
                    self.walk(child, stdin, function)
        elif kind in {"variable_assignment", "variable_assignments"}:
            assignments = self._assignments([node], stdin, function)
            self._add(SimpleCommand((), assignments, (), stdin, function))
        elif kind in {"declaration_command", "unset_command"}:
            self._declaration(node, stdin, function)
        elif kind == "function_definition":
            name_node = node.child_by_field_name("name")
            name = _text(name_node) if name_node is not None else ""
            self.functions.add(name)
            for child in node.named_children:
                if child is not name_node:
                    self.walk(child, stdin, name)
        elif kind in _REDIRECTS:
            redirects, _ = self._redirects([node], stdin, function)
            self._add(SimpleCommand((), (), redirects, stdin, function))
        elif kind in _LEAVES:
            self._substitutions(node, function)
        else:  # a construct this walker does not know: refuse rather than miss a command
            msg = f"the command uses a shell construct the policy cannot read ({kind})"
            raise _Unreadable(msg)

    def _add(self, command: SimpleCommand) -> None:
        self.budget[0] -= COMMAND_COST
        if self.budget[0] < 0:
            msg = _too_large(MAX_NODES - self.budget[0])
            raise _Unreadable(msg)
        self.commands.append(command)

    def _data_subscripts(self, node: tree_sitter.Node) -> None:
        """``read x <<< 'a[$(cmd)]'; echo $((x))``: literal data holding a command in a subscript,
        which arithmetic on what reads it would run."""
        text = _text(node)
        if _DATA_SUBSCRIPT.search(text):
            shown = " ".join(text[:60].split())
            self.hidden.append(f"the data {shown} holds a command in a subscript, which arithmetic on it runs")

    def _subscripts(self, node: tree_sitter.Node) -> None:
        """``[[ -v 'a[$(cmd)]' ]]``: bash evaluates a quoted subscript, and runs what is in it."""
        pending = [node]
        while pending:
            current = pending.pop()
            if current.type in {"raw_string", "string", "ansi_c_string", "word", "concatenation"}:
                text = _text(current)
                if _RUNS_IN_SUBSCRIPT.search(text) and "[" in text:
                    self.hidden.append(
                        f"the test {_text(node)[:60]} evaluates the subscript in {text[:60]}, which may run a command"
                    )
                    return
            pending.extend(current.named_children)

    def _substitutions(self, node: tree_sitter.Node, function: str | None) -> None:
        """Walk the commands inside a word (``$(...)``, ``<(...)``, ``${x:-$(...)}``)."""
        for child in node.named_children:
            self.walk(child, None, function)

    def _redirected(self, node: tree_sitter.Node, stdin: str | None, function: str | None) -> None:
        body = node.child_by_field_name("body")
        redirect_nodes = [c for c in node.named_children if c.type in _REDIRECTS]
        redirects, stdin = self._redirects(redirect_nodes, stdin, function)
        if body is not None and body.type == "command":
            self._command(body, stdin, function, redirects)
            return
        if redirects:  # a group, loop or pipeline: its redirections apply to every command in it
            self._add(SimpleCommand((), (), redirects, stdin, function))
        for child in node.named_children:
            if child.type not in _REDIRECTS:
                self.walk(child, stdin, function)

    def _command(
        self, node: tree_sitter.Node, stdin: str | None, function: str | None, outer: tuple[Redirect, ...]
    ) -> None:
        assignment_nodes: list[tree_sitter.Node] = []
        redirect_nodes: list[tree_sitter.Node] = []
        word_nodes: list[list[tree_sitter.Node]] = []
        for child in node.named_children:
            kind = child.type
            if kind == "variable_assignment":
                assignment_nodes.append(child)
                continue
            if kind in _REDIRECTS:
                redirect_nodes.append(child)
                continue
            word = child.named_children[0] if kind == "command_name" and child.named_child_count else child
            self._walk_value(word, function)
            # tree-sitter splits "r"\m (and a\<newline>b) into two words; bash reads one word
            # when nothing but line continuations separates them
            if word_nodes and self._touching(word_nodes[-1][-1], child):
                word_nodes[-1].append(word)
            else:
                word_nodes.append([word])
        assignments = self._assignments(assignment_nodes, stdin, function)
        redirects, stdin = self._redirects(redirect_nodes, stdin, function)
        argv: list[Word] = []
        for parts in word_nodes:
            words = expand_parts(parts)
            if len(words) != 1:
                self.constructs.append("a brace expansion")
                self.budget[0] -= len(words)  # each word is checked like a written one
                if self.budget[0] < 0:
                    raise _Unreadable(_too_large(MAX_NODES - self.budget[0]))
            glob = leaving_glob(parts)
            if glob is not None:
                construct = f"a glob ({glob}) that may reach files outside the working directory"
                self.constructs.append(construct)
                self.globs.append((construct, glob))
            argv.extend(words)
        self._add(SimpleCommand(tuple(argv), assignments, outer + redirects, stdin, function))

    def _touching(self, left: tree_sitter.Node, right: tree_sitter.Node) -> bool:
        gap = self.source[left.end_byte : right.start_byte]
        return not gap.replace(b"\\\n", b"")

    def _assignments(
        self, nodes: list[tree_sitter.Node], stdin: str | None, function: str | None
    ) -> tuple[tuple[str, Word], ...]:
        found: list[tuple[str, Word]] = []
        for node in nodes:
            if node.type == "variable_assignments":
                found.extend(self._assignments(node.named_children, stdin, function))
                continue
            name_node = node.child_by_field_name("name")
            value_node = node.child_by_field_name("value")
            name = _text(name_node) if name_node is not None else ""
            if name_node is not None and name_node.type == "subscript":  # a[1]=x, a[$(cmd)]=x
                name = _text(name_node.named_children[0]) if name_node.named_children else name
                self._substitutions(name_node, function)  # the index is evaluated: its substitutions run
            value: Word = ""
            if value_node is not None:
                self._walk_value(value_node, function)
                words = expand(value_node)
                value = words[0] if len(words) == 1 else Opaque(_text(value_node))
            found.append((name, value))
        return tuple(found)

    def _walk_value(self, node: tree_sitter.Node, function: str | None) -> None:
        construct = _CONSTRUCTS.get(node.type)
        if construct is not None:
            self.constructs.append(construct)
        if not node.named_child_count:  # a plain word: nothing inside to walk
            return
        if node.type in {"command_substitution", "process_substitution"}:
            self.walk(node, None, function)
        else:
            self._substitutions(node, function)

    def _declaration(self, node: tree_sitter.Node, stdin: str | None, function: str | None) -> None:
        argv: list[Word] = [_text(node.children[0])] if node.children else []
        assignments: list[tuple[str, Word]] = []
        for child in node.named_children:
            if child.type == "variable_assignment":
                assignments.extend(self._assignments([child], stdin, function))
            elif child.type == "variable_name":
                argv.append(_text(child))
            else:
                self._walk_value(child, function)
                argv.extend(expand(child))
        self._add(SimpleCommand(tuple(argv), tuple(assignments), (), stdin, function))

    def _redirects(
        self, nodes: list[tree_sitter.Node], stdin: str | None, function: str | None
    ) -> tuple[tuple[Redirect, ...], str | None]:
        found: list[Redirect] = []
        for node in nodes:
            if node.type in {"heredoc_redirect", "herestring_redirect"}:
                self._data_subscripts(node)
            if node.type == "heredoc_redirect":
                self.constructs.append(_CONSTRUCTS["heredoc_redirect"])
                stdin = "a here-document"
                for child in node.named_children:
                    # cat <<EOF | sh: tree-sitter puts the rest of the pipeline inside the redirect
                    self.walk(child, "a pipe" if child.type == "pipeline" else None, function)
                continue
            if node.type == "herestring_redirect":
                self.constructs.append(_CONSTRUCTS["herestring_redirect"])
                stdin = "a here-string"
                for child in node.named_children:
                    self._walk_value(child, function)
                continue
            destination = node.child_by_field_name("destination")
            operator = next((_text(c) for c in node.children if not c.is_named), "")
            descriptor_node = node.child_by_field_name("descriptor")
            descriptor = _text(descriptor_node) if descriptor_node is not None else None
            if destination is None:
                continue
            self._walk_value(destination, function)
            if destination.type in _CONSTRUCTS:
                self.constructs.append(_CONSTRUCTS[destination.type])
            words = expand(destination)
            target = words[0] if len(words) == 1 else Opaque(_text(destination))
            if operator in {">&", "<&"} and isinstance(target, str) and (target.isdigit() or target == "-"):
                continue  # 2>&1, >&-: a file descriptor, not a file
            if operator == "<" and isinstance(target, Opaque):
                stdin = "a process substitution"
            found.append(Redirect(operator, target, descriptor))
        return tuple(found), stdin
