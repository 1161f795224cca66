"""What the junit, sarif, markdown and html report writers share (not a format of its own).

The words for each error kind, the summary sentence, and the cleaning of strings that came from
the checked site: a raw attribute value can hold anything (controls, lone surrogates from a
hostile document), and every format must still be written and parsed back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from http import HTTPStatus

from crawler.check.model import BLOCKED_KIND, WARNING_KINDS, CheckReport, Occurrence, Problem
from crawler.check.walls import HINT

__all__ = [
    "BLOCKED_HINT",
    "NOT_CHECKED",
    "clean",
    "describe",
    "is_blocked",
    "is_broken",
    "kind_sentence",
    "kind_title",
    "occurrences",
    "status_phrase",
    "summary",
    "visible",
]

#: Warnings about links that were not checked at all (the others were checked and passed).
NOT_CHECKED = frozenset(
    {
        "robots_disallowed",
        "excluded",
        "blocked_address",
        "scheme_unchecked",
        "not_checked",
        "host_unresponsive",
    }
)

#: What every format says of a link behind a bot wall.
BLOCKED_HINT = HINT[:1].upper() + HINT[1:] + "."

_KIND_TITLES = {
    "blocked": "Blocked by a bot wall",
    "timeout": "Timeout",
    "connect": "Connection failed",
    "dns": "Host name not resolved",
    "tls": "TLS error",
    "protocol": "Not an HTTP answer",
    "too_many_redirects": "Too many redirects",
    "redirect_loop": "Redirect loop",
    "invalid_url": "Invalid URL",
    "fragment_missing": "Fragment missing",
    "redirect_permanent": "Permanent redirect",
    "robots_disallowed": "Not checked: robots.txt disallows it",
    "excluded": "Not checked: excluded by scope or --include/--exclude",
    "blocked_address": "Not checked: address excluded",
    "scheme_unchecked": "Not checked: scheme",
    "not_checked": "Not checked: time limit",
    "host_unresponsive": "Not checked: host unresponsive",
}
_KIND_SENTENCES = {
    "blocked": "The site answered the checker with a bot challenge or refusal (a challenge"
    " header or page, a rate limit that did not lift, or a 403 that a browser's request does"
    " not get), not with the page; the link may work in a browser.",
    "timeout": "The server did not answer in time, also when checked again near the end.",
    "connect": "The connection to the server failed (refused, reset or closed).",
    "dns": "The host name does not resolve.",
    "tls": "The TLS handshake failed (certificate or protocol).",
    "protocol": "The server's answer is not HTTP (another service on that port) or is malformed.",
    "too_many_redirects": "The redirect chain is longer than the limit.",
    "redirect_loop": "The redirects lead back to a URL already in the chain.",
    "invalid_url": "The attribute value does not resolve to a URL.",
    "fragment_missing": "The target page has no element with that id and no <a name> of it.",
    "redirect_permanent": "The URL redirects permanently (301/308): link the final URL instead.",
    "robots_disallowed": "robots.txt forbids fetching the URL, so it was not checked.",
    "excluded": "Scope or --include/--exclude rules exclude the URL, so it was not checked.",
    "blocked_address": "The host's address is of a class the run excludes (private, link-local"
    " or loopback), so no connection was opened.",
    "scheme_unchecked": "Links of this scheme (mailto:, tel:, ...) are not checked.",
    "not_checked": "The run stopped at --max-time before the URL was checked.",
    "host_unresponsive": "Several URLs of its host timed out in a row, so the URL was not"
    " requested.",
}
# Kinds whose title says everything the checker's detail would.
_SAYS_IT_ALL = frozenset({"robots_disallowed", "scheme_unchecked"})
_HTTP = re.compile(r"http_(\d{3})\Z")
# Lone surrogates cannot be encoded as UTF-8; C0 controls (but tab, LF, CR) and DEL are not
# allowed in XML 1.0 and break a table row in markdown.
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ANY_CONTROL = re.compile("[\x00-\x1f\x7f]")
_ODD = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def is_broken(problem: Problem) -> bool:
    """A broken link (not a warning, not blocked by a bot wall)."""
    return problem.error not in WARNING_KINDS and problem.error != BLOCKED_KIND


def is_blocked(problem: Problem) -> bool:
    """A link behind a bot wall: neither broken nor known to work."""
    return problem.error == BLOCKED_KIND


def status_phrase(status: int) -> str:
    """``404 Not Found``; the bare number for a status Python does not name."""
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def kind_title(error: str) -> str:
    """A short title for an error kind: ``HTTP 404 Not Found``, ``Timeout`` ..."""
    m = _HTTP.match(error)
    if m:
        return f"HTTP {status_phrase(int(m.group(1)))}"
    return _KIND_TITLES.get(error, error.replace("_", " ").capitalize())


def kind_sentence(error: str) -> str:
    """One sentence on what the kind means (rule descriptions, tooltips)."""
    m = _HTTP.match(error)
    if m:
        status = status_phrase(int(m.group(1)))
        return f"The server answered HTTP {status}, also when checked again."
    return _KIND_SENTENCES.get(error, kind_title(error) + ".")


def describe(problem: Problem) -> str:
    """One line on what is wrong with a problem's URL (its kind, status, detail, redirect)."""
    text = kind_title(problem.error)
    if problem.error == "scheme_unchecked" and ":" in problem.url:
        text += " " + problem.url.split(":", 1)[0].lower() + ":"
    if problem.status is not None and not _HTTP.match(problem.error):
        text += f" (HTTP {problem.status})"
    if problem.redirects:
        n = len(problem.redirects)
        text += f", after {n} redirect{'s' if n != 1 else ''}"
    if problem.final_url and problem.error == "redirect_permanent":
        text += f": link {problem.final_url}"
    detail = problem.detail
    m = _HTTP.match(problem.error)
    if m:  # the checker's detail may repeat the status the title already gives
        phrase = re.escape(status_phrase(int(m.group(1))).split(" ", 1)[-1])
        detail = re.sub(rf"\AHTTP {m.group(1)}( {phrase})?[;:,.]?\s*", "", detail)
    if problem.error in _SAYS_IT_ALL:
        detail = ""  # the checker's detail only repeats the title ("disallowed by robots.txt")
    if detail.startswith("("):
        text += f" {detail}"  # "(checked twice)"
    elif detail:
        text += f": {detail}"
    return clean(text)


