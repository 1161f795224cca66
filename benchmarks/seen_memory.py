#!/usr/bin/env python3
"""Bytes per URL of the seen set at N URLs, both twins, against the obvious alternatives.

    python benchmarks/seen_memory.py                      # 1,000,000 URLs, every structure
    python benchmarks/seen_memory.py --urls 10000000 --only seen   # 10M: the two twins only

Memory is what tracemalloc sees allocated by the structure and kept alive by it (the URL
strings count for the set of strings, since it keeps them; the fingerprint structures let them
go; the compiled twin allocates through ``PyMem_RawCalloc``, which tracemalloc traces). For
the two ``MemorySeenSet`` twins it also prints:

* ``worst``: the most bytes a URL right after a growth (the emptiest the table gets) past the
  first 1,000 URLs, from ``nbytes``; ``peak``: tracemalloc's peak during the build, when the
  old table and the new one are both held for a moment;
* the peak RSS (``VmHWM``) of a fresh process that builds it from fingerprints, against its
  RSS before: what the kernel saw, growth included (Linux only);
* the CPU cost of each operation from Python, on N pre-made fingerprints (not under
  tracemalloc): ``add_fp`` of a new one and of a known one, ``contains_fp`` hit and miss,
  and ``add(url)``/``url in`` on fresh strings (their str hash included);
* with ``--c-level``, the same from C through ``_hash_c.pxd`` (``put``/``has``, what a
  compiled caller pays; it compiles a small probe module with cython and gcc).

Build times under tracemalloc are slower than without it; the per-operation table is the one
to read. The machine is shared: the figures move with its load (printed).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import random
import subprocess
import sys
import time
import tracemalloc
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.urls.seen import MemorySeenSetC, MemorySeenSetPy  # noqa: E402

TWINS: list[tuple[str, Any]] = [("MemorySeenSet py", MemorySeenSetPy)]
if MemorySeenSetC is not None:
    TWINS.insert(0, ("MemorySeenSet C", MemorySeenSetC))


def urls(n: int, start: int = 0) -> Iterator[str]:
    """Realistic, distinct URLs of 60-90 characters."""
    for i in range(start, start + n):
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
    return array("Q", sorted((hash(u) & 0xFFFF_FFFF_FFFF_FFFF) for u in urls(n)))


class Growth:
    """Builds a seen set of the first n URLs, noting the bytes a URL just after each growth."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls
        self.worst = 0.0

    def __call__(self, n: int) -> object:
        s = self.cls()
        add = s.add
        nbytes = s.nbytes
        for i, u in enumerate(urls(n), 1):
            add(u)
            if s.nbytes != nbytes:
                nbytes = s.nbytes
                if i > 1000:
                    self.worst = max(self.worst, nbytes / i)
        return s


def measure(name: str, build: Callable[[int], object], n: int) -> None:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    t0 = time.process_time()
    obj = build(n)
    built = time.process_time() - t0
    gc.collect()
    size, peak = tracemalloc.get_traced_memory()
    size -= base
    peak -= base
    tracemalloc.stop()
    extra = ""
    if isinstance(build, Growth):
        extra = f"  worst {build.worst:5.2f} B/URL  peak {peak / n:5.1f} B/URL"
    print(
        f"{name:22} {size / n:7.2f} B/URL {size / 2**20:9.1f} MiB"
        f"  build {built / n * 1e6:5.2f} us/URL (traced){extra}",
        flush=True,
    )
    del obj


_RSS_CHILD = """
import random, sys
from crawler.urls.seen import MemorySeenSetC, MemorySeenSetPy
def vm(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
cls = MemorySeenSetC if sys.argv[1] == "c" else MemorySeenSetPy
n = int(sys.argv[2])
rng = random.Random(1)
base = vm("VmRSS:")
s = cls()
add = s.add_fp
for _ in range(n):
    add(rng.getrandbits(64) or 1)
print(vm("VmHWM:") - base, vm("VmRSS:") - base, s.nbytes)
"""


def rss(name: str, which: str, n: int) -> None:
    # peak RSS of a fresh process that builds the set (fingerprints made one by one, kept
    # nowhere): what the kernel saw, growth transients included, beyond tracemalloc's view
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, which, str(n)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout.split()
    peak, final, nbytes = map(int, out)
    print(
        f"{name:22} RSS peak {peak / n:5.2f} B/URL  at the end {final / n:5.2f}"
        f"  (nbytes {nbytes / n:5.2f})",
        flush=True,
    )


