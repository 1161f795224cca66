"""crawler.urls.seen: the seen set's API, exactness, layout and memory, on both twins.

Every test here runs on the pure-Python ``MemorySeenSetPy`` and the compiled ``_hash_c``
twin (ids ``py`` and ``c``); tests/test_seen_hypothesis.py compares the two slot for slot.
A guard checks that the compiled twin is really in use when it was built and not switched off.
"""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import crawler.state.frontier
import crawler.urls.seen as seen
from crawler.urls.seen import MAX_LOAD, MUL, TAIL, MemorySeenSetC, MemorySeenSetPy

ROOT = Path(__file__).resolve().parent.parent  # the project root, where benchmarks/ is
HERE = Path(seen.__file__).resolve().parent  # crawler/urls, where the compiled twin is built
BUILT = any(HERE.glob("_hash_c.*.so")) or any(HERE.glob("_hash_c*.pyd"))
REQUIRED = seen.REQUIRE_EXTENSIONS and not seen.NO_EXTENSIONS
IMPLS = [pytest.param(MemorySeenSetPy, id="py")]
if MemorySeenSetC is not None or REQUIRED:
    IMPLS.append(pytest.param(MemorySeenSetC, id="c"))
MASK = (1 << 64) - 1


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> Any:
    return request.param


def slots(s: Any) -> list[int]:
    raw = s._dump()
    return [int.from_bytes(raw[i : i + 8], sys.byteorder) for i in range(0, len(raw), 8)]


def canonical(values: set[int], size: int, length: int) -> list[int]:
    # the one layout of an ordered linear-probing table: sorted, each at max(home, prev + 1)
    out = [0] * length
    last = -1
    for m in sorted(values):
        i = max((m * size) >> 64, last + 1)
        out[i] = m
        last = i
    return out


def test_compiled_seen_set_loaded_when_built() -> None:
    if os.environ.get("CRAWLER_NO_EXTENSIONS"):
        assert seen.IMPLEMENTATION == "py"
        assert seen.MemorySeenSet is MemorySeenSetPy
        return
    if not BUILT and not REQUIRED:
        pytest.skip("no compiled crawler/_hash_c (pure-Python install)")
    assert MemorySeenSetC is not None, "built but not importable"
    assert seen.IMPLEMENTATION == "c"
    assert seen.MemorySeenSet is MemorySeenSetC
    assert MemorySeenSetC.__module__ == "crawler.urls._hash_c"


def test_frontier_re_exports_the_selected_one() -> None:
    assert crawler.state.frontier.MemorySeenSet is seen.MemorySeenSet


def test_constants_are_the_same_in_both_twins() -> None:
    if MemorySeenSetC is None:
        pytest.skip("compiled twin not built")
    import crawler.urls._hash_c as c  # noqa: PLC0415 - only with the compiled twin

    assert (c.MUL, c.TAIL) == (MUL, TAIL)


def test_add_contains_and_growth(impl: Any) -> None:
    s = impl(capacity=4)
    urls = [f"http://example.com/page/{i}" for i in range(50_000)]
    assert all(s.add(u) for u in urls)
    assert len(s) == 50_000
    assert not any(s.add(u) for u in urls)
    assert all(u in s for u in urls)
    assert "http://example.com/other" not in s
    assert 3 not in s and b"http://example.com/page/1" not in s
    assert s.nbytes <= 16 * 50_000


def test_fingerprint_api_with_regular_ints(impl: Any) -> None:
    # extremes, small ints (all at home 0 without the scattering) and multiples of MUL
    s = impl(capacity=4)
    fps = [1, MASK, 2**63, 17, 17 + 16, 17 + 32] + [i * MUL % 2**64 or 1 for i in range(1, 30_000)]
    fps += list(range(1, 5000)) + [MASK - i for i in range(5000)]
    before: set[int] = set()
    for fp in fps:
        assert s.add_fp(fp) is (fp not in before)  # duplicates: False
        before.add(fp)
    assert len(s) == len(set(fps))
    assert all(s.contains_fp(fp) for fp in fps)
    assert not s.contains_fp(5001) and not s.contains_fp(MASK - 5000)
    assert s.nbytes <= 16 * len(s)


def test_layout_is_the_sorted_canonical_one(impl: Any) -> None:
    # whatever the order of the inserts: sorted, each value at max(home, previous + 1), with
    # the size following the load rule (grow 1.5x past 4/5) and the last slot empty
    rng = random.Random(7)
    s = impl(capacity=0)
    stored: set[int] = set()
    size = 16
    for n in range(3000):
        fp = rng.choice([rng.randrange(1, 2**64), rng.randrange(1, 100), MASK - rng.randrange(99)])
        assert s.add_fp(fp) is (fp * MUL % 2**64 not in stored)
        if fp * MUL % 2**64 not in stored:
            stored.add(fp * MUL % 2**64)
            if len(stored) > size * 4 // 5:
                size += size // 2
        if n % 97 == 0 or n == 2999:
            table = slots(s)
            assert len(table) >= size + TAIL
            assert table == canonical(stored, size, len(table)), n
            assert table[-1] == 0
    assert len(stored) <= MAX_LOAD * size