def occurrences(report: CheckReport) -> Iterator[tuple[Problem, Occurrence | None]]:
    """Every (problem, occurrence) of the report, broken first, then blocked, then the
    warnings; a problem nobody links (a seed) once, with None."""
    for problem in [*report.broken, *report.blocked, *report.warnings]:
        if not problem.referrers:
            yield problem, None
        for occ in problem.referrers:
            yield problem, occ


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def summary(report: CheckReport) -> str:
    """The one-line verdict every format starts with."""
    s = report.stats
    broken = len(report.broken)
    occ = sum(max(1, len(p.referrers)) for p in report.broken)
    head = f"{_plural(broken, 'broken link')}" if broken else "No broken links"
    if broken:
        head += f" ({_plural(occ, 'occurrence')})"
    parts = [head]
    if report.blocked:
        parts.append(f"{len(report.blocked):,} blocked by bot walls")
    parts += [
        _plural(len(report.warnings), "warning"),
        _plural(s.pages, "page") + " crawled",
        _plural(s.urls, "URL") + " checked",
        f"{s.duration:.1f} s",
    ]
    return ", ".join(parts)


def clean(s: str) -> str:
    """``s`` writable in any format: lone surrogates become U+FFFD, XML-forbidden controls
    their visible escape (``\\x00``)."""
    if not _ODD.search(s):  # the common case: one scan, no copy
        return s
    s = _SURROGATE.sub("\ufffd", s)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s)


def visible(s: str) -> str:
    """``s`` on one line: `clean`, and tab, LF and CR shown as ``\\t``, ``\\n``, ``\\r``."""
    if not _ODD.search(s):
        return s
    s = clean(s)
    return _ANY_CONTROL.sub(
        lambda m: {"\t": "\\t", "\n": "\\n", "\r": "\\r"}.get(m.group(), m.group()), s
    )
