"""Extraction benchmark: bytes in, absolute URLs out, side by side.

Every pipeline does the same work on each page of the corpus: find the ``a``/``area`` href and
``frame``/``iframe`` src values and turn them into absolute URLs without fragment, against the
page URL. Pipelines:

* ``crawler py``         this project's pure-Python streaming extractor (``LinkExtractorPy``),
  whole page, then fed in 1 KiB chunks as the fetcher feeds it,
* ``crawler c``          the compiled twin (``LinkExtractorC``) the same two ways, when built,
* ``html.parser``        stdlib ``HTMLParser`` (text decoded as UTF-8) + ``urljoin``/``urldefrag``,
* ``lxml``               ``lxml.html.fromstring`` + ``iter()`` + ``urljoin``/``urldefrag``,
* ``selectolax``         Lexbor (``LexborHTMLParser``) + CSS selectors + ``urljoin``/``urldefrag``.

Two floors run on the same bytes in the same run, doing no extraction at all: ``bytes.count(b"<")``
and a compiled ``memchr`` loop counting ``<`` (``_extract_c.memchr_count``, when built): one pass
over the data, the physical limit for anything that must look at every byte.

Also printed: URL resolution timed on its own (the values the extractor resolved, resolved
again with our resolver, with Ada alone and with ``urljoin``) and its share of the extractor's
time, and pathological documents fed in 1 KiB chunks next to a normal document of that size
(among them deep svg/math nesting with end tags that match nothing: linear since issue 13).

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
from typing import Any
from urllib.parse import urldefrag, urljoin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lxml.html  # noqa: E402
from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from crawler.extract import LinkExtractorC, LinkExtractorPy, _machine  # noqa: E402

memchr_count: Any = None
if LinkExtractorC is not None:
    from crawler.extract._extract_c import memchr_count  # type: ignore[import-not-found,no-redef]  # noqa: E402
from crawler.extract._resolve import Resolver, full_resolve  # noqa: E402

BASE = "https://example.org/dir/page.html"
TAGS = {"a": "href", "area": "href", "frame": "src", "iframe": "src"}


def _whole(cls: Any) -> Callable[[bytes], list[str]]:
    def run(data: bytes) -> list[str]:
        ex = cls(BASE)
        return [link.url for link in ex.feed(data) + ex.close()]

    return run


def _chunked(cls: Any) -> Callable[[bytes], list[str]]:
    def run(data: bytes) -> list[str]:
        ex = cls(BASE)
        out = []
        for i in range(0, len(data), 1024):
            out += ex.feed(data[i : i + 1024])
        out += ex.close()
        return [link.url for link in out]

    return run


run_crawler = _whole(LinkExtractorPy)


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
    print(f"corpus: {len(pages)} pages, {total / 1e6:.1f} MB")
    pipelines: list[tuple[str, Callable[[bytes], list[str]]]] = [
        ("crawler py", run_crawler),
        ("crawler py 1KB chunks", _chunked(LinkExtractorPy)),
        ("html.parser+urljoin", run_htmlparser),
        ("lxml+urljoin", run_lxml),
        ("selectolax+urljoin", run_selectolax),
    ]
    if LinkExtractorC is not None:  # the compiled twin, when built
        pipelines[2:2] = [
            ("crawler c", _whole(LinkExtractorC)),
            ("crawler c 1KB chunks", _chunked(LinkExtractorC)),
        ]
    results = {}
    for name, fn in pipelines:
        results[name] = best_of(lambda fn=fn: sum(len(fn(p)) for p in pages), repeat)
    # The floors: one pass over the same bytes, no extraction (the count is of '<', not links).
    floors: dict[str, Callable[[], int]] = {
        "floor: bytes.count('<')": lambda: sum(p.count(b"<") for p in pages)
    }
    if memchr_count is not None:
        floors["floor: memchr loop (C)"] = lambda: sum(memchr_count(p) for p in pages)
    for name, count in floors.items():
        results[name] = best_of(count, repeat)
    ref = results["html.parser+urljoin"][0]
    lex = results["selectolax+urljoin"][0]
    print(
        f"{'pipeline':<24}{'MB/s':>9}{'links/s':>12}{'links':>9}{'vs html.parser':>16}"
        f"{'vs selectolax':>15}"
    )
    for name, (t, n) in results.items():
        if name.startswith("floor"):
            mbs = total / t / 1e6
            print(f"{name:<24}{mbs:>9.1f}{'-':>12}{'-':>9}{ref / t:>15.1f}x{lex / t:>14.1f}x")
            continue
        print(
            f"{name:<24}{total / t / 1e6:>9.1f}{n / t:>12,.0f}{n:>9}{ref / t:>15.1f}x"
            f"{lex / t:>14.1f}x"
        )
    if "crawler c" in results:
        t_c = results["crawler c"][0]
        for name in floors:
            print(f"crawler c runs at {results[name][0] / t_c:.0%} of the speed of {name[7:]}")

    resolution_bench(pages, results["crawler py"][0], repeat)


def resolution_bench(pages: list[bytes], t_extract: float, repeat: int) -> None:
    """Time the URL resolution of the extractor on its own: the raw values it resolved, page
    by page, with a fresh resolver per page (as in extraction, cache included)."""
    per_page: list[list[str]] = []

    class _Recorder(Resolver):
        def resolve(self, raw: str) -> str | None:
            per_page[-1].append(raw)
            return super().resolve(raw)

    saved = _machine.Resolver
    _machine.Resolver = _Recorder  # type: ignore[misc]
    try:
        for p in pages:
            per_page.append([])
            run_crawler(p)
    finally:
        _machine.Resolver = saved  # type: ignore[misc]
    n = sum(map(len, per_page))

    def ours() -> int:
        for raws in per_page:
            resolve = Resolver(BASE).resolve
            for raw in raws:
                resolve(raw)
        return n

    def ada_only() -> int:
        for raws in per_page:
            for raw in raws:
                full_resolve(BASE, raw)
        return n

    def stdlib() -> int:
        for raws in per_page:
            for raw in raws:
                urldefrag(urljoin(BASE, raw.strip()))
        return n

    t_ours, _ = best_of(ours, repeat)
    t_ada, _ = best_of(ada_only, repeat)
    t_std, _ = best_of(stdlib, repeat)
    print(
        f"URL resolution: {n} values; fast path + cache {t_ours / n * 1e6:.2f} us/value "
        f"({t_ours / t_extract:.0%} of the extractor's time), ada.join_url only "
        f"{t_ada / n * 1e6:.2f} us/value, urljoin+urldefrag {t_std / n * 1e6:.2f} us/value"
    )


def pathological(size: int) -> dict[str, bytes]:
    return {
        "unterminated comment": b"<!--" + b"a-b-c--d " * (size // 9),
        "unterminated attr value": b"<a href='" + b"x&amp;y<>= " * (size // 11),
        "unclosed <script>": b"<script>" + b"if (a<b) x='</scrip'+'t>'; " * (size // 27),
        f"'<' x {size:,}": b"<" * size,
        "endless tag attributes": b"<a " + b"x=1 y='2' " * (size // 10),
        # Foreign content: the open-element stack of svg/math, deep and unmatched.
        "<svg>, 1,023 runs, </x> x N": b"<svg>" + b"<g><h>" * 512 + b"</x>" * (size // 4),
        "<svg><g> x N (no </g>)": b"<svg>" + b"<g>" * (size // 3),
        "<math><mi><svg> x N, </p> x N": (b"<math><mi><svg>" * (size // 30))
        + b"</p>" * (size // 8),
    }


def normal_page(pages: list[bytes], size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        for p in pages:
            out += p
            if len(out) >= size:
                break
    return bytes(out[:size])


def feed_1k(data: bytes, cls: Any = LinkExtractorPy) -> int:
    ex = cls(BASE, "utf-8")
    n = 0
    for i in range(0, len(data), 1024):
        n += len(ex.feed(data[i : i + 1024]))
    return n + len(ex.close())


def pathological_bench(pages: list[bytes], size: int) -> None:
    impls: dict[str, Any] = {"py": LinkExtractorPy}
    if LinkExtractorC is not None:
        impls["c"] = LinkExtractorC
    print(f"\npathological inputs, {size / 1e6:.0f} MB each, fed in 1 KiB chunks")
    print(f"{'input':<28}{'impl':>5}{'seconds':>9}{'MB/s':>9}{'links':>8}")
    docs = {"normal page (corpus)": normal_page(pages, size)} | pathological(size)
    for name, data in docs.items():
        for impl, cls in impls.items():
            t, n = best_of(lambda data=data, cls=cls: feed_1k(data, cls), 1)
            print(f"{name:<28}{impl:>5}{t:>9.2f}{len(data) / t / 1e6:>9.1f}{n:>8}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--corpus",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "corpus" / "pages"),
        help="folder of *.html pages (default: ../shared/corpus/pages beside the project)",
    )
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
