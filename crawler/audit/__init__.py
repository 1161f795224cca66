"""``crawler audit``: the site's link graph for the people who own the site.

    report = crawler.audit.audit_sync("https://example.org/", sitemaps=("https://example.org/s.xml",))
    for finding in report.findings:
        print(finding.kind, finding.url, [(p.page, p.line) for p in finding.places])
    report.complete  # False: a limit cut the crawl (``report.limit`` says which)

Orphans, redirects linked, canonical and hreflang annotations, click depth and inlinks,
linked pages that are not indexable: the checker's crawl (every link with its page, line and
column; every URL's verdict) plus each page's head and the site's sitemaps.

*May import*: check, core and everything below it. Names are imported lazily.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawler.audit.api import audit, audit_sync
    from crawler.audit.auditor import Auditor
    from crawler.audit.model import AuditReport, AuditStats, Finding

__all__ = ["AuditReport", "AuditStats", "Auditor", "Finding", "audit", "audit_sync"]

_WHERE = {
    "AuditReport": "crawler.audit.model",
    "AuditStats": "crawler.audit.model",
    "Finding": "crawler.audit.model",
    "Auditor": "crawler.audit.auditor",
    "audit": "crawler.audit.api",
    "audit_sync": "crawler.audit.api",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'crawler.audit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
