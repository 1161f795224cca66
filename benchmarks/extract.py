"""Extraction benchmark: bytes in, absolute URLs out, side by side.

Every pipeline does the same work on each page of the corpus: find the ``a``/``area`` href and
``frame``/``iframe`` src values and turn them into absolute URLs without fragment, against the
page URL. Pipelines:

* ``crawler``            this project's streaming extractor (``crawler.extract``), whole page,
* ``crawler 1KB chunks`` the same fed in 1 KiB chunks, as the fetcher feeds it,
* ``html.parser``        stdlib ``HTMLParser`` (text decoded as UTF-8) + ``urljoin``/``urldefrag``,
* ``lxml``               ``lxml.html.fromstring`` + ``iter()`` + ``urljoin``/``urldefrag``,
* ``selectolax``         Lexbor (``LexborHTMLParser``) + CSS selectors + ``urljoin``/``urldefrag``.

Also printed: the share of the extractor's time spent resolving URLs (the run is repeated with
a resolver that returns the raw value), and pathological documents fed in 1 KiB chunks next to
a normal document of the same size.

Usage::

    python benchmarks/extract.py                 # corpus + pathological inputs at 8 MB
    python benchmarks/extract.py --full          # pathological inputs at 50 MB
    python benchmarks/extract.py --corpus DIR --repeat 5
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lxml.html  # noqa: E402
from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from crawler.extract import IMPLEMENTATION, LinkExtractor, _machine, extract_links  # noqa: E402

BASE = "https://example.org/dir/page.html"
TAGS = {"a": "href", "area": "href", "frame": "src", "iframe": "src"}


def run_crawler(data: bytes) -> list[str]:
    return [link.url for link in extract_links(data, BASE)]


def run_crawler_chunked(data: bytes) -> list[str]:
    ex = LinkExtractor(BASE)
    out = []
    for i in range(0, len(data), 1024):
        out += ex.feed(data[i : i + 1024])
    out += ex.close()
    return [link.url for link in out]


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        want = TAGS.get(tag)
        if want is None:
            return
        for name, value in attrs:
            if name == want and value is not None:
                self.urls.append(urldefrag(urljoin(BASE, value.strip()))[0])
                break


def run_htmlparser(data: bytes) -> list[str]:
    p = _Collector()
    p.feed(data.decode("utf-8", "replace"))
    p.close()
    return p.urls


def run_lxml(data: bytes) -> list[str]:
    try:
        doc = lxml.html.fromstring(data)
    except Exception:  # lxml refuses some inputs (empty documents)
        return []
    out = []
    for el in doc.iter("a", "area", "frame", "iframe"):
        value = el.get(TAGS[el.tag])
        if value is not None:
            out.append(urldefrag(urljoin(BASE, value.strip()))[0])
    return out


def run_selectolax(data: bytes) -> list[str]:
    tree = LexborHTMLParser(data)
    out = []
    for node in tree.css("a[href], area[href], frame[src], iframe[src]"):
        value = node.attributes.get(TAGS[node.tag])
        if value is not None:
            out.append(urldefrag(urljoin(BASE, value.strip()))[0])
    return out


def best_of(fn: Callable[[], int], repeat: int) -> tuple[float, int]:
    best = float("inf")
    n = 0
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        n = fn()
        best = min(best, time.perf_counter() - t0)
    return best, n


def corpus_bench(pages: list[bytes], repeat: int) -> None:
    total = sum(map(len, pages))
    print(f"corpus: {len(pages)} pages, {total / 1e6:.1f} MB; extractor: {IMPLEMENTATION}")
    pipelines: list[tuple[str, Callable[[bytes], list[str]]]] = [
        ("crawler", run_crawler),
        ("crawler 1KB chunks", run_crawler_chunked),
        ("html.parser+urljoin", run_htmlparser),
        ("lxml+urljoin", run_lxml),
        ("selectolax+urljoin", run_selectolax),
    ]
    results = {}
    for name, fn in pipelines:
        results[name] = best_of(lambda fn=fn: sum(len(fn(p)) for p in pages), repeat)
    ref = results["html.parser+urljoin"][0]
    print(f"{'pipeline':<22}{'MB/s':>9}{'links/s':>12}{'links':>9}{'vs html.parser':>16}")
    for name, (t, n) in results.items():
        print(f"{name:<22}{total / t / 1e6:>9.1f}{n / t:>12,.0f}{n:>9}{ref / t:>15.1f}x")

    # Share of the extractor's time spent resolving URLs.
    class _Raw:
        valid = True

        def __init__(self, base: str) -> None:
            self.base = base

        def resolve(self, raw: str) -> str:
            return raw

    saved = _machine.Resolver
    _machine.Resolver = _Raw  # type: ignore[misc,assignment]
    try:
        t_raw, _ = best_of(lambda: sum(len(run_crawler(p)) for p in pages), repeat)
    finally:
        _machine.Resolver = saved  # type: ignore[misc]
    t_full = results["crawler"][0]
    print(
        f"URL resolution: {max(0.0, t_full - t_raw) / t_full:.0%} of the extractor's time "
        f"({t_full * 1e3:.0f} ms with, {t_raw * 1e3:.0f} ms without)"
    )


def pathological(size: int) -> dict[str, bytes]:
    return {
        "unterminated comment": b"<!--" + b"a-b-c--d " * (size // 9),
        "unterminated attr value": b"<a href='" + b"x&amp;y<>= " * (size // 11),
        "unclosed <script>": b"<script>" + b"if (a<b) x='</scrip'+'t>'; " * (size // 27),
        "ten million '<' (scaled)": b"<" * size,
        "endless tag attributes": b"<a " + b"x=1 y='2' " * (size // 10),
    }


def normal_page(pages: list[bytes], size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        for p in pages:
            out += p
            if len(out) >= size:
                break
    return bytes(out[:size])


def feed_1k(data: bytes) -> int:
    ex = LinkExtractor(BASE, "utf-8")
    n = 0
    for i in range(0, len(data), 1024):
        n += len(ex.feed(data[i : i + 1024]))
    return n + len(ex.close())


def pathological_bench(pages: list[bytes], size: int) -> None:
    print(f"\npathological inputs, {size / 1e6:.0f} MB each, fed in 1 KiB chunks")
    print(f"{'input':<28}{'seconds':>9}{'MB/s':>9}{'links':>8}")
    docs = {"normal page (corpus)": normal_page(pages, size)} | pathological(size)
    for name, data in docs.items():
        t, n = best_of(lambda data=data: feed_1k(data), 1)
        print(f"{name:<28}{t:>9.2f}{len(data) / t / 1e6:>9.1f}{n:>8}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="/work/shared/corpus/pages", help="folder of *.html pages")
    ap.add_argument("--repeat", type=int, default=3, help="runs per pipeline (best is kept)")
    ap.add_argument("--size", type=float, default=8, help="pathological input size in MB")
    ap.add_argument("--full", action="store_true", help="pathological inputs at 50 MB")
    ap.add_argument("--skip-pathological", action="store_true")
    args = ap.parse_args()
    pages = [p.read_bytes() for p in sorted(Path(args.corpus).glob("*.html"))]
    if not pages:
        sys.exit(f"no pages in {args.corpus}")
    corpus_bench(pages, args.repeat)
    if not args.skip_pathological:
        pathological_bench(pages, int((50 if args.full else args.size) * 1_000_000))


if __name__ == "__main__":
    main()
