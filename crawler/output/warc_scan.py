"""Reading a .warc.gz from its start, member by member: what ``crawler warc check`` reports
and ``crawler warc repair`` cuts (crawler/cli/warc.py).

A crawl killed with SIGKILL leaves ``FILE.open`` (see :mod:`crawler.output.warc`): whole
records, each its own gzip member, then perhaps one member cut where the kill landed. The
scan walks the members from offset 0, so a gzip body stored inside a record is never taken for
a member start (each member is read to its own end). A member is a *whole record* when it
decompresses with a right CRC and length, holds one WARC record (``WARC/1.x`` header lines,
then ``Content-Length`` bytes, then ``CRLF CRLF``: one record a member, as this crawler,
warcio and Heritrix write them) and, when the record carries a ``sha1:`` WARC-Block-Digest,
that digest matches its block.

What follows the last whole record is judged, not guessed at: a *torn tail* is what a kill
leaves, the start of a gzip member that ends before its end (or zero bytes, what a file
system can leave after a crash); cutting it loses nothing whole. Anything else (a member
that is complete but bad, bytes that are not gzip) is *damage*: :func:`repair` refuses to
cut it, since a whole record may follow it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import IO

from crawler.output.warc_gzip import file_tag, member_header

__all__ = ["OPEN_SUFFIX", "NotWarcError", "Scan", "repair", "scan"]

#: The suffix of a WARC file being written (Heritrix's): ``FILE.open`` until the crawl closes it.
OPEN_SUFFIX = ".open"

_BLOCK = 1 << 20
#: The most header bytes a record may have before its blank line (warcio's readers allow less).
_MAX_HEADER = 1 << 20
_MAGIC = b"\x1f\x8b\x08"


class NotWarcError(Exception):
    """The file is not a gzip WARC file (nothing was changed)."""


@dataclass(slots=True)
class Scan:
    """What :func:`scan` found in a file."""

    size: int = 0
    #: whole records, and how many of each WARC-Type
    records: int = 0
    types: Counter[str] = field(default_factory=Counter)
    #: the offset just past the last whole record (== ``size``: the file is whole)
    end: int = 0
    #: "" (whole), "torn" (a cut member at the end: safe to cut) or "damaged"
    tail: str = ""
    #: what is wrong at ``end`` (for people)
    problem: str = ""

    @property
    def whole(self) -> bool:
        return self.end == self.size


@dataclass(slots=True)
class _Member:
    end: int | None  # None: the file ends inside the member (torn)
    content: int = 0
    head: bytes = b""
    tail: bytes = b""
    digest: str = ""  # base32 sha1 of the block (after the header), "" if not computed
    error: str = ""  # zlib's complaint: not a (valid) member
    rest: bytes = b""  # bytes read past the member's end: the next member's first bytes


def _read_member(fh: IO[bytes], offset: int, pending: bytes = b"") -> _Member:
    """Decompress the member at ``offset`` to its end, keeping the header bytes and the
    block's sha1 (never the whole content: memory stays flat however big the record).

    ``pending``: the file's bytes from ``offset`` on that were read already (the last
    member's ``rest``); ``fh`` is then positioned right after them."""
    if not pending:
        fh.seek(offset)
    unzip = zlib.decompressobj(zlib.MAX_WBITS + 16)
    member = _Member(end=None)
    head = bytearray()
    header_len = -1
    sha1 = hashlib.sha1()
    pos = offset
    last = b""
    try:
        while not unzip.eof:
            data, pending = pending or fh.read(_BLOCK), b""
            if not data:
                return member  # torn: the file ends first
            pos += len(data)
            out = b"-"
            # a full output may leave more pending with no input left: call again until short
            while not unzip.eof and (data or len(out) == _BLOCK):
                out = unzip.decompress(data, _BLOCK)
                data = unzip.unconsumed_tail
                if not out:
                    continue
                member.content += len(out)
                if header_len < 0:
                    head += out
                    cut = head.find(b"\r\n\r\n")
                    if cut < 0:
                        if len(head) > _MAX_HEADER:
                            member.error = "no end of the WARC header in its first MiB"
                            return member
                        continue
                    header_len = cut + 4
                    out = bytes(head[header_len:])
                    del head[header_len:]
                # the block is what lies between the header and the record's last CRLF CRLF:
                # the last 4 bytes seen are held back until more come
                joined = last + out
                sha1.update(joined[:-4])
                last = joined[-4:]
    except zlib.error as exc:
        member.error = str(exc)
        return member
    member.rest = unzip.unused_data
    member.end = pos - len(member.rest)
    member.head = bytes(head)
    member.tail = last
    member.digest = base64.b32encode(sha1.digest()).decode("ascii") if header_len >= 0 else ""
    return member


