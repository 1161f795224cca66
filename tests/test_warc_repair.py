"""``crawler warc repair|check FILE`` (issue 25) on files built by the crawl's own writer and
then cut, damaged or replaced: a torn tail is cut and nothing else, every whole record is
kept, a file that is not a gzip WARC is refused unchanged, a crawl's lock and an existing
final name are respected. Real files, ``crawler.cli.main.main`` as the command line runs it;
the results read back with warcio's reader, every digest checked."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler.cli.main import main
from crawler.config import CrawlConfig
from crawler.output import warc


def write_file(path: Path, pairs: int, *, body: bytes | None = None) -> list[int]:
    """A WARC file of a warcinfo and ``pairs`` exchanges (renamed to ``path`` at close);
    the end offset of every record."""
    writer = warc.open_archive(CrawlConfig(seeds=("http://127.0.0.1/",)), path=str(path))
    for i in range(pairs):
        record = writer.begin(
            url=f"http://127.0.0.1/p{i}",
            status=200,
            reason="OK",
            response_headers=[(b"Content-Type", b"text/html")],
        )
        record.write(body if body is not None else b"<p>page %d</p>" % i * 300)
        record.end(None)
    writer.close()
    ends = []
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh)
        for _ in it:
            it.read_to_end()
            ends.append(it.get_record_offset() + it.get_record_length())
    return ends


def types(path: Path) -> list[str]:
    with open(path, "rb") as fh:
        return [rec.rec_type for rec in ArchiveIterator(fh, check_digests="raise")]


def run(capsys: Any, *args: str) -> tuple[int, str, str]:
    code = main(["warc", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_torn_tail_is_cut_and_the_file_renamed(tmp_path: Path, capsys: Any) -> None:
    final = tmp_path / "a.warc.gz"
    ends = write_file(final, 3)
    whole = final.read_bytes()
    final.unlink()
    work = tmp_path / "a.warc.gz.open"
    work.write_bytes(whole + whole[ends[0] : ends[1] - 30])  # a member cut 30 bytes short
    code, out, _ = run(capsys, "check", str(work))
    assert code == 1 and "torn tail" in out and f"offset {len(whole):,}" in out
    code, out, _ = run(capsys, "repair", str(work))
    assert code == 0, out
    assert f"cut {ends[1] - 30 - ends[0]:,} bytes" in out and "7 whole records" in out
    assert not work.exists() and final.read_bytes() == whole
    assert types(final) == ["warcinfo"] + ["response", "request"] * 3
    code, out, _ = run(capsys, "check", str(final))
    assert code == 0 and "whole" in out


def test_keep_name_repairs_in_place(tmp_path: Path, capsys: Any) -> None:
    final = tmp_path / "a.warc.gz"
    write_file(final, 1)
    whole = final.read_bytes()
    work = tmp_path / "a.warc.gz.open"
    os.rename(final, work)
    with open(work, "ab") as fh:
        fh.write(b"\x1f\x8b\x08")  # the first bytes of a member
    assert run(capsys, "repair", "--keep-name", str(work))[0] == 0
    assert work.read_bytes() == whole and not final.exists()


def test_a_last_response_without_its_request_is_kept(tmp_path: Path, capsys: Any) -> None:
    """Never a whole record lost: the response whose request the kill stopped stays (a
    resumed crawl's own repair drops it to keep pairs, since it fetches the page again)."""
    path = tmp_path / "a.warc.gz"
    ends = write_file(path, 2)
    data = path.read_bytes()
    path.write_bytes(data[: ends[-1] - 10])  # the last request record cut
    code, out, _ = run(capsys, "repair", str(path))
    assert code == 0 and "4 whole records" in out
    assert types(path) == ["warcinfo", "response", "request", "response"]


def test_zero_bytes_after_the_last_record_are_a_torn_tail(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "a.warc.gz"
    write_file(path, 1)
    whole = path.read_bytes()
    path.write_bytes(whole + b"\0" * 5000)  # what a file system can leave after a crash
    code, out, _ = run(capsys, "repair", str(path))
    assert code == 0 and "5,000 zero bytes" in out and path.read_bytes() == whole


def test_damage_before_whole_records_is_not_cut(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "a.warc.gz"
    ends = write_file(path, 3)
    data = bytearray(path.read_bytes())
    data[ends[1] + 40] ^= 0xFF  # inside the first pair's request member: records follow
    path.write_bytes(bytes(data))
    code, out, _ = run(capsys, "repair", str(path))
    assert code == 1 and "damage, not a torn tail" in out and "nothing was changed" in out
    assert path.read_bytes() == bytes(data)
    code, out, _ = run(capsys, "check", str(path))
    assert code == 1 and "damage" in out and "2 whole records" in out


def test_a_bad_block_digest_is_damage(tmp_path: Path, capsys: Any) -> None:
    """A member that decompresses whole but whose record's block differs from its digest
    (rewritten, not torn) is reported as damage and not cut, even at the end."""
    path = tmp_path / "a.warc.gz"
    ends = write_file(path, 1)
    data = path.read_bytes()
    raw = gzip.decompress(data[ends[0] : ends[1]])  # the response record, the last here
    assert raw.count(b"page 0") >= 1
    forged = data[: ends[0]] + gzip.compress(raw.replace(b"page 0", b"page 9", 1))
    path.write_bytes(forged)
    code, out, _ = run(capsys, "repair", str(path))
    assert code == 1 and "WARC-Block-Digest does not match" in out
    assert path.read_bytes() == forged


def test_a_gzip_body_inside_a_record_is_not_taken_for_a_member(tmp_path: Path, capsys: Any) -> None:
    """A body that is itself a .warc.gz (whole gzip members, stored as sent): the scan walks
    the file's own members from the start, so the cut lands after the last whole record."""
    inner = tmp_path / "inner.warc.gz"
    write_file(inner, 2)
    path = tmp_path / "a.warc.gz"
    ends = write_file(path, 2, body=inner.read_bytes())
    data = path.read_bytes()
    path.write_bytes(data[: ends[-2] + (ends[-1] - ends[-2]) // 2])
    code, out, _ = run(capsys, "repair", str(path))
    assert code == 0 and "4 whole records" in out
    assert path.read_bytes() == data[: ends[-2]]


@pytest.mark.parametrize(
    "content",
    [
        b"WARC/1.1\r\nWARC-Type: warcinfo\r\nContent-Length: 0\r\n\r\n\r\n\r\n",
        gzip.compress(b"just some text, not a WARC record\r\n\r\n"),
        b"<html>not even gzip</html>",
    ],
    ids=["uncompressed-warc", "gzip-not-warc", "html"],
)
def test_a_file_that_is_not_a_gzip_warc_is_refused(
    tmp_path: Path, capsys: Any, content: bytes
) -> None:
    path = tmp_path / "x.warc.gz.open"
    path.write_bytes(content)
    for action in ("repair", "check"):
        code, _, err = run(capsys, action, str(path))
        assert code == 2 and "nothing was changed" in err and "WARC" in err
    assert path.read_bytes() == content and not (tmp_path / "x.warc.gz").exists()


def test_an_existing_final_name_is_not_replaced(tmp_path: Path, capsys: Any) -> None:
    final = tmp_path / "a.warc.gz"
    write_file(final, 1)
    work = tmp_path / "a.warc.gz.open"
    work.write_bytes(final.read_bytes() + b"\x1f\x8b")
    before = final.read_bytes(), work.read_bytes()
    code, _, err = run(capsys, "repair", str(work))
    assert code == 2 and "not replaced" in err and "--keep-name" in err
    assert (final.read_bytes(), work.read_bytes()) == before


def test_a_file_a_crawl_is_writing_is_refused(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "a.warc.gz"
    writer = warc.open_archive(CrawlConfig(seeds=("http://127.0.0.1/",)), path=str(path))
    try:
        work = tmp_path / "a.warc.gz.open"
        before = work.read_bytes()
        code, _, err = run(capsys, "repair", str(path))
        assert code == 2 and "a crawl is writing this file" in err
        assert work.read_bytes() == before and not path.exists()
    finally:
        writer.close()


def test_usage_errors(tmp_path: Path, capsys: Any) -> None:
    code, _, err = run(capsys, "repair", str(tmp_path / "none.warc.gz"))
    assert code == 2 and "no such file" in err
    code, _, err = run(capsys)
    assert code == 2 and "an action is required" in err
    empty = tmp_path / "empty.warc.gz"
    empty.write_bytes(b"")
    assert run(capsys, "check", str(empty))[0] == 0  # a WARC file of no record


def test_a_cut_member_followed_by_whole_records_is_not_cut(tmp_path: Path, capsys: Any) -> None:
    """A member cut inside a stored deflate block (random bytes are stored, not compressed)
    reads, to zlib, as if it went on into the members after it, to the file's end: the cut
    must not take the whole records that follow with it."""
    path = tmp_path / "a.warc.gz"
    ends = write_file(path, 2, body=os.urandom(200_000))
    data = path.read_bytes()
    # warcinfo, response 0, request 0; then response 1 cut in half; then request 1, whole
    cut = data[: ends[2]] + data[ends[2] : ends[3]][: (ends[3] - ends[2]) // 2] + data[ends[3] :]
    path.write_bytes(cut)
    code, out, _ = run(capsys, "repair", str(path))
    assert code == 1 and "a whole record after it" in out and "nothing was changed" in out
    assert path.read_bytes() == cut
