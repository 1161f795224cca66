"""Extraction benchmark: bytes in, absolute URLs out, ours against selectolax + ada-url.

Every pipeline does the same work on each page: bytes in, the absolute URLs (fragment dropped)
of the page's navigational links out (``a``/``area`` href, ``frame``/``iframe`` src, meta
refresh; the first ``<base href>`` applies), in document order; values that do not resolve are
left out. Two page sets, side by side in one run:

* the **link-sparse corpus**: real pages (``../shared/corpus/pages``, ~200 links a page in
  ~200 KB), resolved against one page URL;
* **link-dense pages**: ~40 KB pages with ~175 links each in every relative form (root- and
  path-relative, ``../``, ``./``, dot segments in the middle, ``//host/``, query-only,
  fragment-only, ASCII percent-escapes, mixed case and default ports) and absolute links to
  ~300 other hosts (`dense_pages`; BS's generator for the crawl benchmark when present).

Pipelines:

* ``crawler c`` / ``crawler py``: this project's compiled and pure-Python extractors, whole
  page, then fed in 1 KiB chunks as the fetcher feeds them;
* ``selectolax+ada``: Lexbor (``LexborHTMLParser``), one CSS selector list in document order,
  ``node.attrs``, and ada-url called the fastest correct way found: its cffi functions directly
  (``ada_parse_with_base`` with the base encoded once, ``ada_get_href``, ``ada_free``) behind a
  per-page cache of the values already resolved (a page repeats its links; ours caches too);
* ``selectolax+ada.join_url``: the same with ada-url's public ``join_url`` (3x the cost a link);
* with ``--more-peers``: selectolax, lxml and html.parser with ``urljoin``/``urldefrag``;
* the crawl's path, beside them: ``c intake: new URLs out`` (``LinkExtractorC(url,
  intake=IntakeC(policy))``: the compiled extractor hands the compiled intake its links from
  its own buffers, canonical URLs the intake does not know come out), ``c links -> c intake``
  (Links, then ``IntakeC.take``) and ``py links -> py intake`` (both pure twins); one intake
  for a page set, each page's new URLs marked known after it, as admission does. Their
  output is not the list above (canonical, each URL once), so their ratio is the crawl's.

Figures are CPU seconds (``time.process_time``), best of ``--repeat``: the machine is shared.
Printed: MB/s, us a page, us a link, and each pipeline's speed as a multiple of the fastest
selectolax+ada variant (the bar of issue 9: ours at least 4x on both page sets). Then whether
the lists agree page by page (ours compiled against the peer), with the first differences.

Also (``--resolution``, ``--pathological``): URL resolution timed on its own, and pathological
documents fed in 1 KiB chunks beside a normal document of that size, each against the floor
of issue 25 (pure twin 2 MB/s, compiled 20 MB/s; ``--pathological-only``: that table alone,
exit status 1 when an input is under it).

Usage::

    python benchmarks/extract.py                    # corpus + 300 dense pages, best of 3
    python benchmarks/extract.py --dense 1000 --repeat 5 --more-peers
    python benchmarks/extract.py --pathological --size 50
    python benchmarks/extract.py --pathological-only --repeat 3   # the floor: py 2, c 20 MB/s
    python benchmarks/extract.py --corpus DIR --dense 3 --repeat 1   # a quick check
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import random
import sys
import time
from collections.abc import Callable, Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ada_url  # noqa: E402
from ada_url._ada_wrapper import ffi as _ada_ffi  # type: ignore[import-not-found]  # noqa: E402
from ada_url._ada_wrapper import lib as _ada_lib  # noqa: E402
from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from crawler.extract import LinkExtractorC, LinkExtractorPy, _machine  # noqa: E402
from crawler.extract._html import refresh_url  # noqa: E402
from crawler.extract._resolve import Resolver, full_resolve  # noqa: E402
from crawler.urls.intake import IntakeC, IntakePy  # noqa: E402
from crawler.urls.policy import UrlPolicy  # noqa: E402

memchr_count: Any = None
if LinkExtractorC is not None:
    from crawler.extract._extract_c import memchr_count  # noqa: E402

BASE = "https://example.org/dir/page.html"
TAGS = {"a": "href", "area": "href", "frame": "src", "iframe": "src"}
SELECTOR = "a[href], area[href], frame[src], iframe[src], meta[http-equiv][content]"
CHUNK = 1024

Page = tuple[str, bytes]  # (page URL, bytes)
Pipeline = Callable[[str, bytes], list[str]]


# The link-dense pages ----------------------------------------------------------------------

DENSE_HOST = "http://127.0.0.1:8080"
OTHER_HOSTS = 300
_WORDS = (
    "the crawler reads every page of the site and follows each link it finds there once "
    "resolution of relative references against the base URL of the document is standard "
    "work and a fast parser spends most of its time between the tags on plain text"
).split()


def _dense_path(rng: random.Random, n: int) -> tuple[int, str]:
    m = rng.randrange(n)
    return m, f"/s{m % 10}/d{m % 7}/p{m}.html"


def _dense_hrefs(i: int, n: int, rng: random.Random) -> list[str]:
    """About 175 hrefs of page i: every common relative form, ~60 to other hosts."""
    hrefs: list[str] = []
    # Navigation and footer: the same root-relative links on every page (repeats on a site).
    hrefs += [f"/s{k}/index.html" for k in range(10)]
    hrefs += [f"/s{k % 10}/d{k % 7}/p{k}.html" for k in range(min(n, 20))]
    for _ in range(75):  # same-host links in every relative form
        form = rng.randrange(15)
        if form in (3, 4):  # a page in this page's directory
            m = i % 70 + 70 * rng.randrange(max(1, n // 70))
            m = m if m < n else i
            path = f"/s{m % 10}/d{m % 7}/p{m}.html"
        else:
            m, path = _dense_path(rng, n)
        sec, d = f"s{m % 10}", f"d{m % 7}"
        if form == 0:
            hrefs.append(path)
        elif form == 1:
            hrefs.append(f"../{d}/p{m}.html")
        elif form == 2:
            hrefs.append(f"../../{sec}/{d}/p{m}.html")
        elif form == 3:
            hrefs.append(f"./p{m}.html")
        elif form == 4:
            hrefs.append(f"p{m}.html")
        elif form == 5:
            hrefs.append(f"/{sec}/./x/../{d}/p{m}.html")
        elif form == 6:
            hrefs.append(f"//127.0.0.1:8080{path}")
        elif form == 7:
            hrefs.append(f"{DENSE_HOST}{path}")
        elif form == 8:
            hrefs.append(f"{path}#sec{rng.randrange(9)}")
        elif form == 9:
            hrefs.append(f"{path}?page={rng.randrange(5)}&amp;sort=asc")
        elif form == 10:
            hrefs.append(f"?page={rng.randrange(5)}")
        elif form == 11:
            hrefs.append(f"#sec{rng.randrange(20)}")
        elif form == 12:
            hrefs.append(f"/%7E{sec}/{d}/%7ep{m}.html")
        elif form == 13:
            hrefs.append(f" {path} ")
        else:
            hrefs.append(f"/{sec}/{d}/a/../p{m}.html")
    for _ in range(60):  # absolute links to other hosts (out of scope for a crawler)
        h = rng.randrange(OTHER_HOSTS)
        form = rng.randrange(6)
        if form == 0:
            hrefs.append(f"https://host{h}.example/")
        elif form == 1:
            hrefs.append(f"https://host{h}.example/doc/{rng.randrange(99)}.html")
        elif form == 2:
            hrefs.append(f"http://www.host{h}.example/a/b/?q={rng.randrange(99)}")
        elif form == 3:
            hrefs.append(f"//cdn.host{h}.example/lib/x{rng.randrange(9)}.html")
        elif form == 4:
            hrefs.append(f"HTTPS://Host{h}.Example:443/Path/To/Page#top")
        else:
            hrefs.append(f"https://host{h}.example/docs/../api/v{rng.randrange(3)}/")
    hrefs += ["#", "", "mailto:team@example.org", "javascript:void(0)"]
    hrefs += [f"?page={k}" for k in range(1, 6)]
    return hrefs


def dense_page(i: int, n: int, seed: int = 1) -> bytes:
    """Page i of an n-page link-dense site: ~40 KB, ~175 links (deterministic per seed)."""
    rng = random.Random(seed * 1_000_003 + i)
    out = [
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>",
        f"<title>Page {i}</title><link rel=stylesheet href=/static/site.css>",
        f"<script>var page = {{id: {i}, next: '<a href=\"/not/a/link\">'}};</script>",
        "</head><body><div class=page><nav class=top><ul>",
    ]
    hrefs = _dense_hrefs(i, n, rng)
    body_at = 30  # the navigation, then the body's links among text
    for k, href in enumerate(hrefs):
        if k < body_at:
            out.append(f'<li class="nav-item"><a class="nav-link" href="{href}">Item {k}</a></li>')
            if k == body_at - 1:
                out.append("</ul></nav><main id=content>")
            continue
        if k % 12 == 0:
            out.append(f'<h2 id="sec{k // 12}">Section {k // 12}</h2>\n<!-- section {k} -->')
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(10, 34)))
        rel = ' rel="nofollow"' if k % 17 == 0 else ""
        title = f' title="Go to {k}"' if k % 3 == 0 else ""
        out.append(
            f"<p class=\"text\">{words} <a href='{href}'{rel}{title}>link {k}</a> "
            f"<span class=note>{words[:60]}</span></p>\n"
        )
    out.append('<img src="/static/logo.png" alt="logo"><iframe src="/embed/map.html"></iframe>')
    out.append("</main><footer><p>&copy; 2026 example</p></footer></div></body></html>\n")
    return "".join(out).encode()


def _load_bs_dense() -> Any:
    """BS's generator module (benchmarks/crawl/sitegen_dense.py: ``dense_page(i, n, seed)``
    and ``dense_url(i, n, seed)``), or None when it is not there."""
    crawl = Path(__file__).resolve().parent / "crawl"
    path = crawl / "sitegen_dense.py"
    if not path.exists():
        return None
    if str(crawl) not in sys.path:
        sys.path.insert(0, str(crawl))  # it imports its sibling textgen
    spec = importlib.util.spec_from_file_location("extractbench_sitegen_dense", path)
    if spec is None or spec.loader is None:
        return None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up by name
    spec.loader.exec_module(mod)
    return mod if callable(getattr(mod, "dense_page", None)) else None


def dense_pages(
    k: int, n: int = 2000, seed: int = 1, source: str = "auto"
) -> tuple[str, list[Page]]:
    """k pages (evenly spaced) of an n-page link-dense site with their URLs, from BS's
    generator (``bs``) or ours (``own``); ``auto``: BS's when it is there."""
    mod = _load_bs_dense() if source in ("auto", "bs") else None
    if mod is None and source == "bs":
        sys.exit("benchmarks/crawl/sitegen_dense.py with dense_page(i, n, seed) is not there")
    which = sorted({j * n // k for j in range(k)}) if k < n else list(range(n))
    if mod is None:
        return "extract.dense_page", [
            (f"{DENSE_HOST}/s{i % 10}/d{i % 7}/p{i}.html", dense_page(i, n, seed)) for i in which
        ]
    return "crawl/sitegen_dense.py", [
        (mod.dense_url(i, n, seed), mod.dense_page(i, n, seed)) for i in which
    ]


# Ours ----------------------------------------------------------------------------------------


def _ours_whole(cls: Any) -> Pipeline:
    def run(url: str, data: bytes) -> list[str]:
        ex = cls(url)
        return [u for u, *_ in ex.feed(data) + ex.close() if u is not None]

    return run


def _ours_chunked(cls: Any, size: int = CHUNK) -> Pipeline:
    def run(url: str, data: bytes) -> list[str]:
        ex = cls(url)
        out = []
        for i in range(0, len(data), size):
            out += ex.feed(data[i : i + size])
        out += ex.close()
        return [u for u, *_ in out if u is not None]

    return run


# selectolax + ada-url --------------------------------------------------------------------

_parse_with_base = _ada_lib.ada_parse_with_base
_parse = _ada_lib.ada_parse
_is_valid = _ada_lib.ada_is_valid
_get_href = _ada_lib.ada_get_href
_free = _ada_lib.ada_free
_unpack = _ada_ffi.unpack


def ada_resolver(base: str) -> Callable[[str], str | None]:
    """The fastest correct ada-url resolution found: cffi calls, base encoded once, a cache.

    (``join_url`` encodes the base, wraps the result in ``ffi.gc`` and copies it through
    ``ffi.buffer`` on every call; ``URL(raw, base)`` adds attribute dispatch; ``parse_url``
    builds a dict of every component.) Returns the URL without fragment, or None."""
    bb = base.encode()
    bl = len(bb)
    cache: dict[str, str | None] = {}
    get = cache.get

    def resolve(raw: str) -> str | None:
        r = get(raw, "")
        if r != "":
            return r
        b = raw.encode("utf-8", "surrogatepass")
        u = _parse_with_base(b, len(b), bb, bl)
        if _is_valid(u):
            s = _get_href(u)
            r = _unpack(s.data, s.length).decode()
            h = r.find("#")
            if h >= 0:
                r = r[:h]
        else:
            r = None
        _free(u)
        cache[raw] = r
        return r

    return resolve


def _join_resolver(base: str) -> Callable[[str], str | None]:
    def resolve(raw: str) -> str | None:
        try:
            r = ada_url.join_url(base, raw)
        except ValueError:
            return None
        h = r.find("#")
        return r if h < 0 else r[:h]

    return resolve


def _base_of(tree: LexborHTMLParser, url: str, make: Callable[[str], Any]) -> Any:
    """The resolver of the document: its first ``<base href>`` (resolved against the URL of the
    page; data: and javascript: ignored), else the page URL."""
    resolve = make(url)
    node = tree.css_first("base[href]")
    if node is not None:
        b = resolve(node.attrs.get("href") or "")
        if b is not None and not b.startswith(("data:", "javascript:")):
            return make(b)
    return resolve


def _selectolax_ada(make: Callable[[str], Callable[[str], str | None]]) -> Pipeline:
    def run(url: str, data: bytes) -> list[str]:
        tree = LexborHTMLParser(data)
        resolve = _base_of(tree, url, make)
        out = []
        for node in tree.css(SELECTOR):
            tag = node.tag
            attrs = node.attrs
            if tag == "meta":
                if (attrs.get("http-equiv") or "").lower() != "refresh":
                    continue
                raw = refresh_url(attrs.get("content") or "")
                if raw is None:
                    continue
            else:
                raw = attrs.get(TAGS[tag])  # type: ignore[index]
                if raw is None:
                    continue
            u = resolve(raw)
            if u is not None:
                out.append(u)
        return out

    return run


run_selectolax_ada = _selectolax_ada(ada_resolver)


# The older peers (--more-peers) ---------------------------------------------------------------


def _join(base: str, value: str) -> str:
    return urldefrag(urljoin(base, value.strip()))[0]


class _Collector(HTMLParser):
    def __init__(self, base: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = base
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        want = TAGS.get(tag)
        if want is None:
            return
        for name, value in attrs:
            if name == want and value is not None:
                self.urls.append(_join(self.base, value))
                break


def run_htmlparser(url: str, data: bytes) -> list[str]:
    p = _Collector(url)
    p.feed(data.decode("utf-8", "replace"))
    p.close()
    return p.urls


def run_lxml(url: str, data: bytes) -> list[str]:
    import lxml.html  # type: ignore[import-untyped]  # noqa: PLC0415 (only with --more-peers)

    try:
        doc = lxml.html.fromstring(data)
    except Exception:  # lxml refuses some inputs (empty documents)
        return []
    out = []
    for el in doc.iter("a", "area", "frame", "iframe"):
        value = el.get(TAGS[el.tag])
        if value is not None:
            out.append(_join(url, value))
    return out


def run_selectolax_urljoin(url: str, data: bytes) -> list[str]:
    out = []
    for node in LexborHTMLParser(data).css("a[href], area[href], frame[src], iframe[src]"):
        value = node.attrs.get(TAGS[node.tag])  # type: ignore[index]
        if value is not None:
            out.append(_join(url, value))
    return out


# Timing ---------------------------------------------------------------------------------------


def best_of(fn: Callable[[], int], repeat: int) -> tuple[float, int]:
    """The least CPU time of ``repeat`` runs, and what the last run returned."""
    best = float("inf")
    n = 0
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        n = fn()
        best = min(best, time.process_time() - t0)
    return max(best, 1e-9), n


def pipelines(more_peers: bool) -> list[tuple[str, Pipeline]]:
    out: list[tuple[str, Pipeline]] = []
    if LinkExtractorC is not None:  # the compiled twin, when built
        out += [
            ("crawler c", _ours_whole(LinkExtractorC)),
            ("crawler c 1KiB chunks", _ours_chunked(LinkExtractorC)),
        ]
    out += [
        ("crawler py", _ours_whole(LinkExtractorPy)),
        ("crawler py 1KiB chunks", _ours_chunked(LinkExtractorPy)),
        ("selectolax+ada", run_selectolax_ada),
        ("selectolax+ada.join_url", _selectolax_ada(_join_resolver)),
    ]
    if more_peers:
        out += [
            ("selectolax+urljoin", run_selectolax_urljoin),
            ("lxml+urljoin", run_lxml),
            ("html.parser+urljoin", run_htmlparser),
        ]
    return out


IntakeRun = Callable[[Any, str, bytes], list[Any]]


def intake_pipelines() -> list[tuple[str, Any, IntakeRun]]:
    """The crawl's link path (``crawler.urls.intake``): bytes in, the canonical URLs the intake
    does not know yet out, one intake for the whole page set, each page's new URLs marked
    known after it (as admission does: a repeat comes out once). Not the same output as the
    rows above (fewer URLs, canonical), so its ratio is the crawl's, not a like-for-like one.
    (name, intake class, run(intake, url, data) -> items)."""

    def direct(it: Any, url: str, data: bytes) -> list[Any]:
        ex = LinkExtractorC(url, intake=it)
        return ex.feed(data) + ex.close()  # type: ignore[no-any-return]

    def links(cls: Any) -> IntakeRun:
        def run(it: Any, url: str, data: bytes) -> list[Any]:
            ex = cls(url)
            return it.take(ex.feed(data) + ex.close())  # type: ignore[no-any-return]

        return run

    out: list[tuple[str, Any, IntakeRun]] = []
    if IntakeC is not None and LinkExtractorC is not None:
        out += [
            ("c intake: new URLs out", IntakeC, direct),
            ("c links -> c intake", IntakeC, links(LinkExtractorC)),
        ]
    out.append(("py links -> py intake", IntakePy, links(LinkExtractorPy)))
    return out


def bench_set(
    title: str, pages: Sequence[Page], repeat: int, more_peers: bool
) -> dict[str, tuple[float, int]]:
    """Time every pipeline on one page set and print the table; returns {name: (s, links)}."""
    total = sum(len(d) for _, d in pages)
    results: dict[str, tuple[float, int]] = {}
    for name, fn in pipelines(more_peers):

        def work(fn: Pipeline = fn) -> int:
            return sum(len(fn(u, d)) for u, d in pages)

        results[name] = best_of(work, repeat)
    origin = "/".join(pages[0][0].split("/")[:3]) + "/"
    policy = UrlPolicy([origin])  # the page set's site as the crawl's seed
    for name, cls, run in intake_pipelines():

        def crawl(cls: Any = cls, run: IntakeRun = run) -> int:
            it = cls(policy)
            n = 0
            for u, d in pages:
                new = [x for x in run(it, u, d) if type(x) is str]
                it.mark_many(new)  # what admission does with them: known from now on
                n += len(new)
            return n

        results[name] = best_of(crawl, repeat)
    peer = min(t for name, (t, _) in results.items() if name.startswith("selectolax+ada"))
    links = results["selectolax+ada"][1]
    print(
        f"\n{title}: {len(pages)} pages, {total / 1e6:.1f} MB, {links:,} links "
        f"({links / len(pages):.0f} a page, {total / max(links, 1):,.0f} bytes a link)"
    )
    print(
        f"{'pipeline':<26}{'MB/s':>8}{'us/page':>10}{'us/link':>9}{'URLs out':>9}"
        f"{'x selectolax+ada':>18}"
    )
    for name, (t, n) in results.items():
        if name == "c intake: new URLs out":
            print("the crawl's path: one intake for the set, the URLs it does not know out")
        print(
            f"{name:<26}{total / t / 1e6:>8.1f}{t / len(pages) * 1e6:>10.1f}"
            f"{t / max(links, 1) * 1e6:>9.2f}{n:>9}{peer / t:>17.2f}x"
        )
    floors: dict[str, Callable[[], int]] = {
        "floor: bytes.count('<')": lambda: sum(d.count(b"<") for _, d in pages)
    }
    if memchr_count is not None:
        floors["floor: memchr loop (C)"] = lambda: sum(memchr_count(d) for _, d in pages)
    for name, count in floors.items():
        t, _ = best_of(count, repeat)
        print(f"{name:<26}{total / t / 1e6:>8.1f}{t / len(pages) * 1e6:>10.1f}")
    return results


def agreement(
    title: str,
    pages: Sequence[Page],
    ours: Pipeline,
    peer: Pipeline,
    names: Sequence[str] | None = None,
    show: int = 5,
) -> tuple[int, int]:
    """Compare the two lists page by page; print the pages that differ (first ``show`` in
    detail: the URLs one has and the other has not). Returns (pages agreeing, pages)."""
    same = 0
    shown = 0
    only_ours = only_peer = 0
    for k, (url, data) in enumerate(pages):
        a, b = ours(url, data), peer(url, data)
        if a == b:
            same += 1
            continue
        sa, sb = set(a), set(b)
        only_ours += len(a) - len([u for u in a if u in sb])
        only_peer += len(b) - len([u for u in b if u in sa])
        if shown < show:
            shown += 1
            name = names[k] if names is not None else url
            print(f"  {name} ({len(data)} bytes): ours {len(a)}, peer {len(b)} links")
            for u in [u for u in a if u not in sb][:3]:
                print(f"    only ours: {u[:150]}")
            for u in [u for u in b if u not in sa][:3]:
                print(f"    only peer: {u[:150]}")
            if sa == sb:
                print("    same URLs, different count or order")
    print(
        f"{title}: the lists agree on {same} of {len(pages)} pages"
        + (
            f" ({only_ours} URL occurrences only ours, {only_peer} only the peer's)"
            if same < len(pages)
            else ""
        )
    )
    return same, len(pages)


def resolution_bench(pages: Sequence[Page], repeat: int) -> None:
    """URL resolution on its own: the raw values the pure-Python extractor resolved, page by
    page, again with our Python resolver (fresh per page, cache included), the peer's ada
    resolver (fresh per page), ``ada_url.join_url`` and ``urljoin``."""
    per_page: list[tuple[str, list[str]]] = []

    class _Recorder(Resolver):
        def resolve(self, raw: str) -> str | None:
            per_page[-1][1].append(raw)
            return super().resolve(raw)

    saved = getattr(_machine, "Resolver")  # noqa: B009 (not re-exported: mypy)
    setattr(_machine, "Resolver", _Recorder)  # noqa: B010
    try:
        for url, data in pages:
            per_page.append((url, []))
            ex = LinkExtractorPy(url)
            ex.feed(data)
            ex.close()
    finally:
        setattr(_machine, "Resolver", saved)  # noqa: B010
    n = sum(len(r) for _, r in per_page)

    def run(make: Callable[[str], Callable[[str], object]]) -> Callable[[], int]:
        def go() -> int:
            for base, raws in per_page:
                resolve = make(base)
                for raw in raws:
                    resolve(raw)
            return n

        return go

    rows = {
        "ours (Python fast path + cache)": run(lambda b: Resolver(b).resolve),
        "ada cffi + cache (the peer's)": run(ada_resolver),
        "ada_url.join_url": run(lambda b: lambda r: full_resolve(b, r)),
        "urljoin+urldefrag": run(lambda b: lambda r: _join(b, r)),
    }
    print(f"URL resolution alone, {n:,} values:")
    for name, fn in rows.items():
        t, _ = best_of(fn, repeat)
        print(f"  {name:<34}{t / max(n, 1) * 1e6:>7.2f} us a value")


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


def normal_page(pages: Sequence[Page], size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        for _, p in pages:
            out += p
            if len(out) >= size:
                break
    return bytes(out[:size])


def feed_1k(data: bytes, cls: Any = LinkExtractorPy) -> int:
    ex = cls(BASE, "utf-8")
    n = 0
    for i in range(0, len(data), CHUNK):
        n += len(ex.feed(data[i : i + CHUNK]))
    return n + len(ex.close())


# The floor every pathological input must keep (issue 25): MB/s, fed in 1 KiB chunks.
FLOOR_MBS = {"py": 2.0, "c": 20.0}


def pathological_bench(pages: Sequence[Page], size: int, repeat: int = 1) -> bool:
    """Each pathological input (and a normal page of that size, when there is a corpus)
    through each twin in 1 KiB chunks, best of ``repeat``; True if every pathological input
    keeps the floor (`FLOOR_MBS`)."""
    impls: dict[str, Any] = {"py": LinkExtractorPy}
    if LinkExtractorC is not None:
        impls["c"] = LinkExtractorC
    print(f"\npathological inputs, {size / 1e6:g} MB each, fed in 1 KiB chunks, best of {repeat}")
    print(f"{'input':<32}{'impl':>5}{'seconds':>9}{'MB/s':>9}{'links':>8}  floor")
    docs = pathological(size)
    bad_inputs = set(docs)
    if pages:
        docs = {"normal page (corpus)": normal_page(pages, size)} | docs
    ok = True
    for name, data in docs.items():
        for impl, cls in impls.items():
            t, n = best_of(functools.partial(feed_1k, data, cls), repeat)
            mbs = len(data) / t / 1e6
            floor = ""
            if name in bad_inputs:
                met = mbs >= FLOOR_MBS[impl]
                ok = ok and met
                floor = f"{FLOOR_MBS[impl]:g} MB/s " + ("met" if met else "NOT met")
            print(f"{name:<32}{impl:>5}{t:>9.2f}{mbs:>9.1f}{n:>8}  {floor}")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--corpus",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "corpus" / "pages"),
        help="folder of *.html pages (default: ../shared/corpus/pages beside the project)",
    )
    ap.add_argument("--dense", type=int, default=300, help="link-dense pages (0: none)")
    ap.add_argument("--dense-site", type=int, default=2000, help="pages of the dense site")
    ap.add_argument(
        "--dense-source",
        choices=("auto", "bs", "own"),
        default="auto",
        help="crawl/sitegen_dense.py (bs), this file's generator (own), auto: bs if there",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="runs per pipeline (best is kept)")
    ap.add_argument("--more-peers", action="store_true", help="also urljoin-based peers")
    ap.add_argument("--no-check", action="store_true", help="skip the agreement check")
    ap.add_argument("--resolution", action="store_true", help="time URL resolution alone")
    ap.add_argument("--pathological", action="store_true", help="pathological inputs")
    ap.add_argument("--size", type=float, default=8, help="pathological input size in MB")
    ap.add_argument(
        "--pathological-only",
        action="store_true",
        help="only the pathological inputs (exit 1 if one is under the floor; the normal "
        "page row needs the corpus)",
    )
    args = ap.parse_args(argv)
    files = sorted(Path(args.corpus).glob("*.html"))
    corpus = [(BASE, p.read_bytes()) for p in files]
    if args.pathological_only:
        met = pathological_bench(corpus, int(args.size * 1_000_000), args.repeat)
        return 0 if met else 1
    if not corpus:
        sys.exit(f"no pages in {args.corpus}")
    sets: list[tuple[str, list[Page], list[str] | None]] = [
        ("link-sparse corpus", corpus, [p.name for p in files])
    ]
    if args.dense > 0:
        source, dense = dense_pages(args.dense, args.dense_site, args.seed, args.dense_source)
        title = f"link-dense pages ({source}, {args.dense_site}-page site, seed {args.seed})"
        sets.append((title, dense, None))
    impl = "c" if LinkExtractorC is not None else "py"
    print(f"CPU seconds, best of {args.repeat}; ours checked against the peer: crawler {impl}")
    ok = True
    for title, pages, names in sets:
        results = bench_set(title, pages, args.repeat, args.more_peers)
        if "crawler c" in results:
            peer = min(t for name, (t, _) in results.items() if name.startswith("selectolax+ada"))
            ratio = peer / results["crawler c"][0]
            print(
                f"bar (crawler c >= 4x selectolax+ada): {ratio:.2f}x",
                "met" if ratio >= 4 else "NOT met",
            )
        if not args.no_check:
            ours = _ours_whole(LinkExtractorC if impl == "c" else LinkExtractorPy)
            same, n = agreement(title.split(" (")[0], pages, ours, run_selectolax_ada, names)
            ok = ok and same == n
        if args.resolution:
            resolution_bench(pages, args.repeat)
    if args.pathological:
        pathological_bench(corpus, int(args.size * 1_000_000), args.repeat)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
