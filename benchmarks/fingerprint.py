"""ns per call of the URL fingerprint, both twins and hashlib side by side, beside hash(str).

    python benchmarks/fingerprint.py [--urls 100000] [--repeat 7] [--length 60]

Typical URLs: ~60 characters (``https://www.example.com/section-N/story-N.html?ref=home``),
or padded to ``--length`` characters (200 crosses a 128-byte BLAKE2b block). Measured:

* ``Fingerprinter C``: the compiled twin (``crawler.urls._hash_c``, BLAKE2b in C), per call;
* ``Fingerprinter py``: the pure-Python twin (hashlib's blake2b copied from a keyed state);
* ``hashlib one-shot``: ``blake2b(url.encode(), digest_size=8, key=key)`` as a caller would
  write it without either (the key block compressed on every call);
* ``fingerprint(url, key)``: the module function of the selected implementation;
* ``hash(url)``: Python's SipHash, on fresh strings (a str caches its hash: a second call
  is free).

Best of --repeat of CPU time (``process_time``): the machine is shared, so read the figures
as a range.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.urls.fingerprint import (  # noqa: E402
    IMPLEMENTATION,
    FingerprinterC,
    FingerprinterPy,
    fingerprint,
    new_key,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--length", type=int, default=0, help="pad every URL to this length")
    args = ap.parse_args()
    key = new_key()

    def urls() -> list[str]:
        out = [
            f"https://www.example.com/section-{i % 89}/story-{i}.html?ref=home"
            for i in range(args.urls)
        ]
        if args.length:
            out = [(u + "&x=" + "y" * args.length)[: args.length] for u in out]
        return out

    def hashlib_one_shot(u: str) -> int:
        d = hashlib.blake2b(u.encode("utf-8", "surrogatepass"), digest_size=8, key=key)
        return int.from_bytes(d.digest(), "little") or 1

    cases: dict[str, Callable[[str], object]] = {}
    if FingerprinterC is not None:
        cases["Fingerprinter C"] = FingerprinterC(key)
    cases["Fingerprinter py"] = FingerprinterPy(key)
    cases["hashlib one-shot"] = hashlib_one_shot
    cases[f"fingerprint ({IMPLEMENTATION})"] = lambda u: fingerprint(u, key)
    cases["hash(url)"] = hash

    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, f in cases.items():
            batch = urls()  # fresh strings: no cached hash
            t = time.process_time()
            for u in batch:
                f(u)
            dt = (time.process_time() - t) / len(batch) * 1e9
            best[name] = min(best.get(name, dt), dt)
    sample = urls()
    mean_len = sum(map(len, sample)) / len(sample)
    print(f"{args.urls:,} URLs of {mean_len:.0f} characters, best of {args.repeat} (CPU time)")
    for name, ns in best.items():
        print(f"{name:24} {ns:7.0f} ns/call")


if __name__ == "__main__":
    main()
