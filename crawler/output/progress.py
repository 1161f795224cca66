"""Live progress line and final summary, on stderr.

stdout carries results only; everything for the human goes to stderr. The live line is
drawn only when stderr is a terminal (redrawn in place a few times a second); when stderr is
a file or a pipe, the only output is the final summary, and ``--quiet`` removes that too.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from crawler.core.results import CrawlStats

CLEAR_LINE = "\r\x1b[K"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the live line shows, read from the running crawler."""

    pages: int
    in_flight: int
    queued: int
    errors: int


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"  # pragma: no cover


class Progress:
    """Renders the live line and the summary.

    Args:
        stream: where to write (stderr).
        quiet: write nothing at all.
        live: draw the live line; default: ``stream.isatty()``.
        interval: seconds between redraws of the live line.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        quiet: bool = False,
        live: bool | None = None,
        interval: float = 0.25,
    ) -> None:
        self.stream = stream
        self.quiet = quiet
        if live is None:
            try:
                live = stream.isatty()
            except (AttributeError, ValueError, OSError):
                live = False
        self.live = live and not quiet
        self.interval = interval
        self._drawn = False
        # (time, pages) samples of the last few seconds, for a recent pages/s figure.
        self._samples: deque[tuple[float, int]] = deque()
        self._window = 5.0

    def rate(self, pages: int, now: float | None = None) -> float:
        """Pages per second over the last few seconds (0 until there are two samples)."""
        now = time.monotonic() if now is None else now
        self._samples.append((now, pages))
        while len(self._samples) > 2 and now - self._samples[0][0] > self._window:
            self._samples.popleft()
        t0, p0 = self._samples[0]
        return (pages - p0) / (now - t0) if now > t0 else 0.0

    def line(self, snap: Snapshot, now: float | None = None) -> str:
        return (
            f"pages {snap.pages} | in flight {snap.in_flight} | queued {snap.queued}"
            f" | {self.rate(snap.pages, now):.1f} pages/s | errors {snap.errors}"
        )

    def draw(self, snap: Snapshot) -> None:
        if not self.live:
            return
        self._emit(CLEAR_LINE + self.line(snap))
        self._drawn = True

    def clear(self) -> None:
        """Remove the live line (before the summary, or before other stderr output)."""
        if self._drawn:
            self._emit(CLEAR_LINE)
            self._drawn = False

    async def run(self, read: Callable[[], Snapshot]) -> None:
        """Redraw from ``read()`` every ``interval`` seconds until cancelled."""
        if not self.live:
            return
        try:
            while True:
                self.draw(read())
                await asyncio.sleep(self.interval)
        finally:
            self.clear()

    def summary(
        self,
        stats: CrawlStats,
        *,
        stopped_by: str | None = None,
        resumed: bool = False,
        repaired: int = 0,
        shared: bool = False,
    ) -> None:
        """Print the final summary: counts, rate, and errors by kind (see format_summary)."""
        self.clear()
        if self.quiet:
            return
        self._emit(
            format_summary(
                stats, stopped_by=stopped_by, resumed=resumed, repaired=repaired, shared=shared
            )
        )

    def _emit(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # stderr gone: nothing useful left to do with progress


def _seconds(t: float) -> str:
    return f"{t:.2f}s" if t < 1 else f"{t:.1f}s"


def format_summary(
    stats: CrawlStats,
    *,
    stopped_by: str | None = None,
    resumed: bool = False,
    repaired: int = 0,
    shared: bool = False,
) -> str:
    """The summary lines, e.g.::

    crawler: done in 1.2s: 20 pages (19 ok, 1 failed), 16.7 pages/s, 312.4 KB
    crawler: links: 140 found, 21 new; 1 invalid; 2 disallowed by robots.txt; 17 out of scope
    crawler: errors: http_404 1

    With ``--render auto|always`` a line ``crawler: render (auto): 3 pages rendered
    (mount_point 2, noscript 1), 7 links only their scripts made, 12 browser requests``.

    The counts are the whole crawl's, across every run of a crawl kept with ``--state``
    (pages/s is this run's); a ``resumed`` one adds ``crawler: resumed: 12 pages from
    earlier runs, 3 in flight at the last stop (fetched again)``, and ``repaired`` (bytes of
    a line cut by the last stop, removed from the output file) a line of its own. A worker
    that joined a ``shared`` (redis://) crawl says instead what was done when it joined and
    what it fetched itself: ``crawler: joined: 12 pages done before this worker joined; it
    fetched 8``.
    """
    how = f"stopped ({stopped_by})" if stopped_by else "done"
    failed = stats.pages - stats.pages_ok
    lines = [
        f"crawler: {how} in {_seconds(stats.duration)}: {stats.pages} pages"
        f" ({stats.pages_ok} ok, {failed} failed), {stats.pages_per_second:.1f} pages/s,"
        f" {human_bytes(stats.bytes)}"
    ]
    extra = f"crawler: links: {stats.links_found} found, {stats.links_new} new"
    if stats.links_invalid:
        extra += f"; {stats.links_invalid} invalid"
    if stats.links_capped:
        extra += f"; {stats.links_capped} past --max-links-per-page (not followed)"
    if stats.robots_disallowed:
        extra += f"; {stats.robots_disallowed} disallowed by robots.txt"
    if stats.out_of_scope:
        extra += f"; {stats.out_of_scope} out of scope"
    if stats.retries or stats.redirects:
        extra += f"; {stats.retries} retries, {stats.redirects} redirects"
    lines.append(extra)
    if resumed and shared:
        own = stats.pages - stats.resumed_pages
        lines.append(
            f"crawler: joined: {stats.resumed_pages} pages done before this worker joined;"
            f" it fetched {own}"
            + (
                f"; {stats.recovered} expired leases of stopped workers put back in the queue"
                if stats.recovered
                else ""
            )
        )
    elif resumed:
        recovered = stats.recovered
        lines.append(
            f"crawler: resumed: {stats.resumed_pages} pages from earlier runs, {recovered} in"
            " flight at the last stop" + (" (fetched again)" if recovered else "")
        )
    if repaired:
        lines.append(
            f"crawler: output: {repaired} bytes of a line cut at the last stop removed"
            " (its page written again)"
        )
    if stats.render:
        why = ", ".join(f"{k} {n}" for k, n in sorted(stats.render_reasons.items()))
        lines.append(
            f"crawler: render ({stats.render}): {stats.pages_rendered} pages rendered"
            + (f" ({why})" if why else "")
            + f", {stats.rendered_links} links only their scripts made,"
            f" {stats.render_requests} browser requests"
            + (
                f", {stats.render_misses} of {stats.render_reasons['sample']} sampled pages"
                " missed by the rule"
                if stats.render_reasons.get("sample")
                else ""
            )
        )
    if stats.errors:
        kinds = sorted(stats.errors.items(), key=lambda kv: (-kv[1], kv[0]))
        lines.append("crawler: errors: " + ", ".join(f"{k} {n}" for k, n in kinds))
    if stats.tls_reasons:
        reasons = sorted(stats.tls_reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        lines.append("crawler: tls: " + ", ".join(f"{k} {n}" for k, n in reasons))
    if stats.sink_errors:
        lines.append(f"crawler: output: {stats.sink_errors} sink errors (logged)")
    return "\n".join(lines) + "\n"
