#!/usr/bin/env python3
"""Link-intake micro-benchmark: bytes in, the URLs the crawl does not know yet out.

The per-link path of a crawl, without the network and without the state: a page's bytes go
through the extractor and the intake (``crawler.urls.intake``: canonical form, the recent table),
and what comes out is the list of new canonical URLs (the items admission then fingerprints,
probes and offers). Three pages, each timed for every pipeline (CPU time, best of ``--repeat``):

* ``repeated``: N links to URLs the intake already holds (a site's navigation): per link;
* ``new``: N links to URLs it does not hold (each comes out as a ``str``): per link;
* ``text``: link-free markup of the same size: ns per byte (the floor under the others).

Links use every common relative form (root-relative, ``../``, ``./``, protocol-relative,
query-only, percent escapes, dot segments) against a base in a sub-directory.

Pipelines: ``c direct`` (the compiled extractor hands the compiled intake its links from its
own buffers: the crawl's path when no output wants every Link), ``c record`` (the same, and
every link kept in the page's compact ``LinkRecord``: the command line's jsonl and csv),
``c links`` (the compiled extractor's Links through the compiled intake: the library's
default, which keeps the page's Links as a list), ``py`` (both pure-Python twins). The bar of
issue 9: <= 0.3 µs a repeated link and <= 1.5 µs a new link.

Then the outputs that read every link of a page, per link: a page's jsonl line (``JsonlSink``)
and its csv rows (``CsvSink``), from a LinkRecord and from the list of Links.

    python benchmarks/intake.py              # N = 20,000 links a page
    python benchmarks/intake.py --links 5000 --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.core.results import PageResult  # noqa: E402
from crawler.extract import LinkExtractorC, LinkExtractorPy  # noqa: E402
from crawler.output.sinks import CsvSink, JsonlSink  # noqa: E402
from crawler.urls.intake import IntakeC, IntakePy  # noqa: E402
from crawler.urls.policy import UrlPolicy  # noqa: E402

BASE = "http://site.example/docs/guide/page.html"
FORMS = [
    '<a href="/docs/ref/{i}.html">',
    '<a href="../api/{i}.html">',
    '<a href="./{i}/index.html">',
    '<a href="sec{i}.html">',
    '<a href="//site.example/pr/{i}">',
    '<a href="?page={i}">',
    '<a href="/esc/%7e{i}/%41">',
    '<a href="a/./b/../c{i}">',
    '<a href="http://h{h}.example/x/{i}">',
    '<a class="nav" href="/docs/{i}#top">',
]
FILLER = "<li>Some text of the page, a little <b>markup</b> and words.</li>\n"


def page(n: int, offset: int) -> bytes:
    parts = []
    for k in range(n):
        i = offset + k
        parts.append(FORMS[k % len(FORMS)].format(i=i, h=i % 300))
        parts.append(f"link {i}</a> ")
        if k % 4 == 3:
            parts.append(FILLER)
    return ("<!doctype html><html><body>\n" + "".join(parts) + "</body></html>").encode()


def text_page(size: int) -> bytes:
    body = (FILLER * (size // len(FILLER) + 1))[:size]
    return ("<!doctype html><html><body>\n" + body + "</body></html>").encode()


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times = []
    out = None
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()  # CPU time: this loop is CPU-bound, the machine shared
        out = fn()
        times.append(time.process_time() - t)
    return min(times), out


def pipelines(policy: UrlPolicy) -> dict[str, tuple[Any, Callable[[Any, bytes], list[Any]]]]:
    """name -> (intake, run(intake, data) -> items)."""

    def direct(it: Any, data: bytes) -> list[Any]:
        ex = LinkExtractorC(BASE, "utf-8", intake=it)
        return ex.feed(data) + ex.close()  # type: ignore[no-any-return]

    def record(it: Any, data: bytes) -> list[Any]:
        ex = LinkExtractorC(BASE, "utf-8", intake=it, record=True)
        return ex.feed(data) + ex.close()  # type: ignore[no-any-return]

    def c_links(it: Any, data: bytes) -> list[Any]:
        ex = LinkExtractorC(BASE, "utf-8")
        return it.take(ex.feed(data) + ex.close())  # type: ignore[no-any-return]

    def py(it: Any, data: bytes) -> list[Any]:
        ex = LinkExtractorPy(BASE, "utf-8")
        return it.take(ex.feed(data) + ex.close())  # type: ignore[no-any-return]

    out: dict[str, tuple[Any, Callable[[Any, bytes], list[Any]]]] = {}
    if IntakeC is not None and LinkExtractorC is not None:
        out["c direct"] = (IntakeC(policy), direct)
        out["c record"] = (IntakeC(policy), record)
        out["c links"] = (IntakeC(policy), c_links)
    out["py"] = (IntakePy(policy), py)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", type=int, default=20_000, help="links a page (default 20000)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.links
    policy = UrlPolicy(["http://site.example/"])
    known = page(n, 0)
    fresh = [page(n, (r + 1) * n) for r in range(args.repeat + 1)]
    text = text_page(len(known))
    print(f"{n:,} links a page ({len(known) / 1e6:.2f} MB), link-free page of the same size; "
          f"best of {args.repeat}")  # fmt: skip
    print(f"{'pipeline':<10} {'repeated µs/link':>17} {'new µs/link':>12} {'text ns/byte':>13}"
          f" {'new URLs out':>13} {'evicted':>8}")  # fmt: skip
    for name, (it, run) in pipelines(policy).items():
        it.mark_many(x for x in run(it, known) if isinstance(x, str))
        t_rep, items = best(lambda: run(it, known), args.repeat)  # noqa: B023
        # (a few may come out: URLs the fixed-size table evicted, decided by the state then)
        evicted = len(items)
        pages = iter(fresh)
        t_new, items = best(lambda: run(it, next(pages)), args.repeat)  # noqa: B023
        t_text, _ = best(lambda: run(it, text), args.repeat)  # noqa: B023
        print(
            f"{name:<10} {t_rep / n * 1e6:>17.3f} {t_new / n * 1e6:>12.3f}"
            f" {t_text / len(text) * 1e9:>13.2f} {len(items):>13,} {evicted:>8,}"
        )
    print("bar (issue 9): repeated <= 0.3 µs a link, new <= 1.5 µs a link")
    if IntakeC is not None and LinkExtractorC is not None:
        outputs(known, n, args.repeat, policy)


def outputs(data: bytes, n: int, repeat: int, policy: UrlPolicy) -> None:
    """The jsonl URL list and the csv rows of one page, per link: record vs list of Links."""
    ex = LinkExtractorC(BASE, "utf-8", intake=IntakeC(policy), record=True)
    ex.feed(data)
    ex.close()
    rec = ex.record
    plain = LinkExtractorC(BASE, "utf-8")
    links = plain.feed(data) + plain.close()
    assert list(rec) == links
    sink = CsvSink(open(os.devnull, "wb"), close_stream=True)  # noqa: SIM115
    jsonl = JsonlSink(open(os.devnull, "wb"), close_stream=True)  # noqa: SIM115
    print(f"\n{'output':<10} {'LinkRecord µs/link':>19} {'list µs/link':>13}")
    for name, fn in (
        ("jsonl", lambda links: jsonl.page(PageResult(BASE, 0, links=links))),
        ("csv", lambda links: sink.page(PageResult(BASE, 0, links=links))),
    ):
        t_rec, _ = best(lambda: fn(rec), repeat)  # noqa: B023
        t_list, _ = best(lambda: fn(links), repeat)  # noqa: B023
        print(f"{name:<10} {t_rec / n * 1e6:>19.3f} {t_list / n * 1e6:>13.3f}")
    sink.close()
    jsonl.close()


if __name__ == "__main__":
    main()
