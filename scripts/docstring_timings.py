"""Issue numbers and measured timings in the comments and docstrings of ``rnnviz/``.

    .venv/bin/python scripts/docstring_timings.py [--quiet] [PATH ...]

Timings measured on one machine go stale, and so do issue numbers: the figures belong in
``docs/dev/benchmarks.md`` with the command that measures them, the code keeps the reason.
This script finds, with :mod:`tokenize`, every comment and every docstring (a string, or
implicitly joined strings, that is a statement of its own; its ``>>>`` examples left out:
those are tested code) of ``rnnviz/**/*.py`` (or of the paths given) and counts

* issue numbers: ``#33``, ``(#33)``, ``issue 33``, ``issues #30 and #33`` (a colour such as
  ``#0072B2`` is not one: digits followed by hex letters, or six hex digits, are skipped);
* timings: a number followed by a time unit (``s``, ``ms``, ``µs``, ``us``, ``ns``, ``min``,
  ``seconds``, ``minutes``) or a ratio written ``2.4×`` / ``0.63x``.

It prints both counts, then each hit as ``path:line: text``. It over-counts: a limit or a
setting written in seconds (``at most 20 s``) is a timing to it, not a measurement.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: ``#33``, not ``#0072B2`` nor ``#333333`` (colours); ``issue 33``, ``issues 30 and 33``
ISSUE = re.compile(
    r"(?<![\w&/])#(?!(?:[0-9A-Fa-f]{3}){1,2}\b)\d+(?![0-9A-Fa-f])"
    r"|\bissues?\s+#?\d+(?:\s*(?:,|and)\s*#?\d+)*",
    re.IGNORECASE,
)
NUMBER = r"(?<![\w.])\d+(?:[.,]\d+)?(?:\s?[–-]\s?\d+(?:\.\d+)?)?"
UNIT = r"(?:ms|µs|us|ns|s|min|seconds?|minutes?)"
#: ``2.3 s``, ``0.4 ms``, ``1.5–2 s``; ``2.4×``, ``0.63x`` (not ``128×128``, a shape, nor ``0x1f``, ``4x,``)
TIMING = re.compile(rf"{NUMBER}\s?{UNIT}(?![\w/²³])|{NUMBER}(?:×(?![\w\d]|\s?\d)|x(?=\s|$|\)))")


def _prose(first_line: int, docstring: str) -> list[tuple[int, str]]:
    """(line, text) of a docstring's lines but its ``>>>`` examples: their code and expected
    output are tested code, not prose (an example's output ends at a blank line)."""
    out, example = [], False
    for offset, line in enumerate(docstring.splitlines()):
        text = line.strip()
        if text.startswith((">>>", "...")):
            example = True
        elif not text:
            example = False
        elif not example:
            out.append((first_line + offset, text))
    return out


def _documentation(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring line of ``source``."""
    found: list[tuple[int, str]] = []
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    starts_statement = True  # the next significant token begins a logical line
    run: list[tokenize.TokenInfo] = []  # string tokens of a statement that so far is only strings
    skip = {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            found.append((tok.start[0], tok.string.lstrip("#:").strip()))
            continue
        if tok.type in skip:
            continue
        if tok.type == tokenize.STRING and (starts_statement or run):
            run.append(tok)
            starts_statement = False
            continue
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) and run:  # the statement was strings alone
            for string in run:
                found += _prose(string.start[0], string.string)
        run = []
        starts_statement = tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or tok.string == ":"
        # ``def f(): """doc"""`` on one line: a colon that ends a header starts a statement, and a
        # colon inside a statement (a slice, a dict) is followed by an expression, not a string
        # statement, so the run test above (a NEWLINE right after the strings) sorts them out.
    return found


def scan(paths: list[Path]) -> tuple[list[str], list[str]]:
    """The issue-number hits and the timing hits, each as ``path:line: text``."""
    issues: list[str] = []
    timings: list[str] = []
    for path in paths:
        source = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for line, text in _documentation(source):
            if ISSUE.search(text):
                issues.append(f"{name}:{line}: {text}")
            timings += [f"{name}:{line}: {text}"] * len(TIMING.findall(text))
    return issues, timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="files or folders (default: rnnviz/)")
    parser.add_argument("--quiet", action="store_true", help="print the two counts only")
    args = parser.parse_args(argv)
    roots = [p.resolve() for p in args.paths] or [ROOT / "rnnviz"]
    files = sorted(f for r in roots for f in ([r] if r.is_file() else r.rglob("*.py")))
    issues, timings = scan(files)
    print(f"issue numbers: {len(issues)}")
    print(f"timings: {len(timings)}")
    if not args.quiet:
        for title, hits in (("issue numbers", issues), ("timings", timings)):
            print(f"\n{title}:")
            for hit in dict.fromkeys(hits):  # a line with two timings once, counted twice
                print(hit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
