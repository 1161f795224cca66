#!/usr/bin/env python3
"""Bytes per URL of the seen set at N URLs: MemorySeenSet against the obvious alternatives.

    python benchmarks/seen_memory.py            # 1,000,000 URLs
    python benchmarks/seen_memory.py -n 200000

Memory is what tracemalloc sees allocated by the structure and kept alive by it (the URL
strings count for the set of strings, since it keeps them; the fingerprint structures let them
go). Also prints the time to add every URL once and to look every URL up again.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys
import time
import tracemalloc
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.frontier import MemorySeenSet  # noqa: E402


def urls(n: int) -> Iterator[str]:
    """Realistic, distinct URLs of 60-90 characters."""
    for i in range(n):
        yield (
            f"https://www.site{i % 997}.example.com/section-{i % 89}/"
            f"articles/{i // 1000}/story-{i}.html?ref=home&page={i % 7}"
        )


def set_of_str(n: int) -> object:
    s: set[str] = set()
    for u in urls(n):
        s.add(u)
    return s


def set_of_blake2b_int(n: int) -> object:
    s: set[int] = set()
    for u in urls(n):
        s.add(int.from_bytes(hashlib.blake2b(u.encode(), digest_size=8).digest(), "little"))
    return s


def sorted_array(n: int) -> object:
    # the floor for 8-byte fingerprints: no empty slots (but O(n) inserts; built in one go here)
    a = array("Q", sorted((hash(u) & 0xFFFF_FFFF_FFFF_FFFF) for u in urls(n)))
    return a


def memory_seen_set(n: int) -> object:
    s = MemorySeenSet()
    for u in urls(n):
        s.add(u)
    return s


def measure(name: str, build: Callable[[int], object], n: int) -> None:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    obj = build(n)
    built = time.perf_counter() - t0
    gc.collect()
    size = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    lookup = ""
    if isinstance(obj, (set, MemorySeenSet)) and name != "set of blake2b ints":
        t0 = time.perf_counter()
        hits = sum(1 for u in urls(n) if u in obj)
        lookup = f"{(time.perf_counter() - t0) / n * 1e6:6.2f} us/lookup ({hits} hits)"
    print(
        f"{name:24} {size / n:8.1f} bytes/URL  {size / 2**20:8.1f} MiB  "
        f"build {built / n * 1e6:5.2f} us/URL  {lookup}"
    )
    del obj


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=1_000_000)
    n = ap.parse_args().n
    avg = sum(len(u) for u in urls(10_000)) / 10_000
    print(f"{n} URLs, average length {avg:.0f} characters, Python {sys.version.split()[0]}")
    measure("set of str", set_of_str, n)
    measure("set of blake2b ints", set_of_blake2b_int, n)
    measure("MemorySeenSet", memory_seen_set, n)
    measure("sorted array('Q')", sorted_array, n)


if __name__ == "__main__":
    main()