# --c-level: what a compiled caller (the link intake) pays, through _hash_c.pxd's has/put,
# on fingerprints made in C (splitmix64), the generator's own cost printed to subtract.
_PROBE = """
# cython: language_level=3, boundscheck=False, wraparound=False
from crawler.urls._hash_c cimport MemorySeenSet
from libc.stdint cimport uint64_t
from libc.time cimport clock, CLOCKS_PER_SEC

cdef inline uint64_t splitmix(uint64_t* x) noexcept:
    x[0] += 0x9E3779B97F4A7C15ULL
    cdef uint64_t z = x[0]
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)

def put_has(MemorySeenSet s, Py_ssize_t n):
    cdef uint64_t x
    cdef Py_ssize_t i, hits = 0, sink = 0
    cdef double t0
    out = []
    for phase in range(5):  # put new, put known, has hit, has miss, the generator alone
        x = 12345678901 if phase == 3 else 1
        t0 = clock()
        for i in range(n):
            if phase < 2:
                s.put(splitmix(&x) | 1)
            elif phase < 4:
                hits += s.has(splitmix(&x) | 1)
            else:
                sink += <Py_ssize_t>(splitmix(&x) & 1)
        out.append((clock() - t0) / CLOCKS_PER_SEC / n * 1e9)
    return out, hits, sink
"""


def c_level(n: int) -> None:
    import sysconfig  # noqa: PLC0415 - only for --c-level
    import tempfile  # noqa: PLC0415

    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        pyx = Path(tmp, "seen_probe.pyx")
        pyx.write_text(_PROBE)
        so = Path(tmp, "seen_probe" + sysconfig.get_config_var("EXT_SUFFIX"))
        subprocess.run(["cython", "-3", "-I", str(root), str(pyx)], check=True)
        include = sysconfig.get_paths()["include"]
        cmd = ["gcc", "-shared", "-fPIC", "-O2", f"-I{include}", str(pyx.with_suffix(".c"))]
        subprocess.run([*cmd, "-o", str(so)], check=True)
        sys.path.insert(0, tmp)
        import seen_probe  # type: ignore[import-not-found]  # noqa: PLC0415

        (new, known, hit, miss, gen), hits, _ = seen_probe.put_has(MemorySeenSetC(), n)
    print(
        f"{'C-level (.pxd)':22} put new {new - gen:4.0f}  put known {known - gen:4.0f}"
        f"  has hit {hit - gen:4.0f}  has miss {miss - gen:4.0f}  ns/op"
        f" (generator {gen:.1f} ns subtracted; {hits - n} of the misses hit)"
    )


def _each(fn: Callable[[Any], object], items: list[Any]) -> None:
    for x in items:
        fn(x)


def per_op(name: str, cls: Any, n: int) -> None:
    rng = random.Random(1)
    fps = [rng.randrange(1, 2**64) for _ in range(n)]
    others = [rng.randrange(1, 2**64) for _ in range(min(n, 1_000_000))]
    s = cls()
    cost: dict[str, float] = {}

    def timed(label: str, fn: Callable[[Any], object], items: list[Any]) -> None:
        gc.collect()
        t0 = time.process_time()
        _each(fn, items)
        cost[label] = (time.process_time() - t0) / len(items) * 1e9

    timed("add_fp new", s.add_fp, fps)
    timed("add_fp known", s.add_fp, fps)
    timed("contains_fp hit", s.contains_fp, fps)
    timed("contains_fp miss", s.contains_fp, others)
    del s, fps, others
    k = min(n, 1_000_000)
    u = cls()
    timed("add(url) new", u.add, list(urls(k)))
    timed("url in, hit", u.__contains__, list(urls(k)))  # fresh strings: no cached hash
    print(f"{name:22} " + "  ".join(f"{k} {v:4.0f}" for k, v in cost.items()) + "  ns/op")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", "-n", type=int, default=1_000_000)
    ap.add_argument(
        "--only", choices=["all", "seen"], default="all", help="seen: the two twins only"
    )
    ap.add_argument(
        "--c-level", action="store_true", help="also time has/put from C (needs cython, gcc)"
    )
    args = ap.parse_args()
    n = args.urls
    avg = sum(len(u) for u in urls(10_000)) / 10_000
    print(
        f"{n:,} URLs, average length {avg:.0f} characters, Python {sys.version.split()[0]},"
        f" load average {os.getloadavg()[0]:.1f}"
    )
    print("-- memory (tracemalloc)")
    if args.only == "all":
        measure("set of str", set_of_str, n)
        measure("set of blake2b ints", set_of_blake2b_int, n)
    for name, cls in TWINS:
        measure(name, Growth(cls), n)
    if args.only == "all":
        measure("sorted array('Q')", sorted_array, n)
    if sys.platform == "linux":
        print("-- peak RSS of a process building it from fingerprints (/proc/self/status)")
        for name, cls in TWINS:
            rss(name, "c" if cls is MemorySeenSetC else "py", n)
    print("-- CPU ns per operation from Python (no tracemalloc)")
    for name, cls in TWINS:
        per_op(name, cls, n)
    if args.c_level and MemorySeenSetC is not None:
        c_level(n)


if __name__ == "__main__":
    main()
