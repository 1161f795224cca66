"""``crawler check --format sarif``: SARIF 2.1.0, for code-scanning tools to annotate.

One run; one rule per error kind present (``http_404``, ``fragment_missing`` ...); one result
per broken *occurrence* (level ``error``), per occurrence of a link blocked by a bot wall
(rule ``blocked``, level ``note``: not known to be broken, so a code-scanning gate on errors or
warnings does not trip on a site's bot wall) and per warning occurrence (level ``warning``), its
location the page that links it (``artifactLocation.uri``, the page's URL) and the tag's line
and column (``region``; the run's ``columnKind`` is ``unicodeCodePoints``, as the extractor
counts). A problem that no page links (a broken seed) is one result located at the URL itself.
Each result's ``properties`` hold the URL as linked, the tag, attribute and raw value, the
status, redirects and final URL; ``partialFingerprints`` keep a result's identity from run to
run, one per occurrence (the same link twice on a page: two). Each rule has a PascalCase
``name`` for people (``BrokenLinkHttp404NotFound``) apart from its opaque ``id``; the driver's
``informationUri`` is the project's URL when its metadata declares one. Validated in tests
against the OASIS 2.1.0 schema, and with SARIF Multitool where it is installed.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, metadata
from typing import Any, TextIO
from urllib.parse import quote

from crawler._version import __version__
from crawler.check.model import CheckReport, Occurrence, Problem
from crawler.check.report_common import (
    BLOCKED_HINT,
    clean,
    describe,
    is_blocked,
    is_broken,
    kind_sentence,
    kind_title,
    occurrences,
    status_phrase,
)

__all__ = ["INDENT_MAX", "SCHEMA_URI", "information_uri", "to_sarif", "write"]

INDENT_MAX = 5_000

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
# Everything RFC 3986 allows in a URI stays; the rest (non-ASCII, spaces) is percent-encoded.
_URI_SAFE = "!#$%&'()*+,-./:;=?@[]_~"
_HTTP_KIND = re.compile(r"http_(\d{3})\Z")
_TAGS = {"error": "broken-link", "note": "blocked-link"}


@lru_cache(maxsize=65_536)
def _uri(url: str) -> str:
    return quote(clean(url), safe=_URI_SAFE)


@lru_cache(maxsize=1)
def information_uri() -> str | None:
    """The project's home page, from the installed package's metadata (``[project.urls]`` in
    pyproject.toml: Homepage, else Documentation, else Source); None when it declares none.

    Never made up: the name ``crawler`` on PyPI is another project's, so its PyPI page would
    send a reader of the log to the wrong tool. With no URL the key is left out (SARIF has no
    null for it)."""
    try:
        meta = metadata("crawler")
    except PackageNotFoundError:
        return None
    urls: dict[str, str] = {}
    for entry in meta.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        url = url.strip()
        if url.startswith(("https://", "http://")):
            urls.setdefault(label.strip().lower(), url)
    return next((urls[k] for k in ("homepage", "documentation", "source") if k in urls), None)


def _rule_name(kind: str, level: str) -> str:
    """A PascalCase name for people, never the id but for case (SARIF Multitool's SARIF1001):
    ``http_404`` -> ``BrokenLinkHttp404NotFound``, ``robots_disallowed`` ->
    ``LinkRobotsDisallowed``."""
    words = kind.split("_")
    m = _HTTP_KIND.match(kind)
    if m:  # the status's phrase, when Python knows one
        words = ["http", *re.findall(r"[A-Za-z0-9]+", status_phrase(int(m.group(1))))]
    if kind == "blocked":
        return "LinkBlockedByBotWall"
    prefix = "BrokenLink" if level == "error" else "Link"
    return prefix + "".join(w[:1].upper() + w[1:].lower() for w in words if w)


def _rule(kind: str, level: str) -> dict[str, Any]:
    title = kind_title(kind)
    short = f"Broken link: {title}" if level == "error" else title
    return {
        "id": kind,
        "name": _rule_name(kind, level),
        "shortDescription": {"text": short},
        "fullDescription": {"text": kind_sentence(kind)},
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["links", _TAGS.get(level, "warning")]},
    }


def _problem_part(problem: Problem, level: str) -> tuple[str, dict[str, Any]]:
    """What every result of one problem shares: the message and the properties."""
    what = {"error": "Broken link", "note": "Blocked link"}.get(level, "Link")
    props: dict[str, Any] = {
        "url": clean(problem.url),
        "error": problem.error,
        "status": problem.status,
        "external": problem.external,
    }
    if problem.redirects:
        props["redirects"] = [clean(u) for u in problem.redirects]
    if problem.final_url:
        props["finalUrl"] = clean(problem.final_url)
    text = f"{what} {clean(problem.url)}: {describe(problem)}"
    if level == "note":
        text += f". {BLOCKED_HINT}"
    return text, props


def _result(
    problem: Problem,
    occ: Occurrence | None,
    rule_index: int,
    level: str,
    shared: tuple[str, dict[str, Any]],
    seen: dict[str, int],
) -> dict[str, Any]:
    text, props = shared[0], dict(shared[1])
    location: dict[str, Any]
    if occ is None:
        text += " (linked from no page: a seed)"
        location = {"artifactLocation": {"uri": _uri(problem.url)}}
        key = [problem.error, problem.url]
    else:
        text += f" (<{occ.tag} {occ.attr}>)"
        props.update(tag=occ.tag, attr=occ.attr, raw=clean(occ.raw))
        location = {"artifactLocation": {"uri": _uri(occ.page)}}
        if occ.line >= 1:
            region: dict[str, int] = {"startLine": occ.line}
            if occ.column >= 1:
                region["startColumn"] = occ.column
            location["region"] = region
        key = [problem.error, problem.url, occ.page, occ.tag, occ.attr, occ.raw]
    # The same link (kind, URL, page, tag, attribute, raw value) may stand several times on
    # one page: the 2nd, 3rd ... occurrence adds its ordinal, so that each has a fingerprint
    # of its own. Not its line: an edit above it would move it, and a code-scanning tool
    # would close the alert and open a new one. The first keeps the fingerprint it had.
    joined = "\0".join(key)
    n = seen[joined] = seen.get(joined, 0) + 1
    if n > 1:
        joined += f"\0#{n}"
    digest = hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()
    return {
        "ruleId": problem.error,
        "ruleIndex": rule_index,
        "level": level,
        "message": {"text": text},
        "locations": [{"physicalLocation": location}],
        "partialFingerprints": {"crawlerLink/v1": digest[:32]},
        "properties": props,
    }


def to_sarif(report: CheckReport) -> dict[str, Any]:
    """The SARIF log of ``report`` as a JSON-ready dict."""
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    results = []
    shared: tuple[str, dict[str, Any]] = ("", {})
    last: Problem | None = None
    seen: dict[str, int] = {}
    for problem, occ in occurrences(report):
        level = "error" if is_broken(problem) else "note" if is_blocked(problem) else "warning"
        if problem.error not in index:
            index[problem.error] = len(rules)
            rules.append(_rule(problem.error, level))
        if problem is not last:  # a key names its problem: only its occurrences can repeat it
            shared, last = _problem_part(problem, level), problem
            seen.clear()
        results.append(_result(problem, occ, index[problem.error], level, shared, seen))
    s = report.stats
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "crawler check",
                        "version": __version__,
                        "semanticVersion": __version__,
                        **({"informationUri": home} if (home := information_uri()) else {}),
                        "rules": rules,
                    }
                },
                "invocations": [{"executionSuccessful": True}],
                "columnKind": "unicodeCodePoints",
                "results": results,
                "properties": {
                    "seeds": [clean(u) for u in report.seeds],
                    "stats": {
                        "pages": s.pages,
                        "links": s.links,
                        "urls": s.urls,
                        "external": s.external,
                        "ok": s.ok,
                        "broken": s.broken,
                        "blocked": s.blocked,
                        "brokenOccurrences": s.broken_occurrences,
                        "warnings": s.warnings,
                        "rechecked": s.rechecked,
                        "duration": s.duration,
                        "status": {str(k): v for k, v in sorted(s.status.items())},
                    },
                },
            }
        ],
    }


def write(report: CheckReport, out: TextIO) -> None:
    """Write ``report`` as a SARIF 2.1.0 log (JSON) to ``out``."""
    log = to_sarif(report)
    # Indented for a person up to INDENT_MAX results; past that compact, which the json
    # module writes in C (with indent= it falls back to pure Python, ~10x slower).
    indent = 2 if len(log["runs"][0]["results"]) <= INDENT_MAX else None
    out.write(json.dumps(log, indent=indent, ensure_ascii=False))
    out.write("\n")
