"""The link checker's report: what every writer (text, json, junit, sarif, markdown, html) reads.

The checker (``crawler.check``) fills a `CheckReport`; each ``report_*`` module turns one into
a file. The JSON writer is ``CheckReport.to_dict`` itself: its shape is the documented schema
(README, "crawler check"), so changing a field here changes the schema.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "BLOCKED_KIND",
    "BROKEN_KINDS",
    "HOST_TIMEOUTS",
    "WARNING_KINDS",
    "CheckReport",
    "CheckStats",
    "Occurrence",
    "Problem",
]

#: ``Problem.error`` of a broken link (``http_NNN`` for any 4xx/5xx status).
BROKEN_KINDS = (
    "http_NNN",
    "timeout",
    "connect",
    "dns",
    "tls",
    "protocol",  # the answer is not HTTP (a service of another protocol), or malformed HTTP
    "too_many_redirects",
    "redirect_loop",
    "invalid_url",
    "fragment_missing",
)
#: ``--host-timeouts``' default: URLs of one origin timing out in a row after which the prober
#: sends nothing more there (its other URLs are ``host_unresponsive``); 0 = never.
HOST_TIMEOUTS = 3

#: ``Problem.error`` of a link behind a bot wall (crawler/check/walls.py): a challenge header
#: or page in a 4xx/5xx, a 429 that the retries did not lift, a 403 that a browser's request
#: does not get. Not broken (the site refused the checker, not the link): ``CheckReport.blocked``.
BLOCKED_KIND = "blocked"

#: ``Problem.error`` of a warning: not broken, worth a look.
WARNING_KINDS = (
    "redirect_permanent",  # 301/308: link ``final_url`` instead
    "robots_disallowed",  # not checked: robots.txt forbids it
    "excluded",  # not checked: scope or --include/--exclude rules
    "blocked_address",  # not checked: the address is excluded (--exclude-private ...)
    "scheme_unchecked",  # mailto:, tel:, ftp: ... not checked
    "not_checked",  # not checked: --max-time passed first
    "host_unresponsive",  # not checked: --host-timeouts URLs of its host timed out in a row
)


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One place a link stands: the page, 1-based line and column of the tag's ``<``, the
    tag and attribute, and the raw attribute value as the DOM holds it."""

    page: str
    line: int
    column: int
    tag: str
    attr: str
    raw: str


@dataclass(slots=True)
class Problem:
    """A broken link (or a warning): one target URL and every place that links it.

    Attributes:
        url: the URL as linked, resolved (with its fragment when the fragment is what is
            broken; the raw value when it does not resolve).
        error: a kind of BROKEN_KINDS (``http_404`` ...), BLOCKED_KIND or WARNING_KINDS.
        status: the final HTTP status, if a response came.
        detail: a human sentence (the exception, the Retry-After waited ...).
        referrers: every occurrence, in crawl order.
        redirects: the redirect chain followed from ``url``, each hop's URL in order.
        final_url: where the redirects ended (for ``redirect_permanent``: the URL to link).
        external: out of the crawl's scope (checked, never crawled).
    """

    url: str
    error: str
    status: int | None = None
    detail: str = ""
    referrers: list[Occurrence] = field(default_factory=list)
    redirects: list[str] = field(default_factory=list)
    final_url: str | None = None
    external: bool = False


@dataclass(slots=True)
class CheckStats:
    """Counters of a check run."""

    pages: int = 0  # pages crawled (in scope, fetched, parsed)
    links: int = 0  # link occurrences found
    urls: int = 0  # distinct URLs checked
    external: int = 0  # of which out of scope
    ok: int = 0
    broken: int = 0  # distinct broken URLs
    broken_occurrences: int = 0
    warnings: int = 0
    blocked: int = 0  # distinct URLs behind a bot wall (not broken)
    rechecked: int = 0  # failed once (timeout, 403, 429, 5xx) and checked again
    unchecked: int = 0  # distinct URLs not checked: not_checked + host_unresponsive warnings
    time_limit: bool = False  # the run stopped at --max-time (``not_checked``: what was left)
    duration: float = 0.0
    status: dict[int, int] = field(default_factory=dict)  # final HTTP status -> URLs


@dataclass(slots=True)
class CheckReport:
    """The result of ``crawler check``: broken links, warnings, counters, and the links
    behind a bot wall (``blocked``: neither broken nor fine; a browser may get them)."""

    seeds: list[str]
    broken: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    stats: CheckStats = field(default_factory=CheckStats)
    blocked: list[Problem] = field(default_factory=list)

    def __repr__(self) -> str:
        # a summary, not every problem and place: asyncio's Runner makes the result of
        # ``crawler check``'s task into text when it puts SIGINT's handler back, and a
        # field-by-field repr of a large report was the command's peak memory
        seeds = self.seeds[0] if len(self.seeds) == 1 else f"{len(self.seeds)} seeds"
        return (
            f"<CheckReport of {seeds}: {len(self.broken)} broken, {len(self.warnings)}"
            f" warnings, {len(self.blocked)} blocked, {self.stats.urls} URLs>"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (``--format json``): the documented schema."""
        data = asdict(self)
        data["stats"]["status"] = {str(k): v for k, v in sorted(self.stats.status.items())}
        return data
