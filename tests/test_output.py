"""Output sinks (urls, jsonl, csv) and the stderr progress/summary, as units."""

from __future__ import annotations

import asyncio
import csv
import errno
import io
import json
import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.core.results import CrawlStats, PageResult
from crawler.extract import Link
from crawler.output.progress import CLEAR_LINE, Progress, Snapshot, format_summary, human_bytes
from crawler.output.sinks import (
    CSV_HEADER,
    CsvSink,
    JsonlSink,
    LinkJsonlSink,
    UrlSink,
    open_sink,
    repair_tail,
)


class Recorder(io.RawIOBase):
    """A binary stream that keeps each write call apart, to check records are written whole."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.flushes = 0

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        self.writes.append(bytes(b))
        return len(b)

    def flush(self) -> None:
        self.flushes += 1


class Failing(Recorder):
    def __init__(self, exc: OSError) -> None:
        super().__init__()
        self.exc = exc

    def write(self, b: bytes) -> int:  # type: ignore[override]
        raise self.exc


def page(url: str, links: list[Link], **kw: object) -> PageResult:
    return PageResult(url=url, depth=kw.pop("depth", 1), links=links, **kw)  # type: ignore[arg-type]


A = Link("https://s.test/a", "/a", "a", "href", False)
B = Link("https://s.test/b?x=1,2", "b?x=1,2", "a", "href", True)
IMG = Link("https://s.test/i.png", "i.png", "img", "src", False)


def test_urls_lines_flushed_as_found_through_a_real_pipe() -> None:
    r, w = os.pipe()
    with open(w, "wb") as out, open(r, "rb", buffering=0) as inp:
        sink = UrlSink(out)
        sink.link("https://s.test/", "https://s.test/", "internal")
        # readable at once: nothing waits in a buffer for the end of the crawl
        assert inp.read(4096) == b"https://s.test/\n"
        sink.link("https://other.test/", "https://s.test/", "external")
        sink.link("mailto:x@s.test", "https://s.test/", "other")
        assert inp.read(4096) == b"https://other.test/\texternal\nmailto:x@s.test\tother\n"
        sink.page(page("https://s.test/", [A]))  # pages add nothing to the urls format
        sink.close()
        assert sink.records == 3


def test_jsonl_one_whole_line_a_page() -> None:
    rec = Recorder()
    sink = JsonlSink(rec)  # type: ignore[arg-type]
    p1 = page("https://s.test/", [A, B], status=200, final_url="https://s.test/", bytes=120)
    p2 = page("https://s.test/x", [], error="http_404", status=404, error_detail="Not Found")
    sink.page(p1)
    sink.page(p2)
    sink.link("https://s.test/a", "https://s.test/", "internal")  # links add nothing to jsonl
    sink.close()
    assert len(rec.writes) == 2
    for w, p in zip(rec.writes, (p1, p2), strict=True):
        assert w.endswith(b"\n") and w.count(b"\n") == 1
        assert json.loads(w) == json.loads(json.dumps(p.to_dict()))
    first = json.loads(rec.writes[0])
    assert first["links"] == [A.url, B.url]
    assert set(first) >= {
        "url",
        "final_url",
        "status",
        "depth",
        "referrer",
        "content_type",
        "bytes",
        "elapsed_ms",
        "links",
        "error",
    }
    assert rec.flushes >= 2


def test_jsonl_stays_one_valid_utf8_line_with_odd_text() -> None:
    rec = Recorder()
    sink = JsonlSink(rec)  # type: ignore[arg-type]
    sink.page(page("https://s.test/é\u2028\ud800", [], error_detail="line\nbreak"))
    (line,) = rec.writes
    assert line.count(b"\n") == 1
    line.decode("utf-8")
    assert json.loads(line)["error_detail"] == "line\nbreak"


def test_csv_one_row_a_link_quoted_and_parseable() -> None:
    rec = Recorder()
    sink = CsvSink(rec)  # type: ignore[arg-type]
    sink.page(page("https://s.test/r", [A, B, IMG], final_url="https://s.test/final"))
    sink.page(page("https://s.test/empty", []))
    sink.page(page("https://s.test/2", [A]))
    sink.close()
    assert len(rec.writes) == 2  # one write a page that has links; the header goes with the first
    rows = list(csv.reader(io.StringIO(b"".join(rec.writes).decode())))
    assert rows == [
        list(CSV_HEADER),
        ["https://s.test/final", A.url, "a", "false"],
        ["https://s.test/final", B.url, "a", "true"],
        ["https://s.test/final", IMG.url, "img", "false"],
        ["https://s.test/2", A.url, "a", "false"],
    ]


_CSV_TEXT = st.text(alphabet=st.sampled_from(list('ab/:.,"\r\n \t\x00é\u2028')), max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    source=_CSV_TEXT.map(lambda t: "https://s.test/" + t),
    links=st.lists(st.tuples(st.none() | _CSV_TEXT, _CSV_TEXT, st.booleans()), max_size=5),
)
def test_csv_rows_are_what_csv_writer_writes(source: str, links: list) -> None:
    """The plain-row fast path and csv.writer give the same bytes, quoting or not."""
    rec = Recorder()
    sink = CsvSink(rec)  # type: ignore[arg-type]
    sink._header_done = True
    items = [Link(url, "raw", tag, "href", nofollow) for url, tag, nofollow in links]
    sink.page(page(source, items))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(
        (source, u, t, "true" if n else "false") for u, t, n in links if u is not None
    )
    assert b"".join(rec.writes) == buf.getvalue().encode("utf-8", "surrogateescape")
    assert [list(r) for r in csv.reader(io.StringIO(buf.getvalue(), newline=""))] == [
        [source, u, t, "true" if n else "false"] for u, t, n in links if u is not None
    ]


def test_csv_empty_crawl_still_has_its_header() -> None:
    rec = Recorder()
    sink = CsvSink(rec)  # type: ignore[arg-type]
    sink.close()
    sink.close()
    assert b"".join(rec.writes) == b"source,target,tag,nofollow\r\n"


def test_link_jsonl_for_extract() -> None:
    rec = Recorder()
    sink = LinkJsonlSink(rec)  # type: ignore[arg-type]
    sink.links([A, IMG])
    records = [json.loads(x) for x in b"".join(rec.writes).splitlines()]
    assert records == [
        {"url": A.url, "raw": "/a", "tag": "a", "attr": "href", "nofollow": False},
        {"url": IMG.url, "raw": "i.png", "tag": "img", "attr": "src", "nofollow": False},
    ]


def test_closed_pipe_is_quiet_and_stops_once() -> None:
    r, w = os.pipe()
    os.close(r)
    calls: list[str] = []
    out = open(w, "wb")  # noqa: SIM115
    sink = UrlSink(out, close_stream=True, on_failure=lambda: calls.append("stop"))
    for i in range(3):
        sink.link(f"https://s.test/{i}", "https://s.test/", "internal")
    assert sink.broken_pipe and sink.failed
    assert sink.error is None
    assert calls == ["stop"]
    assert sink.records == 0
    sink.close()  # no exception, even with bytes left in the buffer
    assert out.closed


def test_other_write_errors_are_kept_and_stop_the_crawl() -> None:
    calls: list[int] = []
    stream = Failing(OSError(errno.ENOSPC, "No space left on device"))
    sink = JsonlSink(stream, on_failure=lambda: calls.append(1))  # type: ignore[arg-type]
    sink.page(page("https://s.test/", []))
    sink.page(page("https://s.test/", []))
    assert sink.error is not None and sink.error.errno == errno.ENOSPC
    assert not sink.broken_pipe
    assert calls == [1]
    sink.close()


def test_open_sink_file_and_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    sink = open_sink("urls", str(path))
    sink.link("https://s.test/", "", "internal")
    sink.close()
    assert path.read_bytes() == b"https://s.test/\n"
    assert isinstance(open_sink("csv", stream=io.BytesIO()), CsvSink)
    with pytest.raises(ValueError, match="unknown output format 'xml'"):
        open_sink("xml")
    with pytest.raises(OSError):
        open_sink("urls", str(tmp_path / "no" / "such" / "dir" / "f"))


# -- outputs of a crawl with a state: appended on resume, the cut last line repaired --


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (b"a\nb\nhalf-a-li", b"a\nb\n"),
        (b"a\nb\n", b"a\nb\n"),
        (b"no newline at all", b""),
        (b"", b""),
        (b"x" * 300 + b"\n" + b"y" * 1000, b"x" * 300 + b"\n"),  # found blocks back
        (b"a\r\nb,c\r\nd,", b"a\r\nb,c\r\n"),  # csv rows end in CRLF
    ],
)
def test_repair_tail_cuts_after_the_last_newline(
    tmp_path: Path, before: bytes, after: bytes
) -> None:
    path = tmp_path / "out"
    path.write_bytes(before)
    assert repair_tail(str(path), block=64) == len(before) - len(after)
    assert path.read_bytes() == after


def _jsonl_page(url: str) -> PageResult:
    return page(url, [A], status=200)


def test_resumed_jsonl_appends_after_the_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    first = open_sink("jsonl", str(path), resume=False)
    first.page(_jsonl_page("https://s.test/1"))
    first.close()
    whole = path.read_bytes()
    with open(path, "ab") as fh:
        fh.write(b'{"url":"https://s.test/2","fin')  # a kill in the middle of a record
    sink = open_sink("jsonl", str(path), resume=True)
    sink.page(_jsonl_page("https://s.test/2"))
    sink.close()
    assert sink.repaired == len(b'{"url":"https://s.test/2","fin')
    data = path.read_bytes()
    assert data.startswith(whole)
    assert [json.loads(line)["url"] for line in data.splitlines()] == [
        "https://s.test/1",
        "https://s.test/2",
    ]


def test_a_new_crawl_with_a_state_truncates_at_start(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_bytes(b"old run\n")
    sink = open_sink("urls", str(path), resume=False)
    assert path.read_bytes() == b"old run\n"  # not yet: the state may still refuse
    sink.link("https://s.test/", "", "internal")
    sink.close()
    assert path.read_bytes() == b"https://s.test/\n"


def test_the_engines_start_decides_over_the_clis_guess(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_bytes(b"old run\nhal")
    sink = open_sink("urls", str(path), resume=True)
    sink.start(resumed=False)  # the engine, holding the state, found no crawl in it
    sink.start(resumed=True)  # once only
    sink.link("https://s.test/", "", "internal")
    sink.close()
    assert path.read_bytes() == b"https://s.test/\n"


@pytest.mark.parametrize("fmt", ["urls", "jsonl", "csv"])
@pytest.mark.parametrize("resume", [True, False])
def test_a_crawl_that_never_starts_leaves_the_file_unchanged(
    tmp_path: Path, fmt: str, resume: bool
) -> None:
    path = tmp_path / "out"
    path.write_bytes(b"earlier\nhalf")
    sink = open_sink(fmt, str(path), resume=resume)  # then the state is refused: no start
    sink.close()
    assert path.read_bytes() == b"earlier\nhalf"
    missing = tmp_path / "new"
    open_sink(fmt, str(missing), resume=resume).close()
    assert missing.read_bytes() == b""  # created (the path was checked), nothing written


@pytest.mark.parametrize("resume", [True, False])
def test_a_device_or_a_fifo_is_written_as_it_is(tmp_path: Path, resume: bool) -> None:
    sink = open_sink("urls", os.devnull, resume=resume)  # no truncate: EINVAL on a device
    sink.link("https://s.test/", "", "internal")
    sink.close()
    assert sink.error is None and sink.records == 1
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        sink = open_sink("jsonl", str(fifo), resume=resume)
        sink.page(_jsonl_page("https://s.test/1"))
        sink.close()
        assert sink.error is None
        assert json.loads(os.read(reader, 65536))["url"] == "https://s.test/1"
    finally:
        os.close(reader)


def test_csv_header_only_at_the_top_of_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    for resume in (False, True, True):
        sink = open_sink("csv", str(path), resume=resume)
        sink.page(page("https://s.test/p", [A], final_url="https://s.test/p"))
        sink.close()
    rows = list(csv.reader(io.StringIO(path.read_text())))
    assert rows[0] == list(CSV_HEADER)
    assert rows[1:] == [["https://s.test/p", "https://s.test/a", "a", "false"]] * 3
    path.write_bytes(b"source,tar")  # cut inside the header: a resumed run writes it again
    sink = open_sink("csv", str(path), resume=True)
    sink.start()  # the engine, once it holds the state; then no page at all
    sink.close()
    assert path.read_bytes() == b"source,target,tag,nofollow\r\n"


def test_flush_hands_records_to_the_os(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    buffered = io.BufferedWriter(io.FileIO(path, "wb"), buffer_size=1 << 20)
    sink = UrlSink(buffered, close_stream=True)
    sink.link("https://s.test/", "", "internal")
    sink.flush()
    assert path.read_bytes() == b"https://s.test/\n"  # another reader sees it: in the OS
    sink.close()
    sink.flush()  # after close: nothing, no error

    class FailingFlush(Recorder):
        def flush(self) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    failing = UrlSink(FailingFlush())
    failing.flush()
    assert failing.error is not None and failing.error.errno == errno.ENOSPC


# -- progress and summary --


def stats(**kw: object) -> CrawlStats:
    s = CrawlStats(**kw)  # type: ignore[arg-type]
    return s


def test_summary_counts_and_errors_by_kind() -> None:
    s = stats(
        pages=20,
        pages_ok=17,
        bytes=320_000,
        links_found=140,
        links_new=21,
        robots_disallowed=2,
        errors=Counter({"http_404": 2, "timeout": 1}),
        duration=2.0,
    )
    text = format_summary(s)
    lines = text.splitlines()
    assert lines[0] == "crawler: done in 2.0s: 20 pages (17 ok, 3 failed), 10.0 pages/s, 312.5 KB"
    assert lines[1] == "crawler: links: 140 found, 21 new; 2 disallowed by robots.txt"
    assert lines[2] == "crawler: errors: http_404 2, timeout 1"
    assert format_summary(s, stopped_by="SIGINT").startswith("crawler: stopped (SIGINT) in 2.0s")
    assert "errors" not in format_summary(stats(pages=1, pages_ok=1, duration=1.0))
    assert format_summary(stats(pages=5, pages_ok=5, duration=0.02)).startswith(
        "crawler: done in 0.02s: 5 pages (5 ok, 0 failed), 250.0 pages/s"
    )


def test_human_bytes() -> None:
    assert human_bytes(0) == "0 B"
    assert human_bytes(2048) == "2.0 KB"
    assert human_bytes(5 * 1024**3) == "5.0 GB"


def test_not_a_tty_gives_only_the_summary() -> None:
    err = io.StringIO()
    progress = Progress(err)
    assert not progress.live
    progress.draw(Snapshot(1, 2, 3, 0))
    assert err.getvalue() == ""
    progress.summary(stats(pages=1, pages_ok=1, duration=0.5))
    assert err.getvalue().startswith("crawler: done in 0.50s: 1 pages")
    assert "\r" not in err.getvalue()


def test_quiet_writes_nothing() -> None:
    err = io.StringIO()
    progress = Progress(err, quiet=True, live=True)
    progress.draw(Snapshot(1, 2, 3, 0))
    progress.summary(stats(pages=1, pages_ok=1, duration=0.5))
    assert err.getvalue() == ""


def test_live_line_redrawn_in_place_and_cleared() -> None:
    err = io.StringIO()
    progress = Progress(err, live=True)
    assert progress.line(Snapshot(0, 0, 1, 0), now=100.0).startswith("pages 0 |")
    assert (
        progress.line(Snapshot(50, 8, 340, 3), now=102.0)
        == "pages 50 | in flight 8 | queued 340 | 25.0 pages/s | errors 3"
    )
    progress.draw(Snapshot(51, 8, 340, 3))
    assert err.getvalue().startswith(CLEAR_LINE + "pages 51 | in flight 8 | queued 340 |")
    progress.summary(stats(pages=51, pages_ok=48, duration=2.0))
    out = err.getvalue()
    assert out.count(CLEAR_LINE) == 2  # drawn, then cleared before the summary
    assert out.endswith("\n") and "crawler: done in 2.0s: 51 pages" in out


async def test_run_refreshes_a_few_times_a_second() -> None:
    err = io.StringIO()
    progress = Progress(err, live=True, interval=0.02)
    n = 0

    def read() -> Snapshot:
        nonlocal n
        n += 1
        return Snapshot(n, 1, 0, 0)

    task = asyncio.ensure_future(progress.run(read))
    await asyncio.sleep(0.15)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert n >= 3
    assert err.getvalue().endswith(CLEAR_LINE)


async def test_run_is_a_no_op_when_not_live() -> None:
    progress = Progress(io.StringIO())
    await asyncio.wait_for(progress.run(lambda: Snapshot(0, 0, 0, 0)), 1)


# --- links whose value does not resolve (Link.url None, issue 13) -----------------------------

BAD = Link(None, "http://a b/\tx\ny", "a", "href", False)  # type: ignore[arg-type]


def test_invalid_links_in_every_format() -> None:
    # urls (--all-links): the raw value, one line, marked invalid; jsonl: not in `links`,
    # raw values in `invalid_links`; csv: no target, no row; nothing raises.
    out = io.BytesIO()
    UrlSink(out).link(BAD.raw, "https://s.test/", "invalid")
    assert out.getvalue() == b"http://a b/\\x09x\\x0ay\tinvalid\n"
    p = page("https://s.test/", [A, BAD, A])
    record = p.to_dict()
    assert record["links"] == [A.url, A.url]
    assert record["invalid_links"] == [BAD.raw]
    out = io.BytesIO()
    JsonlSink(out).page(p)
    assert json.loads(out.getvalue())["invalid_links"] == [BAD.raw]
    out = io.BytesIO()
    sink = CsvSink(out)
    sink.page(p)
    sink.close()
    rows = list(csv.reader(io.StringIO(out.getvalue().decode())))
    row = ["https://s.test/", A.url, "a", "false"]
    assert rows == [list(CSV_HEADER), row, row]
    out = io.BytesIO()
    LinkJsonlSink(out).links([BAD])
    assert json.loads(out.getvalue()) == {
        "url": None,
        "raw": BAD.raw,
        "tag": "a",
        "attr": "href",
        "nofollow": False,
    }


def test_a_lone_surrogate_never_makes_a_sink_raise() -> None:
    out = io.BytesIO()
    sink = UrlSink(out)
    sink.link("http://a\ud800b/", "https://s.test/", "invalid")
    sink.link("https://s.test/\udcff", "https://s.test/", "internal")  # surrogateescape
    assert out.getvalue() == b"http://a?b/\tinvalid\nhttps://s.test/\xff\n"
    assert sink.error is None


def test_summary_counts_invalid_links_and_sink_errors() -> None:
    stats = CrawlStats(pages=2, pages_ok=1, links_found=9, links_new=3, links_invalid=4)
    stats.errors["sink"] = 1
    stats.sink_errors = 2
    text = format_summary(stats)
    assert "crawler: links: 9 found, 3 new; 4 invalid" in text
    assert "crawler: errors: sink 1" in text
    assert "crawler: output: 2 sink errors (logged)" in text


def test_summary_of_a_resumed_crawl_says_so() -> None:
    stats = CrawlStats(pages=30, pages_ok=30, resumed_pages=20, recovered=3, duration=1.0)
    text = format_summary(stats, resumed=True, repaired=41)
    lines = text.splitlines()
    assert lines[0].startswith("crawler: done in 1.0s: 30 pages (30 ok, 0 failed), 10.0 pages/s")
    assert lines[2] == (
        "crawler: resumed: 20 pages from earlier runs, 3 in flight at the last stop (fetched again)"
    )
    assert lines[3] == (
        "crawler: output: 41 bytes of a line cut at the last stop removed (its page written again)"
    )
    plain = format_summary(CrawlStats(pages=1, pages_ok=1, duration=1.0))
    assert "resumed" not in plain and "cut" not in plain
    none_in_flight = format_summary(stats.__class__(pages=1, pages_ok=1), resumed=True)
    assert "0 in flight at the last stop\n" in none_in_flight
