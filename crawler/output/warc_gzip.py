"""The WARC file's gzip members: each record written as its own member, tagged as ours, and
the tail repair that cuts what a killed run left half-written.

A resumed crawl (``--state``) appends to the same file after repairing its tail: a SIGKILL may
have left a gzip member half-written, or a ``response`` member without its ``request``.
:func:`repair_tail` finds the last complete member by scanning back from the end (the cost is
that of the last records, not of the file) and cuts what follows; a trailing ``response``
whose request record never made it is cut with it, so the file holds whole pairs. To find
member starts without mistaking a gzip body stored inside a record for one, every member
this writer makes carries the file's random 16-byte tag in its gzip header's FEXTRA field
(RFC 1952; readers skip it: gzip, zcat and warcio read the file as any .warc.gz). One file per
crawl rather than a new numbered file per run: a numbered file would still leave the killed
run's file with a cut member at its end, which is what readers reject.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from collections.abc import Iterable
from typing import IO, Any

__all__ = [
    "GZIP_LEVEL",
    "TAG_LEN",
    "GzipMembers",
    "WarcError",
    "file_tag",
    "member_header",
    "repair_tail",
]

# the public module's logger (crawler.output.warc): what a user filters on
log = logging.getLogger("crawler.output.warc")

#: zlib level of the gzip members (zlib's and gzip's default). Compressing is most of the
#: writer's cost. On the corpus pages (benchmarks/warc.py warc --level N): level 9 (warcio's
#: own wrapper) took 1.7x the CPU for a file 0.8% smaller; level 3 half the CPU for a file 12%
#: bigger. An archive is kept for long: 6.
GZIP_LEVEL = 6
_GZIP_MAGIC = b"\x1f\x8b\x08"
#: The FEXTRA subfield id of our members' tag (see :func:`repair_tail`).
_TAG_ID = b"CW"
#: Bytes of the file's tag (random, drawn when the file is created).
TAG_LEN = 16


class WarcError(Exception):
    """The WARC file cannot be used (a resumed run's file that is not a gzip WARC)."""


def member_header(tag: bytes) -> bytes:
    """A gzip member header (RFC 1952) with an FEXTRA field ``CW`` holding the file's tag."""
    extra = _TAG_ID + struct.pack("<H", len(tag)) + tag
    # ID1 ID2 CM=deflate FLG=FEXTRA, MTIME 0, XFL 0, OS 255 (unknown), XLEN, the field
    return b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff" + struct.pack("<H", len(extra)) + extra


class GzipMembers:
    """A file-like warcio writes one record to; each ``flush()`` (warcio calls it at the end
    of every record) ends a gzip member. Each member starts with :func:`member_header`."""

    def __init__(self, out: IO[bytes], tag: bytes) -> None:
        self._out = out
        self._header = member_header(tag)
        self._zip: Any = None
        self._crc = 0
        self._size = 0

    def write(self, data: bytes) -> None:
        if self._zip is None:
            self._zip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
            self._crc = self._size = 0
            self._out.write(self._header)
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        self._out.write(self._zip.compress(data))

    def flush(self) -> None:
        if self._zip is not None:
            self._out.write(self._zip.flush())
            self._out.write(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))
            self._zip = None

    def reset(self) -> None:
        """Drop a member half-written (a write failed): the next write starts a new one."""
        self._zip = None


def _member_at(fh: IO[bytes], offset: int, *, block: int = 65536) -> tuple[int, bytes] | None:
    """(end offset, first bytes of its content) of a complete, CRC-checked gzip member that
    starts at ``offset``, or None."""
    fh.seek(offset)
    unzip = zlib.decompressobj(zlib.MAX_WBITS + 16)
    head = b""
    pos = offset
    try:
        while not unzip.eof:
            data = fh.read(block)
            if not data:
                return None
            pos += len(data)
            while data and not unzip.eof:
                out = unzip.decompress(data, 65536)
                if len(head) < 512:
                    head += out[: 512 - len(head)]
                data = unzip.unconsumed_tail
    except zlib.error:
        return None
    return pos - len(unzip.unused_data), head


def file_tag(fh: IO[bytes]) -> bytes | None:
    """The tag in the FEXTRA field of the file's first member (None: not one of ours)."""
    fh.seek(0)
    head = fh.read(len(member_header(b"\0" * TAG_LEN)))
    if len(head) < 16 or head[:4] != b"\x1f\x8b\x08\x04" or head[12:14] != _TAG_ID:
        return None
    (length,) = struct.unpack("<H", head[14:16])
    tag = head[16 : 16 + length]
    return tag if length == TAG_LEN and len(tag) == length else None


def _candidates(fh: IO[bytes], end: int, marker: bytes, *, block: int = 65536) -> Iterable[int]:
    """Offsets of ``marker`` (a member's first bytes) before ``end``, last first."""
    while end > 0:
        start = max(0, end - block)
        fh.seek(start)
        # read past the block so that a marker across its end is seen
        data = fh.read(end - start + len(marker) - 1)
        i = data.rfind(marker)
        while i >= 0:
            if start + i < end:
                yield start + i
            i = data.rfind(marker, 0, i + len(marker) - 1)
        end = start


def _warc_type(head: bytes) -> str | None:
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"warc-type:"):
            return line.partition(b":")[2].strip().decode("ascii", "replace")
        if not line:
            break
    return None


def repair_tail(path: str) -> int:
    """Cut what follows the last complete record pair of the gzip WARC file ``path``; return
    the number of bytes cut (0: the file was whole).

    The last complete gzip member is found from the end backwards: each candidate start is
    decompressed and its CRC checked. The candidates are where our member header occurs:
    every member the writer makes starts with the same header, whose FEXTRA field holds a
    tag of 16 random bytes drawn when the file was created (read back from its first
    member). A bare gzip magic is not enough: a gzip body is archived as sent, deflate keeps
    incompressible bytes as they are, so a whole, valid gzip member of a body (a .warc.gz
    fetched from an archive) can sit byte for byte inside one of ours. A file whose first
    member has no tag (not written by this writer) falls back to the bare magic, a member
    that decompresses to a WARC record. If the last complete member is a ``response`` (its
    ``request``, written right after it, is missing) it is cut too.

    Raises:
        WarcError: the file holds no complete member and does not start like a gzip file
            (not ours: nothing is cut).
    """
    with open(path, "r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        tag = file_tag(fh)
        marker = _GZIP_MAGIC if tag is None else member_header(tag)
        keep: int | None = None
        for offset in _candidates(fh, size, marker):
            found = _member_at(fh, offset)
            if found is None or not found[1].startswith(b"WARC/"):
                continue
            end, head = found
            keep = offset if _warc_type(head) == "response" else end
            break
        if keep is None:
            fh.seek(0)
            if fh.read(len(_GZIP_MAGIC)) != _GZIP_MAGIC:
                raise WarcError(
                    f"{path}: not a gzip WARC file; a resumed crawl will not append to it"
                )
            keep = 0
        if keep < size:
            fh.truncate(keep)
            log.warning(
                "%s: cut %d bytes of a record left unfinished by the last run", path, size - keep
            )
        return size - keep
