"""The checker's occurrence store: memory for a big site (slow: ``pytest -m slow``).

Run by hand for the README's figures: ``python tests/test_check_memory.py PAGES`` (100 links a
page: 20 shared navigation links, 80 to other pages of the site).
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

import pytest


def build(pages: int, links: int = 100) -> tuple[int, int, float, float]:
    """(occurrences, targets, peak RSS growth in MB, seconds) of a synthetic site."""
    from crawler.check.store import Interner, OccurrenceStore  # noqa: PLC0415

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    targets = Interner()
    store = OccurrenceStore()
    for p in range(pages):
        pid = store.page_id(f"https://www.example.org/section{p % 50}/page{p}.html")
        raws = []
        for j in range(links):
            t = (p * 7 + j * 13) % pages
            raws.append(f"/nav/item{j}.html" if j < 20 else f"/section{t % 50}/page{t}.html")
        tids = [targets.id("https://www.example.org" + raw) for raw in raws]
        lines = list(range(10, 10 + links))
        # as the checker stores them: a page's occurrences at once
        tags = [("a", "href")] * links
        store.add_page(pid, tids, lines, [5] * links, tags, raws, [False] * links)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return len(store), len(targets), (rss - rss0) / 1024, time.perf_counter() - t0


@pytest.mark.slow
def test_a_million_occurrences_in_well_under_100_mb() -> None:
    out = subprocess.run(
        [sys.executable, __file__, "10000"], capture_output=True, text=True, check=True
    ).stdout
    occurrences, _, mb, _ = out.split()
    assert int(occurrences) == 1_000_000
    assert float(mb) < 60  # ~14 bytes an occurrence + the interned strings (~35 MB here)


if __name__ == "__main__":
    n, targets, mb, seconds = build(int(sys.argv[1]))
    print(n, targets, f"{mb:.1f}", f"{seconds:.1f}")
