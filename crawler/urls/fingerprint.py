"""The stable 64-bit URL fingerprint of a persistent crawl state.

A persistent backend (SQLite, Redis) deduplicates URLs by a 64-bit fingerprint that must be
the same in every process and every run of the crawl, which Python's ``hash(str)`` is not
(its key is random per process). This one is keyed BLAKE2b with an 8-byte digest:

* Collisions (a new URL wrongly taken as seen, so never fetched) have odds of about
  n²/2⁶⁵ for n URLs: ~3e-8 at 1M URLs, ~3e-6 at 10M.
* Keyed, with a random key made once per crawl (``new_key``) and stored with its state: a
  hostile site that does not know the key cannot craft URLs that collide with the pages it
  wants hidden, as it could against an unkeyed hash.
* Never 0: 0 marks an empty slot in ``crawler.urls.seen.MemorySeenSet``'s table.

``Fingerprinter`` and ``fingerprint`` are the compiled twins (``crawler.urls._hash_c``: BLAKE2b
written in C from RFC 7693, the key block compressed once per ``Fingerprinter``; a C-level
``fp_bytes`` in ``_hash_c.pxd`` for other compiled modules) when ``pip install`` could build
them and ``CRAWLER_NO_EXTENSIONS`` is not set, else the hashlib ones below
(``FingerprinterPy``, ``fingerprint_py``). Both give the same values (tests/test_fingerprint.py
compares them with hashlib at every key length and across the 128-byte block boundaries);
``IMPLEMENTATION`` says which is in use; ``CRAWLER_REQUIRE_EXTENSIONS=1`` makes a missing
compiled module an ImportError. Callers go through ``fingerprint`` or a ``Fingerprinter``,
never through hashlib.

Cost, on typical 60-character URLs (``python benchmarks/fingerprint.py``, CPython 3.11, this
project's shared 2-core machine at load 4-7, best of 5-7 in CPU time, figures moving with the
machine's load): the compiled ``Fingerprinter`` 240-280 ns a call (one BLAKE2b compression of
the URL's block, ~3,100 instructions with the call itself; 435-530 ns at 200 characters, two
blocks), the hashlib one 850-1010 ns (~7,800 instructions), ``fingerprint`` 800-970 ns
(compiled; it sets the key up on every call: prefer a ``Fingerprinter``), ``hash(str)`` ~65
ns. From C (``fp_bytes``, no call) ~180 ns a 60-byte URL.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from crawler._twins import NO_EXTENSIONS as NO_EXTENSIONS  # (re-exported: tests read them)
from crawler._twins import REQUIRE_EXTENSIONS as REQUIRE_EXTENSIONS
from crawler._twins import compiled

__all__ = [
    "IMPLEMENTATION",
    "KEY_BYTES",
    "Fingerprinter",
    "FingerprinterC",
    "FingerprinterPy",
    "fingerprint",
    "fingerprint_py",
    "new_key",
]

#: Length of a fingerprint key (BLAKE2b accepts up to 64).
KEY_BYTES = 16


def new_key() -> bytes:
    """A fresh random key for a new crawl (store it with the crawl's state)."""
    return os.urandom(KEY_BYTES)


def _encode(url: str) -> bytes:
    # surrogatepass: a str with a lone surrogate still gets a fingerprint instead of raising;
    # for every other str this is plain UTF-8.
    return url.encode("utf-8", "surrogatepass")


def fingerprint_py(url: str, key: bytes) -> int:
    """The fingerprint of ``url`` under ``key``: an int in [1, 2**64), the same everywhere."""
    import hashlib  # noqa: PLC0415 - only the pure-Python twin needs it (4 ms of start-up)

    digest = hashlib.blake2b(_encode(url), digest_size=8, key=key).digest()
    return int.from_bytes(digest, "little") or 1


class FingerprinterPy:
    """``fingerprint`` with the key bound, for the hot path: a third to a half faster.

    The keyed BLAKE2b state is set up once (the key costs a compression block of its own)
    and copied per call. ``Fingerprinter(key)(url) == fingerprint(url, key)``.
    """

    __slots__ = ("_base", "key")

    def __init__(self, key: bytes) -> None:
        import hashlib  # noqa: PLC0415 - only the pure-Python twin needs it (4 ms of start-up)

        self.key = bytes(key)
        self._base = hashlib.blake2b(digest_size=8, key=self.key)

    def __call__(self, url: str) -> int:
        h = self._base.copy()
        h.update(url.encode("utf-8", "surrogatepass"))
        return int.from_bytes(h.digest(), "little") or 1

    def __repr__(self) -> str:
        return "Fingerprinter(<key>)"  # the key stays out of logs


_c = (
    None
    if TYPE_CHECKING
    else compiled(
        "crawler.urls._hash_c", "Fingerprinter", "fingerprint", what="crawler.urls._hash_c"
    )
)
FingerprinterC: Any = None if _c is None else _c[0]
if TYPE_CHECKING or _c is None:
    Fingerprinter = FingerprinterPy
    fingerprint = fingerprint_py
    IMPLEMENTATION = "py"
else:  # pragma: no cover - depends on the build
    Fingerprinter = FingerprinterC
    fingerprint = _c[1]
    IMPLEMENTATION = "c"
