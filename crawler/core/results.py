"""Result records of a crawl: one PageResult a fetched page, CrawlStats, CrawlResult."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast

from crawler.extract import HeadFacts, Link, LinkRecord

if TYPE_CHECKING:
    from crawler.extract._extract_c import LinkRecord as Record


@dataclass(slots=True)
class PageResult:
    """What happened to one URL taken from the frontier.

    ``error`` is None on success, else a short kind (``"timeout"``, ``"connect"``,
    ``"http_503"``, ``"redirect_loop"``, ``"too_large"`` ...) and ``error_detail`` the message.
    Faults of our side are kinds of their own, never a wire error: ``"sink"`` (the user's sink
    or ``on_page`` hook raised on this page), ``"extract"`` (the extractor raised; reading
    stopped, the links found before stay), ``"internal"`` (a bug of the crawler).

    ``links`` holds every link occurrence, invalid ones (``url`` None) included; ``to_dict``
    puts the URLs in ``links`` and the raw values of the invalid ones in ``invalid_links``.
    A list, or with ``Crawler(link_record=True)`` and the compiled extractor a
    ``crawler.extract.LinkRecord``: the same Links, kept compact and made when read.
    ``error`` ``"robots_disallowed"`` marks a URL robots.txt kept us from fetching: such a
    record is made only with ``Crawler(report_skipped=True)`` (a link checker's "skipped").
    """

    url: str
    depth: int
    referrer: str | None = None
    final_url: str | None = None
    status: int | None = None
    content_type: str | None = None
    bytes: int = 0
    elapsed_ms: float = 0.0
    links: Sequence[Link] = field(default_factory=list)
    redirects: list[str] = field(default_factory=list)
    truncated: bool = False
    error: str | None = None
    error_detail: str | None = None
    retries: int = 0
    #: the page's fragment targets (``id``/``name`` values), with ``Crawler(collect_ids=True)``
    ids: set[str] | None = None
    #: False when ``ids`` may lack a target (the extractor's caps; see LinkExtractor)
    ids_complete: bool = True
    #: the status of each redirect hop followed, in order (``redirects`` are their targets)
    redirect_statuses: list[int] = field(default_factory=list)
    #: links of the page past ``max_links_per_page``: counted, not followed, not in ``links``
    links_capped: int = 0
    #: the final response's ``Link`` and ``X-Robots-Tag`` headers (values joined by ", ")
    link_header: str | None = None
    robots_header: str | None = None
    #: with ``Crawler(head_facts=True)``: what an HTML page's head says about the page
    #: (``crawler.extract.HeadFacts``: canonicals, alternates, base, robots noindex)
    head_facts: HeadFacts | None = None
    #: the charset the response's headers gave
    charset: str | None = None
    #: with ``render`` auto or always (else None): whether the page was loaded in the browser
    rendered: bool | None = None
    #: why it was (``crawler.core.render_rule.REASONS``, or "always"), None if it was not
    render_reason: str | None = None
    #: the links only the rendered page had (by URL; ``links`` holds the static pass's):
    #: ``to_dict``'s ``links`` is the union, its ``rendered_links`` these URLs
    rendered_links: Sequence[Link] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self, *, links: bool = True) -> dict[str, object]:
        """The page's record (``links=False``: without ``links`` and ``invalid_links``)."""
        d: dict[str, object] = {
            "url": self.url,
            "final_url": self.final_url,
            "status": self.status,
            "depth": self.depth,
            "referrer": self.referrer,
            "content_type": self.content_type,
            "bytes": self.bytes,
            "elapsed_ms": round(self.elapsed_ms, 1),
            "links": _urls(self.links) if links else None,
            "invalid_links": _invalid(self.links) if links else None,
            "redirects": list(self.redirects),
            "truncated": self.truncated,
            "error": self.error,
            "error_detail": self.error_detail,
            "retries": self.retries,
        }
        if self.links_capped:  # (only then: the line of every other page is as it was)
            d["links_capped"] = self.links_capped
        if self.rendered is not None:  # (only with --render: other lines are as they were)
            extra = [link.url for link in self.rendered_links if link.url is not None]
            d["rendered"] = self.rendered
            d["render_reason"] = self.render_reason
            d["rendered_links"] = extra
            if links and extra:
                d["links"] = [*d["links"], *extra]  # type: ignore[misc]
        if not links:
            del d["links"], d["invalid_links"]
        return d


def _urls(links: Sequence[Link]) -> list[str]:
    if LinkRecord is not None and type(links) is LinkRecord:
        return cast("Record", links).urls()  # (read without making the Links)
    return [link.url for link in links if link.url is not None]


def _invalid(links: Sequence[Link]) -> list[str]:
    if LinkRecord is not None and type(links) is LinkRecord:
        return cast("Record", links).invalid()
    return [link.raw for link in links if link.url is None]


@dataclass(slots=True)
class CrawlStats:
    """Counters of a crawl; complete even when the crawl was cancelled."""

    pages: int = 0
    pages_ok: int = 0
    bytes: int = 0
    links_found: int = 0
    links_new: int = 0
    #: link occurrences whose value does not resolve to a URL (``Link.url`` None): not crawled
    links_invalid: int = 0
    #: links past ``max_links_per_page`` on their page: counted in ``links_found``, not followed
    links_capped: int = 0
    retries: int = 0
    redirects: int = 0
    robots_disallowed: int = 0
    out_of_scope: int = 0
    #: exceptions raised by the user's sink or ``on_page`` hook (logged; the crawl goes on)
    sink_errors: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    #: this run's ``tls`` errors by reason ("certificate has expired" ...), for the summary
    tls_reasons: Counter[str] = field(default_factory=Counter)
    status: Counter[int] = field(default_factory=Counter)
    started: float = 0.0
    duration: float = 0.0
    cancelled: bool = False
    #: the run stopped because ``max_time`` passed (``cancelled`` is set too)
    time_limit: bool = False
    #: pages done by earlier runs of a resumed crawl (``pages`` counts the whole crawl)
    resumed_pages: int = 0
    #: requests that were in flight when the last run stopped (fetched again in this one)
    recovered: int = 0
    #: with ``render`` auto or always: pages of this run loaded in the browser, by reason
    #: (``crawler.core.render_rule.REASONS`` or "always"), the links only their rendered DOM
    #: had (before dedup), the requests the browser sent
    render: str | None = None
    render_reasons: Counter[str] = field(default_factory=Counter)
    rendered_links: int = 0
    render_requests: int = 0
    #: with ``render_sample``: sampled pages (reason "sample") whose rendered DOM had links
    #: the static pass had not (the auto rule's misses)
    render_misses: int = 0

    @property
    def pages_rendered(self) -> int:
        return sum(self.render_reasons.values())

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def pages_per_second(self) -> float:
        """Pages of this run (not of earlier runs of a resumed crawl) per second of it."""
        run = self.pages - self.resumed_pages
        return run / self.duration if self.duration > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "pages": self.pages,
            "pages_ok": self.pages_ok,
            "bytes": self.bytes,
            "links_found": self.links_found,
            "links_new": self.links_new,
            "links_invalid": self.links_invalid,
            "links_capped": self.links_capped,
            "retries": self.retries,
            "redirects": self.redirects,
            "robots_disallowed": self.robots_disallowed,
            "out_of_scope": self.out_of_scope,
            "sink_errors": self.sink_errors,
            "errors": dict(self.errors),
            "status": {str(k): v for k, v in sorted(self.status.items())},
            "duration": round(self.duration, 3),
            "pages_per_second": round(self.pages_per_second, 2),
            "cancelled": self.cancelled,
            "time_limit": self.time_limit,
            "resumed_pages": self.resumed_pages,
            "recovered": self.recovered,
        } | (
            {
                "render": self.render,
                "pages_rendered": self.pages_rendered,
                "render_reasons": dict(self.render_reasons),
                "rendered_links": self.rendered_links,
                "render_requests": self.render_requests,
                "render_misses": self.render_misses,
            }
            if self.render
            else {}
        )


@dataclass(slots=True)
class CrawlResult:
    """What ``crawl()`` returns: discovered links in discovery order, pages, stats."""

    links: list[str]
    pages: list[PageResult]
    stats: CrawlStats


class Sink(Protocol):
    """Where a crawl's results go as they happen (the CLI's output formats, or a user's own).

    The engine calls ``link`` once for each newly discovered URL, as soon as it is found
    (``kind`` is ``"internal"`` for in-scope URLs; with ``all_links`` also ``"external"`` for
    out-of-scope http(s) URLs, ``"other"`` for non-HTTP schemes and ``"invalid"`` for a value
    that does not resolve to a URL (``Link.url`` None; ``url`` is then the raw value), each
    reported once), ``page`` once a page is done, and ``close`` once at the end, even after
    cancellation.
    An exception from ``link`` or ``page`` is logged, counted in ``CrawlStats.sink_errors``
    and marks the page it was about with error ``"sink"``; the crawl goes on, nothing lost.
    """

    def link(self, url: str, referrer: str, kind: str) -> None: ...

    def page(self, page: PageResult) -> None: ...

    def close(self) -> None: ...
