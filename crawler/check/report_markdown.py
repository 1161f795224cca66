"""``crawler check --format markdown``: a pull-request comment (GitHub-flavoured Markdown).

A heading with the verdict, the summary line, then a table of the broken links (URL, what is
wrong, the pages that link it with line and column). The first `OPEN_ROWS` rows are open;
the rest, the links blocked by a bot wall (with the hint that a browser may get them) and the
warnings are collapsed in ``<details>``; a link's pages past the first
`OPEN_REFS` are collapsed in their cell. URLs and raw values stand in code spans (a fence
longer than any backtick run inside; ``|`` escaped as GFM tables want); every other string
from the site has its punctuation backslash-escaped, so none of it becomes markup. The comment
stays under `MAX_CHARS` (GitHub refuses a comment over 65,536 characters): rows that do not
fit are counted in a last line instead.
"""

from __future__ import annotations

import re
from typing import TextIO

from crawler.check.model import CheckReport, Occurrence, Problem
from crawler.check.report_common import BLOCKED_HINT, describe, summary, visible

__all__ = ["MAX_CHARS", "OPEN_REFS", "OPEN_ROWS", "code", "text", "write"]

OPEN_ROWS = 10
OPEN_REFS = 3
MAX_CHARS = 60_000
# What can start markup in GFM text (``[`` for links, ``@``/``#`` for GitHub's mentions and
# references); CommonMark lets a backslash escape any ASCII punctuation.
_MARKUP = re.compile(r"([\\`*_\[\]<>&|~!@#])")
_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")
_TICKS = re.compile("`+")


def text(s: str) -> str:
    """``s`` as literal Markdown text: every character that could start markup (``*``,
    ``<``, ``|``, ``[``, ``@`` ...) backslash-escaped, so none acts."""
    return _MARKUP.sub(r"\\\1", visible(s))


def code(s: str, *, in_table: bool = True) -> str:
    """``s`` as a code span: fenced by one backtick more than its longest run, padded when it
    starts or ends with a backtick or space, ``|`` escaped inside a table (a value holding
    a backslash before ``|`` becomes an HTML ``<code>``, its punctuation as entities)."""
    s = visible(s)
    if in_table and "\\|" in s:
        # GFM's table scanner reads the backslash of "\\|" as escaping the next backslash,
        # so no code span can hold it: an HTML code element, its punctuation as entities.
        return "<code>" + _PUNCT.sub(lambda m: f"&#{ord(m.group())};", s) + "</code>"
    longest = max((len(m) for m in _TICKS.findall(s)), default=0)
    fence = "`" * (longest + 1)
    if s.startswith(("`", " ")) or s.endswith(("`", " ")) or not s:
        s = f" {s} "
    if in_table:
        s = s.replace("|", "\\|")
    return f"{fence}{s}{fence}"


def _ref(occ: Occurrence) -> str:
    return f"{code(occ.page)} line {occ.line}, column {occ.column} ({code(occ.raw)})"


def _refs_cell(problem: Problem) -> str:
    if not problem.referrers:
        return "no page (a seed)"
    refs = [_ref(o) for o in problem.referrers]
    cell = "<br>".join(refs[:OPEN_REFS])
    if len(refs) > OPEN_REFS:
        more = len(refs) - OPEN_REFS
        cell += f"<details><summary>{more} more</summary>{'<br>'.join(refs[OPEN_REFS:])}</details>"
    return cell


def _row(problem: Problem) -> str:
    what = text(describe(problem))
    return f"| {code(problem.url)} | {what} | {_refs_cell(problem)} |"


def _table(first: str, rows: list[str]) -> list[str]:
    return [f"| {first} | Problem | Linked from |", "| --- | --- | --- |", *rows]


class _Budget:
    """Counts characters so the comment stays under MAX_CHARS."""

    def __init__(self) -> None:
        self.used = 0
        self.dropped = 0

    def take(self, problems: list[Problem], reserve: int = 2_000) -> list[str]:
        """The rows of ``problems`` that fit; the rest are counted, never rendered."""
        kept: list[str] = []
        for problem in problems:
            row = _row(problem)
            if self.used + len(row) + 1 > MAX_CHARS - reserve:
                self.dropped += len(problems) - len(kept)
                break
            self.used += len(row) + 1
            kept.append(row)
        return kept


def write(report: CheckReport, out: TextIO) -> None:
    """Write ``report`` as a Markdown pull-request comment to ``out``."""
    n = len(report.broken)
    verdict = f"❌ {n} broken link{'s' if n != 1 else ''}" if n else "✅ no broken links"
    lines = [f"### crawler check: {verdict}", "", text(summary(report)) + ".", ""]
    budget = _Budget()
    budget.used = sum(len(line) + 1 for line in lines)
    if report.broken:
        rows = budget.take(report.broken)
        lines += _table("Broken link", rows[:OPEN_ROWS])
        if len(rows) > OPEN_ROWS:
            lines += ["", f"<details><summary>{len(rows) - OPEN_ROWS} more broken links</summary>"]
            lines += ["", *_table("Broken link", rows[OPEN_ROWS:]), "", "</details>"]
        lines.append("")
    if report.blocked:
        rows = budget.take(report.blocked)
        if rows:
            b = len(report.blocked)
            lines += [
                f"<details><summary>{b} blocked by bot walls (not broken)</summary>",
                "",
                text(BLOCKED_HINT),
                "",
                *_table("Blocked link", rows),
                "",
                "</details>",
                "",
            ]
    if report.warnings:
        rows = budget.take(report.warnings)
        if rows:
            w = len(report.warnings)
            lines += [f"<details><summary>{w} warning{'s' if w != 1 else ''}</summary>", ""]
            lines += [*_table("URL", rows), "", "</details>", ""]
    if budget.dropped:
        lines += [
            f"{budget.dropped} more rows not shown (a comment is limited in size): "
            "see the full report (`--format html` or `--format json`).",
            "",
        ]
    out.write("\n".join(lines))
