"""Per-link bookkeeping costs of the engine, in isolation (cited in benchmarks/CRAWL.md).

    python benchmarks/crawl/link_costs.py

2.08 million lookups (what the 20,000-page benchmark site produces: ~104 links a page, all
but 20,000 of them already seen) of 20,000 site-like URLs, through ``MemorySeenSet.add``,
a plain ``set`` of hashes for comparison, and ``UrlPolicy.canonical_resolved``. CPU time.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from crawler.state.frontier import MemorySeenSet  # noqa: E402
from crawler.urls.policy import UrlPolicy  # noqa: E402


def main() -> None:
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    urls = [f"http://127.0.0.1:8080/news/{i}-some-slug-words-here.html" for i in range(20_000)]
    rng = random.Random(1)
    stream = [urls[rng.randrange(len(urls))] for _ in range(2_080_000)]
    n = len(stream)

    seen = MemorySeenSet()
    t = time.process_time()
    for u in stream:
        seen.add(u)
    a = time.process_time() - t

    plain: set[int] = set()
    t = time.process_time()
    for u in stream:
        h = hash(u)
        if h not in plain:
            plain.add(h)
    b = time.process_time() - t

    canonical = UrlPolicy(("http://127.0.0.1:8080/",)).canonical_resolved
    t = time.process_time()
    for u in stream:
        canonical(u)
    c = time.process_time() - t

    print(f"MemorySeenSet.add:     {a:.2f} s for {n} calls ({a / n * 1e9:.0f} ns each)")
    print(f"set of hashes:         {b:.2f} s ({b / n * 1e9:.0f} ns each)")
    print(f"canonical_resolved:    {c:.2f} s ({c / n * 1e9:.0f} ns each)")


if __name__ == "__main__":
    main()
