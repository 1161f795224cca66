"""The compiled extractor's compact record of a page's links (``record=True``: LinkRecord).

What must hold:
* for any page and any chunking, the record is the list of Links the extractor alone returns
  (compact links and the Links of the slow paths, in that list's order), and the intake's
  items are those it gives without a record: keeping the record changes nothing of the crawl;
* what outputs read from it without making the Links (``urls``, ``invalid``, ``json_urls``,
  ``csv_rows``) is what they compute from that list of Links: the same bytes in the jsonl
  line and the csv rows (csv.writer's quoting, json's escapes);
* it behaves as a read-only sequence of Links;
* ``--format jsonl`` and ``csv`` of a real crawl (which use it) write what the Links give.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import pickle
import random
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.config import CrawlConfig
from crawler.core.engine import Crawler
from crawler.core.results import PageResult
from crawler.extract import Link, LinkExtractorC, LinkRecord
from crawler.output.sinks import _JSON, CsvSink, JsonlSink, open_sink
from crawler.urls.intake import IntakeC
from crawler.urls.policy import UrlPolicy
from tests.extract_common import PAGES
from tests.sitegen import app_of, start_site
from tests.test_intake import _dense_page

needs_c = pytest.mark.skipif(
    LinkRecord is None or IntakeC is None, reason="the compiled twins are not built"
)

SEED = "http://site.example/"


def _chunks(data: bytes, rng: random.Random) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        n = rng.choice([1, 3, 17, 200, 1024, 1 << 16])
        out.append(data[i : i + n])
        i += n
    return out


def _run(data: bytes, url: str, chunks: list[bytes], record: bool, **kw: Any) -> tuple[Any, Any]:
    it = IntakeC(UrlPolicy([SEED]), **kw)
    ex = LinkExtractorC(url, None, intake=it, record=record)
    ex._strict = True
    items: list[Any] = []
    for c in chunks:
        items += ex.feed(c)
    items += ex.close()
    return items, ex.record


def _links(data: bytes, url: str) -> list[Link]:
    ex = LinkExtractorC(url, None)
    ex._strict = True
    return ex.feed(data) + ex.close()  # type: ignore[no-any-return]


def _check_page(data: bytes, url: str, seed: int, **kw: Any) -> LinkRecord:
    rng = random.Random(seed)
    chunks = _chunks(data, rng)
    links = _links(data, url)
    items, rec = _run(data, url, chunks, True, **kw)
    plain, none = _run(data, url, chunks, False, **kw)
    assert none is None
    assert items == plain  # the record changes nothing the crawl sees
    assert len(rec) == len(links)
    assert list(rec) == links
    assert rec == links
    assert rec.urls() == [k.url for k in links if k.url is not None]
    assert rec.invalid() == [k.raw for k in links if k.url is None]
    assert rec.json_urls() == _JSON.encode(rec.urls())
    return rec


@needs_c
def test_generated_dense_pages_any_chunking() -> None:
    rng = random.Random(5)
    for k in range(30):
        data = _dense_page(rng, rng.randrange(0, 250))
        _check_page(data, f"http://site.example/d{k % 3}/s/p{k}.html", k)
        _check_page(data, "http://site.example/", k, respect_nofollow=True)
        _check_page(data, "http://site.example/x/", k, all_links=True)


@needs_c
@pytest.mark.skipif(not PAGES, reason="needs ../shared/corpus/pages")
def test_the_corpus() -> None:
    for n, p in enumerate(PAGES):
        _check_page(p.read_bytes(), f"http://site.example/c/{p.stem}.html", n)


# Values the fast path takes (plain ASCII) and those it leaves to the slow paths (references,
# non-ASCII, srcset, values that do not resolve), with what csv quotes and json escapes.
_VALUE = st.lists(
    st.sampled_from(
        [
            "a",
            "/",
            "../",
            "./",
            "?",
            "#",
            ",",
            '"',
            "'",
            "\\",
            "%",
            "%41",
            "&amp;",
            "&quot;",
            "é",
            " ",
            "\t",
            "\n",
            "//h.example/",
            "http://[bad",
            "mailto:x",
            "x:y",
            "q=1&r=2",
            ":",
        ]
    ),  # fmt: skip
    max_size=6,
).map("".join)


@needs_c
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.tuples(st.sampled_from(["a", "area", "img", "link"]), _VALUE), max_size=12),
    srcset=st.booleans(),
    seed=st.integers(0, 2**16),
    source=st.sampled_from(
        ["http://site.example/p", 'http://s.example/a,b"c', "http://s.example/é", "x\r\ny"]
    ),
)
def test_any_values_and_the_outputs(
    values: list[tuple[str, str]], srcset: bool, seed: int, source: str
) -> None:
    parts = []
    for tag, v in values:
        attr = "src" if tag == "img" else "href"
        q = v.replace('"', "&quot;") if seed % 2 else v.replace('"', "%22")
        parts.append(f'<{tag} {attr}="{q}" rel="{"nofollow" if seed % 3 == 0 else "x"}">t\n')
    if srcset:
        parts.append('<img srcset="a.png 1x, b,c.png 2x">')
    data = "".join(parts).encode()
    rec = _check_page(data, "http://site.example/d/p.html", seed)
    links = list(rec)
    # csv: the record's rows are csv.writer's (or None: a value is not ASCII)
    rows = rec.csv_rows(source)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(
        (source, k.url, k.tag, "true" if k.nofollow else "false")
        for k in links
        if k.url is not None
    )
    if source.isascii():
        assert rows == buf.getvalue()
    else:
        assert rows is None
    # the sinks write the same bytes from the record as from the list of Links
    for kind in (CsvSink, JsonlSink):
        a, b = _Recorder(), _Recorder()
        for sink, given_links in ((kind(a), rec), (kind(b), links)):  # type: ignore[arg-type]
            sink.page(PageResult("http://site.example/d/p.html", 1, final_url=source,
                                 links=given_links))  # fmt: skip
            sink.close()
        assert a.data() == b.data(), kind


class _Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.writes.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def data(self) -> bytes:
        return b"".join(self.writes)


@needs_c
def test_a_jsonl_line_from_a_record_is_to_dict_of_it() -> None:
    data = b'<a href="/x\\y?q=\\&quot;">a</a><a href="http://[bad">b</a><a href="/\xc3\xa9">c</a>'
    items, rec = _run(data, "http://site.example/", [data], True)
    assert rec.invalid() == ["http://[bad"]
    page = PageResult("http://site.example/", 0, redirects=["http://site.example/r"], links=rec)
    out = _Recorder()
    sink = JsonlSink(out)  # type: ignore[arg-type]
    sink.page(page)
    sink.close()
    line = out.data()
    assert line == (_JSON.encode(page.to_dict()) + "\n").encode()
    assert json.loads(line)["links"] == [k.url for k in _links(data, page.url) if k.url]


@needs_c
def test_it_is_a_read_only_sequence_of_links() -> None:
    data = b"".join(b'<a href="/p%d">x</a><img src="\xc3\xa9%d.png">\n' % (k, k) for k in range(50))
    _, rec = _run(data, "http://site.example/", [data], True)
    links = _links(data, "http://site.example/")
    assert isinstance(rec, Sequence)
    assert rec[0] == links[0] and rec[-1] == links[-1] and rec[7] == links[7]
    assert rec[3:9] == links[3:9] and rec[::-7] == links[::-7]
    assert list(reversed(rec)) == links[::-1]
    assert links[5] in rec and Link("http://nowhere/", "x", "a", "href") not in rec
    assert rec.index(links[4]) == 4 and rec.count(links[4]) == 1
    assert rec != links[:-1] and rec != "x" and rec != tuple(links)
    with pytest.raises(IndexError):
        rec[len(links)]
    with pytest.raises(TypeError):
        hash(rec)
    with pytest.raises(TypeError):
        LinkRecord()
    assert repr(rec).startswith("LinkRecord([Link(")
    assert pickle.loads(pickle.dumps(rec)) == links and copy.copy(rec) == links
    with pytest.raises(ValueError):
        LinkExtractorC("http://site.example/", record=True)  # a record needs an intake


@needs_c
def test_a_repeated_link_still_creates_no_python_object() -> None:
    data = b"".join(b'<a href="/nav/%d.html">n</a> <a href="../up/%d">u</a>\n' % (k % 20, k % 20)
                    for k in range(5000))  # fmt: skip
    url = "http://site.example/d/p.html"
    it = IntakeC(UrlPolicy([SEED]))
    first, _ = _run(data, url, [data], False)
    it.mark_many(x for x in first if isinstance(x, str))
    ex = LinkExtractorC(url, None, intake=it, record=True)
    ex.feed(data[:100])
    before = sys.getallocatedblocks()
    items = ex.feed(data[100:])
    after = sys.getallocatedblocks()
    assert items == []
    assert len(ex.record) >= 9990
    # 10,000 links recorded: a handful of blocks (the chunk's buffers), not one per link
    assert after - before < 100, after - before


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
async def test_a_crawl_writes_what_the_links_give(serve, tmp_path, fmt: str) -> None:  # type: ignore[no-untyped-def]
    """A real crawl with the record (the command line's jsonl and csv) and without: the same
    PageResult links, the same lines. Runs with the pure-Python extractor too (a list then)."""
    site, _ = await start_site(serve, n=150, slow_seconds=0.0)
    config = CrawlConfig(
        seeds=(site.url("/p/0.html"),), ignore_robots=True, quiet=True, max_depth=1000
    )
    got: dict[bool, tuple[dict[str, list[Link]], list[bytes]]] = {}
    for record in (True, False):
        pages: list[PageResult] = []
        path = tmp_path / f"{record}.{fmt}"
        sink = open_sink(fmt, str(path))
        async with Crawler(config, sink=sink, link_record=record, on_page=pages.append) as crawler:
            await crawler.run()
        kinds = {type(p.links) for p in pages if p.links}
        if record and LinkRecord is not None:
            assert kinds == {LinkRecord}
        else:
            assert kinds == {list}
        got[record] = (
            {p.url: list(p.links) for p in pages},
            sorted(path.read_bytes().splitlines()),
        )
    (links_a, lines_a), (links_b, lines_b) = got[True], got[False]
    assert len(links_a) >= 150 and links_a == links_b
    assert sum(len(v) for v in links_a.values()) > 600
    if fmt == "csv":
        assert lines_a == lines_b
    else:  # (elapsed_ms differs from run to run)

        def strip(lines: list[bytes]) -> list[dict[str, Any]]:
            out = [json.loads(x) for x in lines]
            for d in out:
                del d["elapsed_ms"]
            return sorted(out, key=lambda d: d["url"])

        assert strip(lines_a) == strip(lines_b)


async def test_a_crawl_collecting_ids_with_the_record(serve) -> None:  # type: ignore[no-untyped-def]
    """``crawler check``'s crawl (``collect_ids``) takes the record too: the same links and the
    same fragment targets as the Links path."""
    routes: dict[str, str | tuple[int, str, str]] = {
        f"/p/{k}": "".join(
            f'<h2 id="s{k}-{j}">x</h2><a name="n{j}"></a><a href="/p/{(k * 7 + j) % 60}#s{j}">'
            f'l</a> <a href="../p/{(k + j) % 60}">m</a> <img src="i{j}.png">\n'
            for j in range(20)
        )
        for k in range(60)
    }
    app, _ = app_of(routes)
    server = await serve(app)
    config = CrawlConfig(seeds=(str(server.make_url("/p/0")),), ignore_robots=True, quiet=True)
    got = {}
    for record in (True, False):
        pages: list[PageResult] = []
        async with Crawler(
            config, link_record=record, collect_ids=True, on_page=pages.append
        ) as crawler:
            await crawler.run()
        if record and LinkRecord is not None:
            assert {type(p.links) for p in pages if p.links} == {LinkRecord}
        got[record] = {p.url: (list(p.links), p.ids, p.ids_complete) for p in pages}
    assert got[True] == got[False]
    assert len(got[True]) == 60
    assert all(len(v[1]) == 40 for v in got[True].values())  # the fragment targets