def test_update_fps_counts_the_new_ones(impl: Any) -> None:
    s = impl()
    assert s.update_fps(range(1, 1001)) == 1000
    assert s.update_fps(range(500, 1501)) == 500
    assert s.update_fps(iter([])) == 0
    assert len(s) == 1500
    assert s.contains_fp(1500) and not s.contains_fp(1501)


def test_bad_fingerprints(impl: Any) -> None:
    s = impl()
    with pytest.raises(ValueError):
        s.add_fp(0)
    for bad in (-1, 2**64, 2**70):
        with pytest.raises(OverflowError):
            s.add_fp(bad)
        with pytest.raises(OverflowError):
            s.contains_fp(bad)
    with pytest.raises(ValueError):
        s.update_fps([3, 0])
    assert not s.contains_fp(0)
    assert len(s) == 1 and s.contains_fp(3)  # what came before the bad one stays
    with pytest.raises(TypeError):
        s.add_fp("1")


def test_capacity_sets_the_first_size(impl: Any) -> None:
    s = impl(capacity=100_000)
    empty = s.nbytes
    assert empty == 8 * (125_000 + TAIL)
    for i in range(1, 100_001):
        s.add_fp(i)
    assert s.nbytes == empty  # no growth up to its capacity
    s.add_fp(100_001)
    assert s.nbytes == 8 * (187_500 + TAIL)
    assert impl(capacity=-5).nbytes == impl(capacity=0).nbytes == 8 * (16 + TAIL)


@pytest.mark.parametrize("n", [1_000, 20_000, 100_000])
def test_at_most_16_bytes_a_url_even_just_after_a_growth(impl: Any, n: int) -> None:
    s = impl(capacity=16)
    worst = 0.0
    for i in range(1, n + 1):
        before = s.nbytes
        s.add_fp(i * 0x2545F4914F6CDD1D % 2**64)
        if s.nbytes != before and i > 300:
            worst = max(worst, s.nbytes / i)
    assert worst <= 16.0
    assert 8 / MAX_LOAD <= s.nbytes / n <= 16.0


def test_tracemalloc_sees_the_table(impl: Any) -> None:
    # the compiled twin allocates with PyMem_Raw*, so the benchmark's figures are comparable
    n = 20_000
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    s = impl()
    for i in range(n):
        s.add(f"https://www.example.com/section-{i % 89}/story-{i}.html?ref=home")
    size = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert len(s) == n
    assert s.nbytes <= size <= s.nbytes + 4096
    assert size / n <= 16


def test_extended_tail_keeps_the_set_exact(impl: Any) -> None:
    # values whose homes are all the last slot: the tail must grow (doubling), not loop
    s = impl(capacity=0)
    inv = pow(MUL, -1, 2**64)
    fps = [((MASK - i) * inv) % 2**64 for i in range(200)]  # stored as MASK - i
    assert all(s.add_fp(fp) for fp in fps)
    assert all(s.contains_fp(fp) for fp in fps)
    table = slots(s)
    assert table[-1] == 0
    assert sorted(v for v in table if v) == sorted(MASK - i for i in range(200))


_BREAK_C = """
import importlib.abc, sys
class Broken(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "crawler.urls._hash_c":
            raise ImportError("simulated: undefined symbol PyFoo")
sys.meta_path.insert(0, Broken())
import crawler.urls.seen as s, crawler.urls.fingerprint as f
print(s.IMPLEMENTATION, f.IMPLEMENTATION)
"""


@pytest.mark.parametrize(
    ("env", "ok", "expect"),
    [
        ({}, True, "py py"),
        ({"CRAWLER_REQUIRE_EXTENSIONS": "1"}, False, "simulated: undefined symbol PyFoo"),
        ({"CRAWLER_REQUIRE_EXTENSIONS": "1", "CRAWLER_NO_EXTENSIONS": "1"}, True, "py py"),
    ],
)
def test_require_extensions_makes_a_broken_module_fatal(
    env: dict[str, str], ok: bool, expect: str
) -> None:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CRAWLER_REQUIRE_EXTENSIONS", "CRAWLER_NO_EXTENSIONS")
    }
    proc = subprocess.run(
        [sys.executable, "-c", _BREAK_C],
        env=clean | env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode == 0) is ok, proc.stderr
    assert expect in (proc.stdout if ok else proc.stderr)
    if not ok:
        assert "ImportError: CRAWLER_REQUIRE_EXTENSIONS is set" in proc.stderr


def test_the_memory_benchmark_runs_and_stays_under_16_bytes() -> None:
    proc = subprocess.run(
        [sys.executable, "benchmarks/seen_memory.py", "--urls", "20000", "--only", "seen"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rows = [line for line in proc.stdout.splitlines() if "B/URL" in line and "MiB" in line]
    names = [name for name, cls in (("C", MemorySeenSetC), ("py", MemorySeenSetPy)) if cls]
    assert len(rows) == len(names), proc.stdout
    for row in rows:
        per_url = float(row.split("B/URL")[0].split()[-1])
        worst = float(row.split("worst")[1].split()[0])
        assert 8 / MAX_LOAD <= per_url <= 16 and worst <= 16, row
    assert proc.stdout.count("ns/op") == len(names)
