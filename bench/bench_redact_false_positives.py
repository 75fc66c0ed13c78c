"""How often the default secret rules change ordinary text.

Runs the ``redact`` rule set (the whole-text reference, which the stream equals) over a
corpus with no secrets in it: the project's docs, a fixed sample of the Python standard
library's source, and English prose (the Python language reference's topic texts in
``pydoc_data``, plus the ``email``/``http`` package docstrings). Prints the spans it
changes per 100,000 characters, then each changed span with its file and the text
around it, so every one can be judged.

    python bench/bench_redact_false_positives.py [--stdlib-every N]
"""

from __future__ import annotations

import argparse
import sysconfig
import time
from pathlib import Path

from beamfilter_builtins import redact_filter

ROOT = Path(__file__).resolve().parents[1]
MARK = "\x00REDACTED\x00"


def corpus(every: int) -> list[tuple[str, str, str]]:
    """(group, file name, text) for every file of the corpus."""
    out: list[tuple[str, str, str]] = []
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]):
        out.append(("project docs", str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts and "test" not in p.parts)
    for path in files[::every]:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        out.append(("stdlib source", str(path.relative_to(stdlib)), text))
    from pydoc_data import topics  # the language reference as English prose

    prose = "\n\n".join(topics.topics.values())
    out.append(("English prose", "pydoc_data/topics.py (language reference)", prose))
    return out


def changed_spans(before: str, after: str) -> list[tuple[int, str]]:
    """Where ``after`` (with MARK as replacement) differs: (position in before, replaced text)."""
    spans: list[tuple[int, str]] = []
    i = j = 0
    while True:
        k = after.find(MARK, j)
        if k < 0:
            return spans
        i += k - j
        # the replaced text ends where the rest of ``after`` resumes in ``before``
        rest = after[k + len(MARK) : k + len(MARK) + 20]
        end = before.find(rest, i) if rest else len(before)
        spans.append((i, before[i:end]))
        i = end
        j = k + len(MARK)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdlib-every", type=int, default=4, help="take every Nth stdlib module (default 4)")
    args = parser.parse_args()
    redactor = redact_filter(replacement=MARK).extras["redactor"]
    files = corpus(args.stdlib_every)
    totals: dict[str, list[int]] = {}
    found: list[tuple[str, str, str]] = []
    started = time.perf_counter()
    for group, name, text in files:
        after = redactor.redact(text)
        spans = changed_spans(text, after) if after != text else []
        entry = totals.setdefault(group, [0, 0, 0])
        entry[0] += 1
        entry[1] += len(text)
        entry[2] += len(spans)
        for at, span in spans:
            line_start = text.rfind("\n", 0, at) + 1
            line_end = text.find("\n", at + len(span))
            line = text[line_start : line_end if line_end >= 0 else len(text)].strip()
            found.append((name, span, line[:160]))
    took = time.perf_counter() - started
    chars = sum(entry[1] for entry in totals.values())
    spans_total = sum(entry[2] for entry in totals.values())
    print(f"{'corpus':<16}{'files':>7}{'characters':>14}{'changed spans':>15}{'per 100k chars':>16}")
    for group, (count, size, spans) in totals.items():
        print(f"{group:<16}{count:>7}{size:>14,}{spans:>15}{spans / size * 100_000:>16.3f}")
    print(f"{'all':<16}{len(files):>7}{chars:>14,}{spans_total:>15}{spans_total / chars * 100_000:>16.3f}")
    print(f"({took:.1f} s, {chars / took / 1e6:.1f} M chars/s, whole-text redaction)\n")
    print("changed spans:")
    for name, span, line in found:
        print(f"  {name}: {span!r}\n      in: {line!r}")


if __name__ == "__main__":
    main()
