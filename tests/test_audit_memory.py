"""The audit's report over a large graph in bounded memory: ``build_report`` (the graph walk,
the findings, their places) holds a few machine integers a page beside the crawl's own state,
not dicts keyed by URL (at a million pages those were the audit's largest part after the
crawl's: benchmarks/AUDIT.md). The graph is built as the crawl records it (the checker's
occurrence columns, targets, verdicts and page facts), without a server: what is measured
is the report alone.
"""

from __future__ import annotations

import asyncio
import ctypes
import subprocess
import sys
import tracemalloc
from collections import deque

import pytest

from crawler.audit.analysis import build_report
from crawler.audit.auditor import Auditor, PageFacts
from crawler.audit.model import AuditReport, summary_line
from crawler.check.probe import Verdict
from crawler.config import CrawlConfig

pytestmark = pytest.mark.timeout(120)
BASE = "http://127.0.0.1:9/p/"


def _site(pages: int, max_click_depth: int) -> tuple[Auditor, dict[int, list[int]]]:
    """An auditor as a finished crawl leaves it: page i links pages 10i+1..10i+10 (those
    that exist) and i+1..i+3 (mod ``pages``), a line each; page 5's links are recorded in two
    runs (page 6's between them), the second one holding the only link to the last page."""
    auditor = Auditor(CrawlConfig(seeds=(f"{BASE}0",)), max_click_depth=max_click_depth)
    store, targets = auditor.store, auditor.targets
    last = pages - 1
    links: dict[int, list[int]] = {}
    for i in range(last):
        out = [c for c in range(10 * i + 1, 10 * i + 11) if c < last]
        links[i] = out + [(i + k) % last for k in (1, 2, 3)]
    links[last] = [0]
    for i in range(pages):
        url = f"{BASE}{i}"
        targets.id(url)
        auditor.facts[url] = PageFacts()
        auditor.verdicts[url] = Verdict(url, status=200, html=True, crawled=True)

    def record(page: int, linked: list[int], first_line: int) -> None:
        urls = [f"{BASE}{j}" for j in linked]
        store.add_page(
            store.page_id(f"{BASE}{page}"),
            [targets.id(u) for u in urls],
            list(range(first_line, first_line + len(urls))),
            [1] * len(urls),
            [("a", "href")] * len(urls),
            urls,
            [False] * len(urls),
        )

    for i in range(pages):
        if i == 5:
            record(5, links[5], 1)
            record(6, links[6], 1)
            record(5, [last], 100)
        elif i != 6:
            record(i, links[i], 1)
    links[5].append(last)
    return auditor, links


def _depths(links: dict[int, list[int]]) -> dict[int, int]:
    depth = {0: 0}
    queue = deque([0])
    while queue:
        page = queue.popleft()
        for nxt in links[page]:
            if nxt not in depth:
                depth[nxt] = depth[page] + 1
                queue.append(nxt)
    return depth


def test_report_of_a_graph_with_a_page_in_two_runs() -> None:
    auditor, links = _site(2000, max_click_depth=3)
    report = build_report(auditor)
    depth = _depths(links)
    expected: dict[str, int] = {}
    for d in depth.values():
        expected[str(d)] = expected.get(str(d), 0) + 1
    assert report.stats.depth == expected
    assert report.stats.edges == sum(len(set(v)) for v in links.values())
    found = {(f.kind, f.url): f for f in report.findings}
    # the last page: linked only from page 5's second run, at line 100
    only = found[("single_inlink", f"{BASE}1999")]
    assert [(p.page, p.line, p.raw) for p in only.places] == [(f"{BASE}5", 100, f"{BASE}1999")]
    deep = {url for kind, url in found if kind == "deep_page"}
    assert deep == {f"{BASE}{i}" for i, d in depth.items() if d > 3}
    assert deep  # the site has pages deeper than 3 clicks
    for url in deep:
        inlinks = {p.page for p in found[("deep_page", url)].places}
        page = int(url.rpartition("/")[2])
        assert inlinks == {f"{BASE}{i}" for i, out in links.items() if page in out}


def test_report_memory_is_a_few_integers_a_page() -> None:
    pages = 30_000
    auditor, _ = _site(pages, max_click_depth=100)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        report = build_report(auditor)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert report.stats.pages == pages
    assert not any(f.kind == "deep_page" for f in report.findings)
    # the walk's arrays and its transient sets: ~75 bytes a page (the dicts and Counters
    # keyed by page URL it held before: ~575)
    assert peak / pages < 150, f"{peak / pages:.0f} bytes a page"


def test_the_reports_repr_is_its_summary_not_every_place() -> None:
    report = build_report(_site(3000, max_click_depth=1)[0])
    places = sum(len(f.places) for f in report.findings)
    assert places > 5000  # deep pages, each with the links to it
    text = repr(report)
    assert summary_line(report) in text
    assert len(text) < 300


def test_asyncio_run_of_an_audit_does_not_make_its_report_into_text() -> None:
    # asyncio's Runner reprs the finished task's result when it puts SIGINT's handler back
    # (as `crawler audit` runs): the report's repr was the command's peak memory
    report = build_report(_site(3000, max_click_depth=1)[0])
    full = sum(len(repr(f)) for f in report.findings)  # what a field-by-field repr makes

    async def audit() -> AuditReport:
        return report

    tracemalloc.start()
    try:
        asyncio.run(audit())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert full > 1_000_000
    assert peak < full / 4, f"{peak:,} bytes at the peak, the findings' text {full:,}"


_MAPPED = """
import ctypes, sys
from crawler.audit.auditor import MMAP_THRESHOLD, steady_malloc
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
steady = sys.argv[1] == "steady" and steady_malloc()
big = bytearray(16 * MMAP_THRESHOLD)  # freed: glibc's own rule raises its threshold to it
del big
before = libc.mallinfo2().hblks
block = bytearray(2 * MMAP_THRESHOLD)
mapped = libc.mallinfo2().hblks - before
del block
print(steady, mapped, libc.mallinfo2().hblks - before)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "mallinfo2"),
    reason="glibc's malloc (mallinfo2) only",
)
def test_after_steady_malloc_a_large_block_is_mapped_apart_even_after_a_larger_one() -> None:
    # each in a new process (a heap of its own): glibc's rule, then the audit's
    def run(mode: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", _MAPPED, mode], capture_output=True, text=True, check=True
        )
        return done.stdout.split()

    assert run("default") == ["False", "0", "0"]  # in the heap
    assert run("steady") == ["True", "1", "0"]  # mapped apart, and given back when freed


def test_the_places_of_one_raw_value_share_its_string() -> None:
    # the raw values are kept as bytes (compiled): a select decodes each one once, and its
    # places share it as they shared the interned string (80,000 places on rustdoc)
    from crawler.check.store import OccurrenceStore  # noqa: PLC0415

    store = OccurrenceStore()
    for page in range(50):
        store.add_page(store.page_id(f"{BASE}{page}"), [7, 8], [1, 2], [1, 1], [("a", "href")] * 2,
                       ["../same.html", f"../{page}.html"], [False, False])  # fmt: skip
    places = store.select({7: 0, 8: 1})
    same = places[0]
    assert len(same) == 50 and {p.raw for p in same} == {"../same.html"}
    assert len({id(p.raw) for p in same}) == 1
    assert len({id(p.attr) for p in same + places[1]}) == 1
    assert [p.raw for p in places[1]] == [f"../{page}.html" for page in range(50)]
