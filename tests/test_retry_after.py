"""Retry-After against a real server: an unusable value is ignored, never a final error.

RFC 9110 section 10.2.3: the value is an HTTP-date or delay-seconds (``1*DIGIT``, ASCII). Any
other value is as if the header were absent: the fetcher backs off as usual and tries again.
"""

from __future__ import annotations

import time

import pytest
from aiohttp import web

from crawler.config import CrawlConfig
from crawler.http.client import Fetcher
from crawler.http.response import parse_retry_after

BAD_VALUES = [
    "²",  # str.isdigit() is true for it, float() refuses it
    "١٢",  # ARABIC-INDIC digits: float() takes them, the RFC does not
    "1.5",
    "-1",
    "+5",
    "1e3",
    "0x10",
    "soon",
    "",
    " ",
    "Wed, 21 Oct 2015 07:28:00",  # no zone
    "Wed, 21 Oct 99999999999999999999 07:28:00 GMT",  # a year that overflows
    "Mon, 99 Foo 99999 99:99:99 GMT",
    "Sun, 06 Nov 1994 08:49:37 +9999",
    "\x7f",
    "9" * 5000 + "x",
]


async def _serve_503_then_200(serve, value: str, status: int):  # type: ignore[no-untyped-def]
    hits: list[float] = []

    async def page(request: web.Request) -> web.Response:
        hits.append(time.monotonic())
        if len(hits) == 1:
            resp = web.Response(status=status, text="busy")
            resp.headers["Retry-After"] = value
            return resp
        return web.Response(text="<a href=/x>ok</a>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    server = await serve(app)
    return str(server.make_url("/")), hits


@pytest.mark.parametrize("status", [503, 429])
@pytest.mark.parametrize("value", BAD_VALUES, ids=lambda v: repr(v[:30]))
async def test_bad_retry_after_backs_off_as_usual(serve, value: str, status: int) -> None:  # type: ignore[no-untyped-def]
    url, hits = await _serve_503_then_200(serve, value, status)
    fetcher = Fetcher(CrawlConfig(retries=2, backoff=0.01, max_retry_after=30.0))
    try:
        res = await fetcher.fetch(url)
    finally:
        await fetcher.close()
    assert (res.status, res.error, res.retries) == (200, None, 1)
    assert len(hits) == 2
    # The usual backoff (0.01 s with jitter), not some wait read from the bad value.
    assert hits[1] - hits[0] < 1.0


@pytest.mark.parametrize(
    ("value", "cap", "low", "high"),
    [
        ("0", 30.0, 0.0, 0.5),
        ("1", 30.0, 0.9, 2.0),
        ("9" * 5000, 0.3, 0.25, 1.5),  # huge but valid: capped by max_retry_after
        ("Wed, 21 Oct 2015 07:28:00 GMT", 30.0, 0.0, 0.5),  # in the past: no wait
    ],
)
async def test_valid_retry_after_still_honoured_and_capped(  # type: ignore[no-untyped-def]
    serve, value: str, cap: float, low: float, high: float
) -> None:
    url, hits = await _serve_503_then_200(serve, value, 503)
    fetcher = Fetcher(CrawlConfig(retries=1, backoff=0.0, max_retry_after=cap))
    try:
        res = await fetcher.fetch(url)
    finally:
        await fetcher.close()
    assert (res.status, res.error) == (200, None)
    assert low <= hits[1] - hits[0] < high


@pytest.mark.parametrize("value", BAD_VALUES, ids=lambda v: repr(v[:30]))
def test_parse_retry_after_rejects(value: str) -> None:
    assert parse_retry_after(value) is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("0", 0.0), ("120", 120.0), (" 7 ", 7.0), ("007", 7.0), ("9" * 400, float("inf"))],
)
def test_parse_retry_after_delay_seconds(value: str, seconds: float) -> None:
    assert parse_retry_after(value) == seconds


def test_parse_retry_after_dates() -> None:
    assert parse_retry_after("Thu, 01 Jan 1970 00:00:20 GMT", now=10.0) == 10.0
    assert parse_retry_after("Thursday, 01-Jan-70 00:00:20 GMT", now=10.0) == 10.0  # RFC 850
    assert parse_retry_after("Thu Jan  1 00:00:20 1970", now=10.0) is None  # asctime: no zone
    assert parse_retry_after("Thu, 01 Jan 1970 00:00:05 GMT", now=10.0) == 0.0
