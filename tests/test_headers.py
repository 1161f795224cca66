"""--header: sent on every request, after our defaults (a user's name replaces ours)."""

from __future__ import annotations

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from crawler import crawl
from crawler.config import DEFAULT_USER_AGENT, CrawlConfig
from crawler.http.client import Fetcher
from crawler.http.errors import OptionError
from crawler.http.options import parse_headers


def _echo_app(seen: list[tuple[str, list[tuple[str, str]]]]) -> web.Application:
    """Records every request's header lines; / links to /a, /a to /b."""

    async def any_path(request: web.Request) -> web.Response:
        seen.append((request.path, list(request.headers.items())))
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        nxt = {"/": "/a", "/a": "/b"}.get(request.path, "/")
        return web.Response(text=f"<a href='{nxt}'>n</a>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", any_path)
    return app


def _values(headers: list[tuple[str, str]], name: str) -> list[str]:
    return [v for k, v in headers if k.lower() == name.lower()]


async def test_headers_on_every_request_of_a_crawl(serve) -> None:  # type: ignore[no-untyped-def]
    seen: list[tuple[str, list[tuple[str, str]]]] = []
    server = await serve(_echo_app(seen))
    await crawl(
        str(server.make_url("/")),
        headers=("X-Api-Token: t0ken", "X-Multi: one", "X-Multi: two", "X-Empty:"),
        retries=0,
    )
    assert {path for path, _ in seen} == {"/robots.txt", "/", "/a", "/b"}
    for path, headers in seen:
        assert _values(headers, "X-Api-Token") == ["t0ken"], path
        assert _values(headers, "X-Multi") == ["one", "two"], path
        assert _values(headers, "X-Empty") == [""], path
        assert _values(headers, "User-Agent") == [DEFAULT_USER_AGENT], path  # ours stays


async def test_a_user_header_replaces_ours_not_doubles_it(serve) -> None:  # type: ignore[no-untyped-def]
    seen: list[tuple[str, list[tuple[str, str]]]] = []
    server = await serve(_echo_app(seen))
    config = CrawlConfig(
        user_agent="set-by-flag/1",
        headers=("user-agent: MyBrowser/2.0", "Accept: text/html"),
        retries=0,
    )
    fetcher = Fetcher(config)
    try:
        res = await fetcher.fetch(str(server.make_url("/")))
    finally:
        await fetcher.close()
    assert res.status == 200
    headers = seen[0][1]
    assert _values(headers, "User-Agent") == ["MyBrowser/2.0"]
    assert _values(headers, "Accept") == ["text/html"]
    # --user-agent alone still sets it
    seen.clear()
    fetcher = Fetcher(CrawlConfig(user_agent="set-by-flag/1", retries=0))
    try:
        await fetcher.fetch(str(server.make_url("/")))
    finally:
        await fetcher.close()
    assert _values(seen[0][1], "User-Agent") == ["set-by-flag/1"]


def test_parse_headers() -> None:
    assert parse_headers(["A: b", "C:d ", "E:  spaced value\t"]) == [
        ("A", "b"),
        ("C", "d"),
        ("E", "spaced value"),
    ]
    for bad, why in (
        ("no colon", "no colon"),
        ("Bad Name: x", "not a valid header name"),
        ("X: a\r\nInjected: 1", "line break"),
    ):
        with pytest.raises(OptionError) as err:
            parse_headers([bad])
        assert err.value.option == "--header" and why in str(err.value)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["X-A", "x-a", "User-Agent", "user-agent", "ACCEPT", "Accept", "X-B"]),
            st.text(alphabet="abc =;", max_size=5),
        ),
        max_size=8,
    )
)
def test_header_list_is_what_a_cimultidict_built_so_holds(pairs: list[tuple[str, str]]) -> None:
    """The plain path's request headers (``header_list``, no multidict) are the aiohttp
    session's: ours first, a name the user gives replaces ours (any case), user repeats kept."""
    from crawler.http.options import ACCEPT, header_list, session_headers  # noqa: PLC0415

    config = CrawlConfig(seeds=("http://a.test/",), headers=tuple(f"{n}: {v}" for n, v in pairs))
    cimultidict = type(session_headers(config))  # multidict's, as aiohttp's session gets it
    ref = cimultidict({"User-Agent": config.user_agent, "Accept": ACCEPT})
    replaced: set[str] = set()
    for name, value in parse_headers(config.headers):
        if name.lower() not in replaced:
            ref.popall(name, None)
            replaced.add(name.lower())
        ref.add(name, value)
    assert header_list(config) == list(ref.items())
    assert list(session_headers(config).items()) == list(ref.items())
