"""Content-Encoding decoding, bounded so a bomb cannot blow up memory, and the capped delivery
of a body to its consumer.

The plain-http path (crawler/http/plain.py) reads every body raw, and so does aiohttp's path with a
WARC archive (``auto_decompress=False``: the archive wants the bytes as received, and the
extractor wants them decoded): the fetcher decodes here, and :func:`deliver` hands the decoded
pieces to the consumer under the body cap, on both. Every
call returns the output in pieces of at most :data:`PIECE` bytes, produced lazily
(``decompressobj(...).decompress(data, max_length)`` / brotli's ``output_buffer_limit``): the
fetcher stops pulling pieces at the body cap, and nothing past it is ever inflated.

The rules are aiohttp's own (so both paths give the consumer the same bytes and error kinds):
``deflate`` is zlib-wrapped unless its first byte says raw deflate; gzip members may be
concatenated; a deflate stream that stops before its end is a decode error, a gzip or brotli
one is not. One addition: ``x-gzip`` is gzip (RFC 9110 section 8.4.1.3; aiohttp passes it
through undecoded, so the fetcher decodes it here on both paths). Unknown codings pass
through as they are, as in aiohttp.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from crawler.http.errors import DecodeError

if TYPE_CHECKING:
    from crawler.http.response import Consumer, Response

__all__ = ["PIECE", "BodyDecoder", "accept_encoding", "decoder_for", "deliver"]

#: The most output one decompression step produces.
PIECE = 64 * 1024
#: The most gzip members one body may hold (each bounded by PIECE anyway; a cheap guard).
MAX_MEMBERS = 10_000


def _brotli() -> Any | None:
    try:
        import brotli  # type: ignore[import-untyped]  # noqa: PLC0415  (only for br bodies)
    except ImportError:  # pragma: no cover - brotli is a dependency
        return None
    return brotli


def accept_encoding() -> str:
    """The Accept-Encoding the archive path sends: only what :func:`decoder_for` decodes."""
    return "gzip, deflate, br" if _brotli() is not None else "gzip, deflate"


class BodyDecoder:
    """One body's decoder: ``feed(raw)`` yields decoded pieces; ``finish()`` at the end."""

    __slots__ = ("_d", "_encoding", "_members", "_seen")

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._d: Any = None
        self._seen = False
        self._members = 1
        if encoding == "br":
            brotli = _brotli()
            if brotli is None:
                raise DecodeError("Can not decode content-encoding: brotli (br)")
            self._d = brotli.Decompressor()
        elif encoding == "gzip":
            self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``data`` (lazy: stop iterating and no more is inflated)."""
        if not data:
            return
        try:
            if self._encoding == "br":
                yield from self._feed_brotli(data)
            else:
                if self._d is None:  # deflate: the first byte says zlib or raw
                    raw = data[0] & 0x0F != 8
                    self._d = zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
                self._seen = True
                yield from self._feed_zlib(data)
        except DecodeError:
            raise
        except Exception as exc:  # zlib.error, brotli.error
            raise DecodeError(f"Can not decode content-encoding: {self._encoding}") from exc

    def _feed_zlib(self, data: bytes) -> Iterator[bytes]:
        d = self._d
        while True:
            if d.eof:
                rest = d.unused_data
                if not rest or self._encoding != "gzip":
                    return  # bytes after a deflate stream are ignored, as aiohttp does
                self._members += 1
                if self._members > MAX_MEMBERS:
                    raise DecodeError(f"more than {MAX_MEMBERS} gzip members")
                self._d = d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                data = rest
            out = d.decompress(data, PIECE)
            data = d.unconsumed_tail
            if out:
                yield out
            if not data and len(out) < PIECE and not (d.eof and d.unused_data):
                return

    def _feed_brotli(self, data: bytes) -> Iterator[bytes]:
        d = self._d  # brotli >= 1.2 (pyproject): process() takes output_buffer_limit
        # The limit is soft (a piece may be somewhat larger) and output can stay pending with
        # can_accept_more_data() already True: pull with empty input until nothing comes.
        out = d.process(data, output_buffer_limit=PIECE)
        while out or not d.can_accept_more_data():
            if out:
                yield out
            if d.is_finished():
                return
            out = d.process(b"", output_buffer_limit=PIECE)
            if not out and d.can_accept_more_data():
                return

    def finish(self) -> None:
        """At the end of a body read whole: a deflate stream that did not end is an error."""
        if self._encoding == "deflate" and self._seen and self._d is not None and not self._d.eof:
            raise DecodeError("Can not decode content-encoding: deflate")


def decoder_for(content_encoding: str | None) -> BodyDecoder | None:
    """A decoder for a Content-Encoding header value, or None to pass the body through."""
    if not content_encoding:
        return None
    enc = content_encoding.strip().lower()
    if enc == "x-gzip":
        enc = "gzip"
    if enc not in ("gzip", "deflate", "br"):
        return None  # identity, unknown, or a list: passed through (aiohttp does the same)
    return BodyDecoder(enc)


async def deliver(
    chunks: AsyncIterable[bytes],
    decoder: BodyDecoder | None,
    res: Response,
    consumer: Consumer,
    cap: int,
    tap: Callable[[bytes], object] | None = None,
) -> bool:
    """The raw ``chunks`` of a body, decoded, to ``consumer`` (awaiting what it returns); True
    if the cap stopped the read (``res`` is then marked too large).

    ``tap`` gets every raw byte read (the archive's record). The cap (0: none) is on the
    decoded bytes, and on the raw bytes too: bytes after the end of a deflate stream decode to
    nothing and must not be read for ever. ``res.bytes`` is kept at the decoded count.
    """
    truncated = False
    raw = 0
    read = 0
    async for chunk in chunks:
        if cap and raw + len(chunk) > cap:
            chunk = chunk[: cap - raw]
            truncated = True
        raw += len(chunk)
        if tap is not None:
            tap(chunk)
        for piece in decoder.feed(chunk) if decoder is not None else (chunk,):
            if cap and read + len(piece) > cap:
                piece = piece[: cap - read]
                truncated = True
            if piece:
                read += len(piece)
                res.bytes = read
                pending = consumer(piece)
                if pending is not None:
                    await pending
            if truncated and read >= cap:
                break  # the decoded cap: nothing more is inflated
        if truncated:
            res.mark_too_large(cap)
            break
    else:
        if decoder is not None:
            decoder.finish()
    res.bytes = read
    return truncated
