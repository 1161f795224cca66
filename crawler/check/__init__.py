"""``crawler check``: a broken-link checker on the crawl engine.

    report = await crawler.check.check("https://example.org/", max_depth=5)
    report = crawler.check.check_sync("https://example.org/", external=False)
    for problem in report.broken:
        print(problem.url, problem.error, [(o.page, o.line) for o in problem.referrers])
    report.blocked  # links behind a bot wall (a challenge, a rate limit): not broken

Names are imported lazily: ``crawler.check.model`` (what the report writers read) does not
pull in the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawler.check.api import check, check_sync
    from crawler.check.checker import Checker, CheckOptions
    from crawler.check.model import CheckReport, CheckStats, Occurrence, Problem

__all__ = [
    "CheckOptions",
    "CheckReport",
    "CheckStats",
    "Checker",
    "Occurrence",
    "Problem",
    "check",
    "check_sync",
]

_WHERE = {
    "CheckOptions": "crawler.check.checker",
    "Checker": "crawler.check.checker",
    "CheckReport": "crawler.check.model",
    "CheckStats": "crawler.check.model",
    "Occurrence": "crawler.check.model",
    "Problem": "crawler.check.model",
    "check": "crawler.check.api",
    "check_sync": "crawler.check.api",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'crawler.check' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