def _fields(head: bytes) -> dict[str, str]:
    out = {}
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            out[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return out


def _whole_record(member: _Member) -> tuple[str, str]:
    """(WARC-Type, "") for a member that holds one whole record, else ("", why not)."""
    if not member.head.startswith(b"WARC/1."):
        return "", "not a WARC record"
    fields = _fields(member.head)
    try:
        length = int(fields.get("content-length", ""))
    except ValueError:
        return "", "a WARC record without a valid Content-Length"
    expected = len(member.head) + length + 4
    if member.content != expected or member.tail != b"\r\n\r\n":
        return "", (
            f"a WARC record of {member.content:,} bytes where its header says {expected:,}"
            " (one record a gzip member)"
        )
    digest = fields.get("warc-block-digest", "")
    if digest.lower().startswith("sha1:") and digest[5:].upper() != member.digest:
        return "", "a WARC record whose WARC-Block-Digest does not match its block"
    return fields.get("warc-type", "?"), ""


def _judge_tail(fh: IO[bytes], offset: int, size: int) -> tuple[str, str]:
    """("torn" | "damaged", why) for the bytes from ``offset`` to ``size``."""
    fh.seek(offset)
    start = fh.read(min(size - offset, 16))
    if start.strip(b"\0") == b"" and _all_zero(fh, offset, size):
        return "torn", f"{size - offset:,} zero bytes"
    if not (_MAGIC.startswith(start[:3]) if len(start) < 3 else start.startswith(_MAGIC)):
        return "damaged", "bytes that are not a gzip member"
    member = _read_member(fh, offset)
    if member.error:
        return "damaged", f"a gzip member that does not decompress ({member.error})"
    if member.end is None:
        # a cut member is the last thing a kill leaves: a whole record after it means
        # something else happened (a cut inside a stored deflate block swallows what follows)
        later = _whole_record_after(fh, offset, size)
        if later is not None:
            return "damaged", f"a cut gzip member with a whole record after it (offset {later:,})"
        return "torn", "a gzip member cut before its end"
    _, why = _whole_record(member)
    return "damaged", f"a complete gzip member holding {why}"


def _whole_record_after(fh: IO[bytes], offset: int, size: int) -> int | None:
    """The offset of a member holding a whole record that starts after ``offset``, or None.
    Candidates are where the file's own member header occurs (``warc_gzip``: our members
    carry the file's tag), or the bare gzip magic in a file without the tag."""
    tag = file_tag(fh)
    marker = _MAGIC if tag is None else member_header(tag)
    pos = offset + 1
    while pos < size:
        fh.seek(pos)
        data = fh.read(_BLOCK + len(marker) - 1)
        i = data.find(marker)
        while i >= 0 and pos + i < size:
            found = _read_member(fh, pos + i)
            if found.end is not None and not found.error and _whole_record(found)[0]:
                return pos + i
            i = data.find(marker, i + 1)
        pos += _BLOCK
    return None


def _all_zero(fh: IO[bytes], offset: int, size: int) -> bool:
    fh.seek(offset)
    while data := fh.read(_BLOCK):
        if data.strip(b"\0"):
            return False
    return True


def scan(fh: IO[bytes], name: str = "the file") -> Scan:
    """Walk the members of the gzip WARC file open as ``fh`` from its start.

    Raises:
        NotWarcError: it does not start as a gzip WARC file (an uncompressed WARC, another
            gzip file, anything else). An empty file is a WARC file of no record.
    """
    result = Scan(size=fh.seek(0, os.SEEK_END))
    offset = 0
    fh.seek(0)
    first = fh.read(8)
    if first.startswith(b"WARC/"):
        raise NotWarcError(
            f"{name} is an uncompressed WARC file; this command reads gzip WARC files"
            " (.warc.gz), as --warc writes them"
        )
    if result.size and not (
        _MAGIC.startswith(first) if len(first) < 3 else first.startswith(_MAGIC)
    ):
        raise NotWarcError(f"{name} is not a gzip WARC file (it does not start with a gzip header)")
    pending = b""
    fh.seek(0)
    while offset < result.size:
        member = _read_member(fh, offset, pending)
        if member.end is None or member.error:
            break
        pending = member.rest
        kind, why = _whole_record(member)
        if not kind:
            if offset == 0:
                raise NotWarcError(f"{name} is not a WARC file: its first gzip member holds {why}")
            break
        result.records += 1
        result.types[kind] += 1
        offset = member.end
    result.end = offset
    if offset < result.size:
        result.tail, result.problem = _judge_tail(fh, offset, result.size)
        if offset == 0 and result.tail == "torn" and not _starts_as_warc(fh):
            raise NotWarcError(f"{name} is not a WARC file: its gzip data is not a WARC record")
    return result


def _starts_as_warc(fh: IO[bytes]) -> bool:
    """The decompressed start of a cut first member reads ``WARC/`` (or is too short to
    tell): a WARC file killed before its first record ended."""
    fh.seek(0)
    unzip = zlib.decompressobj(zlib.MAX_WBITS + 16)
    try:
        out = unzip.decompress(fh.read(65536), 16)
    except zlib.error:
        return False
    return b"WARC/".startswith(out[:5]) if len(out) < 5 else out.startswith(b"WARC/")


def repair(path: str, *, fh: IO[bytes] | None = None) -> Scan:
    """Scan ``path`` and cut a torn tail (nothing else: damage is reported, not cut).

    ``fh``: the file already open ``r+b`` (the caller holds its lock); else it is opened.
    Returns the scan as it was before the cut (``size - end`` bytes were cut when
    ``tail == "torn"``).
    """
    own = fh is None
    handle = open(path, "r+b") if fh is None else fh
    try:
        result = scan(handle, path)
        if result.tail == "torn":
            handle.truncate(result.end)
            handle.flush()
            os.fsync(handle.fileno())
        return result
    finally:
        if own:
            handle.close()
