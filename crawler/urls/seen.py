"""The seen set: every URL a crawl ever discovered, as 64-bit fingerprints, 10-15 bytes a URL.

``MemorySeenSet`` keeps one 8-byte slot per URL in a sorted open-addressing table (an
*ordered* linear-probing table, Amble and Knuth 1974; the same layout as Robin Hood hashing
with a monotone hash):

* A fingerprint ``fp`` is stored as ``m = fp * MUL mod 2**64`` (``MUL`` odd, so this is a
  bijection that keeps 0, the empty slot, apart: sequential or otherwise regular ints spread
  too). Its home slot is ``(m * size) >> 64``, which is monotone in ``m``, and the table keeps
  its values in increasing order with no empty slot between a value's home and its slot. A
  lookup starts at the home and stops at the first slot that is empty or ``>= m``; an insert
  there shifts the rest of the run one slot right (a ``memmove``). The layout is a function
  of the set and the size alone (slot ``i`` holds ``max(home, previous slot + 1)``), whatever
  the order of the inserts, so the two twins below can be compared slot for slot.
* The table has ``size`` home slots plus a tail (``TAIL`` slots at first) that takes the runs
  pushed past the last home slot; the last slot is always kept empty (a sentinel: no scan
  runs past the end), and when an insert would fill it the tail doubles (at load 0.8 a run
  longer than 31 past the end has odds of about e**-13 a table).
* The load (URLs / home slots) is at most ``MAX_LOAD`` 0.8; past it the table grows 1.5x (a
  size that is not a power of two: the home is a multiply, not a mask), so the load stays
  between 0.53 and 0.8 and the table holds 10 to 15 bytes a URL at every size from a few
  hundred URLs up (benchmarks/seen_memory.py: 1M and 10M URLs, and just after a growth). The
  compiled twin grows in place (a realloc, then every value moved right, last to first: a
  value's slot never moves left as the size grows), so its peak is the grown table alone; the
  pure-Python one builds a new array, holding both for a moment (up to 25 bytes a URL).
* Probe lengths at load 0.8: about 3 slots for a hit and for a miss alike (a miss stops at
  the first larger value, not at an empty slot as plain linear probing, whose misses cost ~13
  slots at that load), and an insert moves about 10 slots (measured: 3.0, 3.0 and 9.8).

Measured (``python benchmarks/seen_memory.py [--urls 10000000 --only seen] [--c-level]``,
both twins alike): 14.2 B/URL at 1M URLs, 10.8 at 10M, 15.01 at the worst point (just after a
growth); peak RSS while building: compiled 14.3 at 1M and 10.8 at 10M, pure 23.5 and 17.9.
CPU from Python (shared machine at load 6-8): compiled 160-310 ns an ``add_fp`` or
``contains_fp`` (a call; at 10M a cache miss), pure 575-2,350 ns (2x the old power-of-two
table's pure-Python cost: two more big-int multiplies and the shift); from C through the
``.pxd``, ``put`` 90-135 ns, ``has`` 65-70 ns at 1M.

Exact: two URLs are confused only if their 64-bit fingerprints are equal. The URL API
(``add``, ``in``) uses Python's ``hash`` (keyed SipHash: random per process, free since a str
caches it), with odds ~n²/2⁶⁵ of a collision, ~3e-8 at a million URLs; a persistent backend
passes its own stable fingerprint (``crawler.urls.fingerprint``) to ``add_fp``/``contains_fp``. A
fingerprint is an int in [1, 2**64): ``add_fp(0)`` is a ValueError, an int outside [0, 2**64)
an OverflowError; ``contains_fp(0)`` is False.

``MemorySeenSet`` is the compiled twin (``crawler.urls._hash_c``, Cython source
``_hash_c.pyx``: the same table, slot for slot, in C, with a C-level ``has``/``put`` in
``_hash_c.pxd`` for other compiled modules) when ``pip install`` could build it and
``CRAWLER_NO_EXTENSIONS`` is not set, else the pure-Python ``MemorySeenSetPy`` below. Both are
exported (``MemorySeenSetPy``, ``MemorySeenSetC`` or None) and ``IMPLEMENTATION`` says which
one is in use; ``CRAWLER_REQUIRE_EXTENSIONS=1`` makes a missing compiled module an ImportError.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from crawler._twins import NO_EXTENSIONS as NO_EXTENSIONS  # (re-exported: tests read them)
from crawler._twins import REQUIRE_EXTENSIONS as REQUIRE_EXTENSIONS
from crawler._twins import compiled

__all__ = [
    "IMPLEMENTATION",
    "MAX_LOAD",
    "MUL",
    "MemorySeenSet",
    "MemorySeenSetC",
    "MemorySeenSetPy",
    "TAIL",
]

_MASK64 = (1 << 64) - 1
#: The odd multiplier that scatters fingerprints before they are stored (2**64 / golden ratio).
MUL = 0x9E3779B97F4A7C15
#: Slots past the last home slot, at first (the tail doubles when a run would fill it).
TAIL = 32
#: Most URLs per home slot before the table grows 1.5x.
MAX_LOAD = 0.8
_MIN_SIZE = 16


def _limit(size: int) -> int:
    return size * 4 // 5  # MAX_LOAD, in integers (the compiled twin computes the same)


def _initial_size(capacity: int) -> int:
    # the smallest size whose limit holds ``capacity`` URLs
    return max(_MIN_SIZE, (max(0, capacity) * 5 + 3) // 4)


def _zeros(n: int) -> array[int]:
    return array("Q", [0]) * n  # no n-byte temporary, unlike array("Q", bytes(8 * n))


class MemorySeenSetPy:
    """Compact in-memory seen set: 64-bit fingerprints in a sorted open-addressing table.

    Args:
        capacity: URLs it holds before its first growth.
    """

    __slots__ = ("_count", "_end", "_limit", "_size", "_table")

    def __init__(self, capacity: int = 1 << 14) -> None:
        size = _initial_size(capacity)
        self._table = _zeros(size + TAIL)
        self._end = size + TAIL - 1  # the sentinel's index
        self._size = size
        self._limit = _limit(size)
        self._count = 0

    def add(self, url: str) -> bool:
        """Add ``url`` by Python's ``hash``; True if it was new."""
        return self._put((((hash(url) & _MASK64) or 1) * MUL) & _MASK64)

    def add_fp(self, fp: int) -> bool:
        """Add a fingerprint (an int in [1, 2**64), e.g. from ``fingerprint``); True if new.

        The URL API above is this with Python's ``hash``; a persistent backend uses its own
        stable fingerprint here instead. Do not mix the two in one set.
        """
        if not 0 < fp <= _MASK64:
            raise _bad(fp)
        # _put, inlined: this is the hot path of every persistent backend
        m = (fp * MUL) & _MASK64
        table = self._table
        i = (m * self._size) >> 64
        slot = table[i]
        while slot and slot < m:
            i += 1
            slot = table[i]
        if slot == m:
            return False
        if slot:
            j = table.index(0, i)  # the empty slot that ends the run
            if j == self._end:
                self._extend()
            table[i + 1 : j + 1] = table[i:j]
        elif i == self._end:
            self._extend()
        table[i] = m
        self._count += 1
        if self._count > self._limit:
            self._grow()
        return True

    def update_fps(self, fps: Iterable[int]) -> int:
        """Add many fingerprints (loading a stored crawl); returns how many were new."""
        before = self._count
        add = self.add_fp
        for fp in fps:
            add(fp)
        return self._count - before

    def contains_fp(self, fp: int) -> bool:
        """Whether fingerprint ``fp`` was added."""
        if not 0 < fp <= _MASK64:
            if fp == 0:
                return False
            raise _bad(fp)
        m = (fp * MUL) & _MASK64
        table = self._table
        i = (m * self._size) >> 64
        slot = table[i]
        while slot and slot < m:
            i += 1
            slot = table[i]
        return slot == m

    def __contains__(self, url: object) -> bool:
        if not isinstance(url, str):
            return False
        m = (((hash(url) & _MASK64) or 1) * MUL) & _MASK64
        table = self._table
        i = (m * self._size) >> 64
        slot = table[i]
        while slot and slot < m:
            i += 1
            slot = table[i]
        return slot == m

    def __len__(self) -> int:
        return self._count

    @property
    def nbytes(self) -> int:
        """Bytes held by the table itself."""
        return self._table.itemsize * len(self._table)

    def _dump(self) -> bytes:
        """The table's slots (native byte order), to compare the twins' layouts in tests."""
        return self._table.tobytes()

    def _put(self, m: int) -> bool:
        # m: a stored (scattered) value, never 0
        table = self._table
        i = (m * self._size) >> 64
        slot = table[i]
        while slot and slot < m:
            i += 1
            slot = table[i]
        if slot == m:
            return False
        if slot:
            j = table.index(0, i)  # the empty slot that ends the run
            if j == self._end:  # the sentinel: make room first
                self._extend()
            table[i + 1 : j + 1] = table[i:j]
        elif i == self._end:
            self._extend()
        table[i] = m
        self._count += 1
        if self._count > self._limit:
            self._grow()
        return True

    def _extend(self) -> None:
        # the tail doubles (in place: the callers hold the same array)
        table = self._table
        table.extend(_zeros(len(table) - self._size))
        self._end = len(table) - 1

    def _grow(self) -> None:
        old = self._table
        size = self._size + (self._size >> 1)
        table = _zeros(size + TAIL)
        end = len(table) - 1  # the sentinel
        last = -1
        for m in filter(None, old):  # in increasing order: each at max(home, last + 1)
            i = (m * size) >> 64
            if i <= last:
                i = last + 1
            if i == end:
                table.extend(_zeros(len(table) - size))
                end = len(table) - 1
            table[i] = m
            last = i
        self._table = table
        self._end = end
        self._size = size
        self._limit = _limit(size)


def _bad(fp: int) -> Exception:
    if fp == 0:
        return ValueError("0 is not a fingerprint (they are in [1, 2**64))")
    return OverflowError(f"a fingerprint is in [1, 2**64), not {fp!r}")


_c = (
    None
    if TYPE_CHECKING
    else compiled("crawler.urls._hash_c", "MemorySeenSet", what="crawler.urls._hash_c")
)
MemorySeenSetC: Any = None if _c is None else _c[0]
if TYPE_CHECKING or MemorySeenSetC is None:
    MemorySeenSet = MemorySeenSetPy
    IMPLEMENTATION = "py"
else:  # pragma: no cover - depends on the build
    MemorySeenSet = MemorySeenSetC
    IMPLEMENTATION = "c"
