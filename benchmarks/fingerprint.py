"""ns per call of crawler.fingerprint on typical URLs, beside Python's hash(str).

    python benchmarks/fingerprint.py [--urls 100000] [--repeat 7]

Typical URLs: ~60 characters (``https://www.example.com/section-N/story-N.html?ref=home``).
``hash`` is measured on fresh strings (a str caches its hash: a second call is free).
Best of --repeat; the machine is shared, so read the figures as a range.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.fingerprint import Fingerprinter, fingerprint, new_key  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    key = new_key()
    f = Fingerprinter(key)

    def urls() -> list[str]:
        return [
            f"https://www.example.com/section-{i % 89}/story-{i}.html?ref=home"
            for i in range(args.urls)
        ]

    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for name in ("fingerprint(url, key)", "Fingerprinter(key)(url)", "hash(url)"):
            batch = urls()
            t = time.perf_counter()
            if name == "hash(url)":
                for u in batch:
                    hash(u)
            elif name == "fingerprint(url, key)":
                for u in batch:
                    fingerprint(u, key)
            else:
                for u in batch:
                    f(u)
            dt = (time.perf_counter() - t) / len(batch) * 1e9
            best[name] = min(best.get(name, dt), dt)
    mean_len = sum(map(len, urls())) / args.urls
    print(f"{args.urls:,} URLs of {mean_len:.0f} characters, best of {args.repeat}")
    for name, ns in best.items():
        print(f"{name:24} {ns:7.0f} ns/call")


if __name__ == "__main__":
    main()
