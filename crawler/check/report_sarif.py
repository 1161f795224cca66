"""``crawler check --format sarif``: SARIF 2.1.0, for code-scanning tools to annotate.

One run; one rule per error kind present (``http_404``, ``fragment_missing`` ...); one result
per broken *occurrence* (level ``error``) and per warning occurrence (level ``warning``), its
location the page that links it (``artifactLocation.uri``, the page's URL) and the tag's line
and column (``region``; the run's ``columnKind`` is ``unicodeCodePoints``, as the extractor
counts). A problem that no page links (a broken seed) is one result located at the URL itself.
Each result's ``properties`` hold the URL as linked, the tag, attribute and raw value, the
status, redirects and final URL; ``partialFingerprints`` keep a result's identity from run to
run. Validated in tests against the OASIS 2.1.0 schema.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any, TextIO
from urllib.parse import quote

from crawler._version import __version__
from crawler.check.model import CheckReport, Occurrence, Problem
from crawler.check.report_common import (
    clean,
    describe,
    is_broken,
    kind_sentence,
    kind_title,
    occurrences,
)

__all__ = ["INDENT_MAX", "SCHEMA_URI", "to_sarif", "write"]

INDENT_MAX = 5_000

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
# Everything RFC 3986 allows in a URI stays; the rest (non-ASCII, spaces) is percent-encoded.
_URI_SAFE = "!#$%&'()*+,-./:;=?@[]_~"


@lru_cache(maxsize=65_536)
def _uri(url: str) -> str:
    return quote(clean(url), safe=_URI_SAFE)


def _rule_name(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("_"))


def _rule(kind: str, level: str) -> dict[str, Any]:
    title = kind_title(kind)
    short = f"Broken link: {title}" if level == "error" else title
    return {
        "id": kind,
        "name": _rule_name(kind),
        "shortDescription": {"text": short},
        "fullDescription": {"text": kind_sentence(kind)},
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["links", "broken-link" if level == "error" else "warning"]},
    }


def _problem_part(problem: Problem, level: str) -> tuple[str, dict[str, Any]]:
    """What every result of one problem shares: the message and the properties."""
    what = "Broken link" if level == "error" else "Link"
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
    return f"{what} {clean(problem.url)}: {describe(problem)}", props


def _result(
    problem: Problem,
    occ: Occurrence | None,
    rule_index: int,
    level: str,
    shared: tuple[str, dict[str, Any]],
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
    digest = hashlib.sha256("\0".join(key).encode("utf-8", "surrogatepass")).hexdigest()
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
    for problem, occ in occurrences(report):
        level = "error" if is_broken(problem) else "warning"
        if problem.error not in index:
            index[problem.error] = len(rules)
            rules.append(_rule(problem.error, level))
        if problem is not last:
            shared, last = _problem_part(problem, level), problem
        results.append(_result(problem, occ, index[problem.error], level, shared))
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
