"""``crawler check --format junit``: JUnit XML, the test report every CI system reads.

One test suite for the run. Its test cases:

* ``links checked``: always there and always passing, its ``system-out`` the counters (a CI
  that rejects a report with no test case still reads a clean run);
* one per broken link (classname ``broken.<kind>``, name the URL as linked), failing: the
  failure's message is the kind and the URL, its text every page, line and column that links
  it, and the redirect chain;
* one per link blocked by a bot wall (classname ``blocked.http_<status>``), ``skipped``: the
  link could not be verified (the site answered the checker with a challenge), which is what
  a skipped test is, neither a failure nor a pass; its message carries the hint that a browser
  may get it;
* one per warning (classname ``warning.<kind>``): ``skipped`` for a link that was not checked
  (robots.txt, scope rules, mailto: ...), since that is what it is; passing with the advice in
  ``system-out`` for a permanent redirect, which was checked and works.

The name is the URL, stable from run to run, so a CI's test history follows each link.

Valid against the Jenkins xunit plugin's ``junit-10.xsd`` (tested), which has no ``file`` or
``line`` on ``<testcase>`` and no ``skipped`` on ``<testsuites>``. Those attributes were of
no use to the readers anyway (a page's URL is no file of the repository that GitLab or a
GitHub action could link to): the location is in the text they do show, the failure's
``message`` (``linked from PAGE:LINE:COLUMN``) and its body (every occurrence).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TextIO

from crawler._version import __version__
from crawler.check.model import CheckReport, Occurrence, Problem
from crawler.check.report_common import (
    BLOCKED_HINT,
    NOT_CHECKED,
    clean,
    describe,
    summary,
    visible,
)

__all__ = ["write"]


def _where(occ: Occurrence) -> str:
    return f"{clean(occ.page)}:{occ.line}:{occ.column}: <{occ.tag} {occ.attr}={visible(occ.raw)!r}>"


def _text(problem: Problem) -> str:
    lines = [describe(problem)]
    if problem.redirects:
        lines.append("redirects: " + " -> ".join(clean(u) for u in problem.redirects))
    if problem.final_url:
        lines.append(f"final URL: {clean(problem.final_url)}")
    if problem.referrers:
        lines.append(f"linked from {len(problem.referrers)} place(s):")
        lines.extend("  " + _where(o) for o in problem.referrers)
    else:
        lines.append("linked from no page (a seed)")
    return "\n".join(lines)


def _case(parent: ET.Element, kind: str, problem: Problem, prefix: str) -> ET.Element:
    attrs = {"classname": f"{prefix}.{kind}", "name": clean(problem.url), "time": "0"}
    return ET.SubElement(parent, "testcase", attrs)


def _message(problem: Problem) -> str:
    """The failure's one line: what, which URL, and where it is first linked."""
    text = f"{describe(problem)}: {clean(problem.url)}"
    refs = problem.referrers
    if refs:
        first = refs[0]
        text += f" (linked from {clean(first.page)}:{first.line}:{first.column}"
        text += f" and {len(refs) - 1} more place(s))" if len(refs) > 1 else ")"
    return text


def write(report: CheckReport, out: TextIO) -> None:
    """Write ``report`` as JUnit XML to ``out`` (UTF-8 text)."""
    s = report.stats
    skipped = sum(p.error in NOT_CHECKED for p in report.warnings) + len(report.blocked)
    tests = 1 + len(report.broken) + len(report.blocked) + len(report.warnings)
    counts = {
        "tests": str(tests),
        "failures": str(len(report.broken)),
        "errors": "0",
        "skipped": str(skipped),
        "time": f"{s.duration:.3f}",
    }
    # junit-10.xsd allows ``skipped`` on <testsuite> only
    root = ET.Element("testsuites", {"name": "crawler check", **counts})
    del root.attrib["skipped"]
    suite = ET.SubElement(
        root, "testsuite", {"name": "crawler check " + " ".join(clean(u) for u in report.seeds)}
    )
    suite.attrib.update(counts)
    props = ET.SubElement(suite, "properties")
    for name, value in [
        ("crawler.version", __version__),
        *(("seed", clean(u)) for u in report.seeds),
        *((f"stats.{k}", str(getattr(s, k))) for k in ("pages", "links", "urls", "external")),
        *(
            (f"stats.{k}", str(getattr(s, k)))
            for k in ("ok", "broken", "blocked", "warnings", "rechecked")
        ),
    ]:
        ET.SubElement(props, "property", {"name": name, "value": value})

    ok = ET.SubElement(
        suite, "testcase", {"classname": "crawler.check", "name": "links checked", "time": "0"}
    )
    status = ", ".join(f"{k}: {v}" for k, v in sorted(s.status.items()))
    ET.SubElement(ok, "system-out").text = summary(report) + (
        f"\nHTTP statuses: {status}" if status else ""
    )

    for p in report.broken:
        case = _case(suite, p.error, p, "broken")
        failure = ET.SubElement(case, "failure", {"type": p.error, "message": _message(p)})
        failure.text = _text(p)
    for p in report.blocked:
        case = _case(suite, f"http_{p.status}" if p.status else p.error, p, "blocked")
        ET.SubElement(case, "skipped", {"message": f"{describe(p)}. {BLOCKED_HINT}"})
        ET.SubElement(case, "system-out").text = _text(p)
    for p in report.warnings:
        case = _case(suite, p.error, p, "warning")
        if p.error in NOT_CHECKED:
            ET.SubElement(case, "skipped", {"message": describe(p)})
        ET.SubElement(case, "system-out").text = _text(p)

    ET.indent(root)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(ET.tostring(root, encoding="unicode"))
    out.write("\n")
