"""Prometheus metrics of one crawl, served on ``http://HOST:PORT/metrics`` (``--metrics-port``).

The engine imports this module only when ``config.metrics_port`` is set: without the flag
neither it nor prometheus_client is loaded, and nothing listens.

Design: the hot path is plain Python. :meth:`Metrics.on_response` (the fetcher's observer,
once per fetch) and :meth:`Metrics.on_tally` (once per page, with the page's link counters)
add to ints and lists on this object: no lock, no label lookup, no allocation. A collector
turns them into metric families only when ``/metrics`` is scraped. Everything runs on the
crawl's event loop (the aiohttp handler too), so a scrape sees a consistent snapshot.

Each :class:`Metrics` has its own ``CollectorRegistry`` (never prometheus_client's global
one): two crawls in one process do not collide. Label values are fixed sets: error kinds and
skip reasons outside them are counted as ``other``; there is no per-host label (a broad crawl
meets millions of hosts).

The counters are this process's (a resumed or joined crawl starts them at 0), as Prometheus
expects; the crawl's whole-crawl totals are in ``crawler status``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from crawler._version import __version__
from crawler.config import ConfigError

if TYPE_CHECKING:
    from aiohttp import web

    from crawler.core.admission import Tally
    from crawler.core.results import CrawlStats
    from crawler.http.response import Response

log = logging.getLogger("crawler")

__all__ = [
    "DURATION_BUCKETS",
    "ERROR_KINDS",
    "SKIP_REASONS",
    "STATUS_CLASSES",
    "CrawlView",
    "Metrics",
    "MetricsError",
    "error_label",
]

#: Upper bounds (seconds) of crawler_fetch_duration_seconds: 1 ms to 60 s, about 2.5x apart
#: (a local server answers in a millisecond; a fetch with retries and backoff takes tens of s).
DURATION_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

#: Values of the ``status_class`` label: ``none`` is a fetch that got no response (a
#: connection error, a timeout); ``other`` a status outside 100..599.
STATUS_CLASSES: tuple[str, ...] = ("none", "1xx", "2xx", "3xx", "4xx", "5xx", "other")

#: Values of the ``kind`` label of crawler_request_errors_total: the fetcher's error kinds, an
#: HTTP error by its class (``http_404`` counts as ``http_4xx``), anything else ``other``.
ERROR_KINDS: tuple[str, ...] = (
    "dns", "connect", "timeout", "disconnected", "protocol", "decode", "too_large",
    "proxy", "archive", "tls", "http_4xx", "http_5xx", "other",
)  # fmt: skip

#: Values of the ``reason`` label of crawler_urls_skipped_total (links found, not crawled):
#: ``invalid`` (not a URL), ``out_of_scope`` (also an off-site redirect), ``robots_disallowed``.
SKIP_REASONS: tuple[str, ...] = ("invalid", "out_of_scope", "robots_disallowed")

_OTHER_STATUS = len(STATUS_CLASSES) - 1

# Error string -> label, precomputed so that the hot path is one dict lookup.
_KIND_OF: dict[str, str] = {k: k for k in ERROR_KINDS if not k.startswith("http_")}
_KIND_OF.update({f"http_{s}": f"http_{s // 100}xx" for s in range(400, 600)})


def error_label(kind: str) -> str:
    """The ``kind`` label an error string is counted under (``other`` when unknown)."""
    return _KIND_OF.get(kind, "other")


class MetricsError(ConfigError):
    """The metrics server cannot listen (the port is in use, the host is not local ...).

    A ConfigError (key ``metrics_port``), so that the command line reports it like any other
    unusable setting (exit 2); ``errno`` is the OSError's, the OSError is the ``__cause__``.
    """

    def __init__(self, reason: str, *, errno_: int | None = None) -> None:
        super().__init__(reason, key="metrics_port")
        self.errno = errno_


class CrawlView(Protocol):
    """What the gauges read from the crawl at scrape time (``crawler.Crawler`` has it)."""

    @property
    def queued(self) -> int: ...

    @property
    def in_flight(self) -> int: ...

    @property
    def stats(self) -> CrawlStats: ...


class Metrics:
    """The counters of one crawl process and the server that exposes them.

    ``on_response`` and ``on_tally`` may be called before :meth:`start` (or without it: read
    :attr:`registry` yourself); ``start`` serves ``/metrics``; ``stop`` closes the server
    (idempotent).
    """

    def __init__(self) -> None:
        self.requests = [0] * len(STATUS_CLASSES)  # by STATUS_CLASSES index
        self.errors: dict[str, int] = dict.fromkeys(ERROR_KINDS, 0)
        self.retries = 0
        self.response_bytes = 0
        self.duration_buckets = [0] * (len(DURATION_BUCKETS) + 1)  # not cumulative; last: +Inf
        self.duration_sum = 0.0
        self.links_extracted = 0
        self.urls_discovered = 0
        self.links_invalid = 0
        self.out_of_scope = 0
        self.robots_disallowed = 0
        self.redirects = 0
        self.crawler: CrawlView | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        ProcessCollector(registry=self.registry)
        self._runner: web.AppRunner | None = None
        self._interrupted = asyncio.Event()
        self.url: str | None = None  # http://host:port/metrics once started

    # -- the hot path --

    def on_response(self, res: Response) -> None:
        """Count one fetch's final response (after its retries): the fetcher's observer."""
        status = res.status
        if status is None:
            self.requests[0] += 1
        else:
            cls = status // 100
            self.requests[cls if 1 <= cls <= 5 else _OTHER_STATUS] += 1
        error = res.error
        if error is not None:
            self.errors[_KIND_OF.get(error, "other")] += 1
        self.retries += res.retries
        self.response_bytes += res.bytes
        seconds = res.elapsed_ms / 1000.0
        self.duration_buckets[bisect_left(DURATION_BUCKETS, seconds)] += 1
        self.duration_sum += seconds

    def on_tally(self, tally: Tally) -> None:
        """Add one page's link counters (the engine calls it where it adds them to its stats)."""
        self.links_extracted += tally.links_found
        self.urls_discovered += tally.links_new
        self.links_invalid += tally.links_invalid
        self.out_of_scope += tally.out_of_scope
        self.robots_disallowed += tally.robots_disallowed
        self.redirects += tally.redirects

    # -- the server --

    async def start(self, host: str, port: int, crawler: CrawlView | None = None) -> None:
        """Serve ``/metrics`` on host:port; the gauges read ``crawler`` at each scrape.

        Raises:
            MetricsError: the address cannot be bound (in use, not an address of this host).
        """
        from aiohttp import web  # noqa: PLC0415  (the engine imports this module lazily anyway)

        if self._runner is not None:
            raise RuntimeError("metrics server already started")
        self.crawler = crawler
        app = web.Application()
        app.router.add_get("/metrics", make_aiohttp_handler(self.registry))
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as exc:
            await runner.cleanup()
            why = "address already in use" if exc.errno == errno.EADDRINUSE else str(exc)
            raise MetricsError(f"cannot serve metrics on {where}: {why}", errno_=exc.errno) from exc
        self._runner = runner
        self.url = f"http://{where}/metrics"

    def interrupt(self) -> None:
        """End a linger now or skip the next one (a stop asked for: Ctrl-C, SIGTERM)."""
        self._interrupted.set()

    async def stop(self, linger: float = 0.0) -> None:
        """Close the server, after serving ``linger`` more seconds (unless interrupted), so
        that a last scrape sees the final values (a no-op when not started or stopped)."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        try:
            if linger > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._interrupted.wait(), linger)
        finally:
            try:
                await runner.cleanup()
            except Exception:  # never fail the crawl's close for it
                log.exception("stopping the metrics server failed")


class _Collector(Collector):
    """Metric families from a Metrics' plain counters, built at scrape time."""

    def __init__(self, m: Metrics) -> None:
        self.m = m

    def collect(self) -> Iterator[Metric]:
        m = self.m
        yield InfoMetricFamily("crawler", "The crawler's version.", value={"version": __version__})
        fam = CounterMetricFamily(
            "crawler_requests",
            "Fetches by the status class of their final response (after retries); none: no "
            "response.",
            labels=["status_class"],
        )
        for label, n in zip(STATUS_CLASSES, m.requests, strict=True):
            fam.add_metric([label], n)
        yield fam
        fam = CounterMetricFamily(
            "crawler_request_errors",
            "Fetches that ended in an error, by kind (HTTP errors by class).",
            labels=["kind"],
        )
        for label, n in m.errors.items():
            fam.add_metric([label], n)
        yield fam
        yield CounterMetricFamily(
            "crawler_retries", "Extra attempts made by fetches (connection faults, 429, 5xx).",
            value=m.retries,
        )  # fmt: skip
        yield CounterMetricFamily(
            "crawler_response_bytes", "Body bytes read (decompressed).", value=m.response_bytes
        )
        cumulative: list[tuple[str, float]] = []
        total = 0
        for bound, n in zip(DURATION_BUCKETS, m.duration_buckets, strict=False):
            total += n
            cumulative.append((_le(bound), total))
        total += m.duration_buckets[-1]
        cumulative.append(("+Inf", total))
        # A fetch, not a request: its retries and their backoff are in it (named so rather
        # than timing each attempt, which would need a hook inside the fetcher's retry loop).
        yield HistogramMetricFamily(
            "crawler_fetch_duration_seconds",
            "Time of one fetch, from its first request to its final response: retries and "
            "their backoff included.",
            buckets=cumulative,
            sum_value=m.duration_sum,
        )
        yield CounterMetricFamily(
            "crawler_links_extracted", "Links found in fetched pages.", value=m.links_extracted
        )
        yield CounterMetricFamily(
            "crawler_urls_discovered",
            "URLs new to the crawl (in scope, listed and, within max_depth, queued).",
            value=m.urls_discovered,
        )
        fam = CounterMetricFamily(
            "crawler_urls_skipped", "Links and redirects not crawled, by reason.",
            labels=["reason"],
        )  # fmt: skip
        for label, n in zip(
            SKIP_REASONS, (m.links_invalid, m.out_of_scope, m.robots_disallowed), strict=True
        ):
            fam.add_metric([label], n)
        yield fam
        yield CounterMetricFamily(
            "crawler_redirects", "Redirect hops followed or refused.", value=m.redirects
        )
        crawler = m.crawler
        if crawler is not None:
            stats = crawler.stats
            yield CounterMetricFamily(
                "crawler_pages",
                "Pages done by this process (fetched, failed or refused), as in the crawl's stats.",
                value=max(0, stats.pages - stats.resumed_pages),
            )
            if stats.render:
                fam = CounterMetricFamily(
                    "crawler_pages_rendered", "Pages loaded in the headless browser, by reason.",
                    labels=["reason"],
                )  # fmt: skip
                for reason, n in sorted(stats.render_reasons.items()):
                    fam.add_metric([reason], n)
                yield fam
                yield CounterMetricFamily(
                    "crawler_render_misses",
                    "Pages sampled (--render-sample) whose scripts made links the rule missed.",
                    value=stats.render_misses,
                )
            yield GaugeMetricFamily(
                "crawler_queued_urls", "URLs queued in the crawl state, waiting to be fetched.",
                value=crawler.queued,
            )  # fmt: skip
            yield GaugeMetricFamily(
                "crawler_requests_in_flight", "Pages being fetched by this process now.",
                value=crawler.in_flight,
            )  # fmt: skip


def _le(bound: float) -> str:
    # Prometheus' own client writes bucket bounds with repr-style floats ("0.005", "1.0").
    return repr(float(bound))
