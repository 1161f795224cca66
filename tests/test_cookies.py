"""Cookies: a jar per crawl, cookies.txt loaded and saved, a malformed file named by line."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from crawler import crawl
from crawler.config import CrawlConfig
from crawler.http.client import Fetcher
from crawler.http.cookies import (
    Cookie,
    fill_jar,
    format_cookies_txt,
    jar_cookies,
    load_cookies,
    parse_cookies_txt,
    save_cookies,
)
from crawler.http.errors import OptionError
from crawler.http.options import check_options
from crawler.http.session import new_cookie_jar

# base64 with padding: aiohttp's default jar sent it back quoted ("abc==") and the site refused
SESSION = "c2Vzc2lvbi0xMjM0NQ=="


class CookieSite:
    """``/`` sets a session cookie; every other page demands it (403 without it).

    ``/members/*`` also demands ``member=gold``, a cookie only a cookies.txt has.
    ``/private/*`` gets a path-scoped cookie; it must not come back on other paths.
    """

    def __init__(self) -> None:
        self.log: list[tuple[str, str | None]] = []  # (path, Cookie header)

    def app(self) -> web.Application:
        async def any_path(request: web.Request) -> web.Response:
            path = request.path
            self.log.append((path, request.headers.get("Cookie")))
            if path == "/robots.txt":
                return web.Response(text="User-agent: *\nAllow: /\n")
            links = "".join(f"<a href='{p}'>x</a>" for p in ("/p1", "/p2", "/members/a"))
            if path == "/":
                res = web.Response(text=links, content_type="text/html")
                res.headers.add("Set-Cookie", f"sid={SESSION}; Path=/; HttpOnly")
                return res
            if request.cookies.get("sid") != SESSION:
                return web.Response(status=403, text="no session")
            if path.startswith("/members/") and request.cookies.get("member") != "gold":
                return web.Response(status=403, text="members only")
            res = web.Response(text="<a href='/p3'>p3</a>", content_type="text/html")
            if path == "/p1":
                res.headers.add("Set-Cookie", "scoped=1; Path=/private")
            return res

        app = web.Application()
        app.router.add_get("/{tail:.*}", any_path)
        return app


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("# Netscape HTTP Cookie File\n\n" + "".join(x + "\n" for x in lines))
    return path


async def test_the_session_cookie_of_the_first_page_opens_the_rest(serve) -> None:  # type: ignore[no-untyped-def]
    site = CookieSite()
    server = await serve(site.app())
    result = await crawl(str(server.make_url("/")), retries=0, concurrency=1)
    status = {URL(p.url).path: p.status for p in result.pages}
    assert status["/"] == 200 and status["/p1"] == 200 and status["/p2"] == 200
    assert status["/p3"] == 200
    assert status["/members/a"] == 403  # needs the cookie only a file has
    sent = dict(site.log)
    assert sent["/p1"] == f"sid={SESSION}"  # as set: unquoted, on 127.0.0.1 (an IP host)
    assert all("scoped" not in (cookie or "") for _, cookie in site.log)  # Path=/private


async def test_a_cookies_file_is_loaded_and_the_jar_saved(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    site = CookieSite()
    server = await serve(site.app())
    host = server.host
    future = int(time.time()) + 86400
    loaded = _write(
        tmp_path / "in.txt",
        [
            f"{host}\tFALSE\t/members\tFALSE\t{future}\tmember\tgold",
            f"{host}\tFALSE\t/\tFALSE\t1000\texpired\tgone",  # 1970: skipped
            f"#HttpOnly_{host}\tFALSE\t/\tFALSE\t0\tpref\tdark",
        ],
    )
    out = tmp_path / "out.txt"
    out.write_text("old\n")
    out.chmod(0o644)
    result = await crawl(
        str(server.make_url("/")), cookies=str(loaded), save_cookies=str(out), retries=0
    )
    status = {URL(p.url).path: p.status for p in result.pages}
    assert status["/members/a"] == 200
    assert all("expired" not in (c or "") for _, c in site.log)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left
    saved = {c.name: c for c in load_cookies(out)}
    assert set(saved) == {"member", "pref", "sid", "scoped"}
    assert saved["member"] == Cookie(host, False, "/members", False, future, "member", "gold")
    assert saved["sid"].value == SESSION and saved["sid"].http_only and saved["sid"].expires == 0
    assert saved["pref"].http_only and saved["scoped"].path == "/private"
    # round trip: a new crawl starting past the first page gets in with the saved session
    site.log.clear()
    again = await crawl(str(server.make_url("/p2")), cookies=str(out), retries=0, max_pages=1)
    assert [p.status for p in again.pages] == [200]
    path, header = site.log[-1]
    assert path == "/p2" and f"sid={SESSION}" in (header or "").split("; "), site.log


def test_parse_reports_the_line_and_the_reason() -> None:
    good = "127.0.0.1\tFALSE\t/\tTRUE\t0\ta\tb c"
    cases = [
        ("127.0.0.1\tFALSE\t/\tFALSE\t0\tname", "line 3: expected 7 TAB-separated fields, got 6"),
        ("example.com TRUE / FALSE 0 n v", "got 1 (spaces are not separators)"),
        ("example.com\tYES\t/\tFALSE\t0\tn\tv", "line 3: field 2 must be TRUE or FALSE"),
        ("example.com\tTRUE\tnope\tFALSE\t0\tn\tv", "the path (field 3) must start with '/'"),
        ("example.com\tTRUE\t/\tFALSE\tnever\tn\tv", "the expiry (field 5) must be Unix seconds"),
        ("example.com\tTRUE\t/\tFALSE\t0\t\tv", "the cookie name (field 6) is empty"),
        ("\tTRUE\t/\tFALSE\t0\tn\tv", "the domain (field 1) is empty"),
    ]
    for bad, reason in cases:
        with pytest.raises(OptionError) as err:
            parse_cookies_txt(f"# comment\n{good}\n{bad}\n", where="c.txt")
        assert err.value.option == "--cookies"
        assert str(err.value).startswith("--cookies: c.txt: line 3: ")
        assert reason in str(err.value), (bad, str(err.value))
    [c] = parse_cookies_txt(good + "\r\n")
    assert (c.domain, c.secure, c.value, c.include_subdomains) == ("127.0.0.1", True, "b c", False)
    [d] = parse_cookies_txt(".Example.COM\tTRUE\t/\tFALSE\t1700000000.5\tn\tv")
    assert (d.domain, d.include_subdomains, d.expires) == ("example.com", True, 1700000000)


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="no-such.txt: No such file"):
        load_cookies(tmp_path / "no-such.txt")
    (tmp_path / "bin.txt").write_bytes(b"# x\n\xff\xfe\n")
    with pytest.raises(OptionError, match="line 2: not UTF-8"):
        load_cookies(tmp_path / "bin.txt")
    with pytest.raises(OptionError, match="--save-cookies: .*no such directory"):
        check_options(CrawlConfig(save_cookies=str(tmp_path / "nodir" / "c.txt")))
    with pytest.raises(OptionError, match="--cookies"):
        Fetcher(CrawlConfig(cookies=str(tmp_path / "bin.txt")))


async def test_domain_and_host_only_cookies_keep_their_scope() -> None:
    jar = new_cookie_jar()
    cookies = parse_cookies_txt(
        ".example.com\tTRUE\t/\tFALSE\t0\twide\t1\n"
        "example.com\tFALSE\t/\tFALSE\t0\thost\t2\n"
        "example.com\tFALSE\t/\tTRUE\t0\tsec\t3\n"
        "example.com\tFALSE\t/\tFALSE\t0\tpath\t4\n"  # a name the jar cannot hold: skipped
    )
    assert len(cookies) == 4 and fill_jar(jar, cookies) == 3
    cookies = cookies[:3]
    assert set(jar.filter_cookies(URL("http://www.example.com/"))) == {"wide"}
    assert set(jar.filter_cookies(URL("http://example.com/"))) == {"wide", "host"}
    assert set(jar.filter_cookies(URL("https://example.com/"))) == {"wide", "host", "sec"}
    assert sorted(jar_cookies(jar), key=lambda c: c.name) == sorted(cookies, key=lambda c: c.name)
    # an IP host's cookies go back to that address only
    jar.update_cookies_from_headers(["ip=1; Path=/"], URL("http://127.0.0.1:8080/x"))
    assert set(jar.filter_cookies(URL("http://127.0.0.1/"))) == {"ip"}  # any port, as browsers
    assert set(jar.filter_cookies(URL("http://127.0.0.2/"))) == set()
    jar.clear_domain("127.0.0.1")
    text = format_cookies_txt(jar_cookies(jar))
    assert text.startswith("# Netscape HTTP Cookie File\n")
    assert ".example.com\tTRUE\t/\tFALSE\t0\twide\t1\n" in text


async def test_max_age_cookie_saved_with_its_absolute_expiry(tmp_path: Path) -> None:
    jar = new_cookie_jar()
    jar.update_cookies_from_headers(["t=1; Max-Age=3600"], URL("http://127.0.0.1/x/y"))
    assert isinstance(jar, aiohttp.CookieJar)
    save_cookies(jar, tmp_path / "c.txt")
    [c] = load_cookies(tmp_path / "c.txt")
    assert abs(c.expires - (time.time() + 3600)) < 60 and c.path == "/x"


def test_cli_malformed_cookies_file_exits_2(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad.txt", ["example.com\tTRUE\t/\tFALSE\t0\tname"])
    proc = subprocess.run(
        [sys.executable, "-m", "crawler", "crawl", "http://127.0.0.1:9/", "--cookies", str(bad)],
        capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--cookies" in proc.stderr and "line 3" in proc.stderr, proc.stderr


async def test_a_cookie_set_on_a_redirect_is_sent_to_its_target(serve) -> None:  # type: ignore[no-untyped-def]
    """A login-style hop: 302 + Set-Cookie, the target demands the cookie (hop by hop)."""
    seen: list[str | None] = []

    async def login(request: web.Request) -> web.Response:
        res = web.Response(status=302, headers={"Location": "/home"})
        res.set_cookie("auth", "t0k=n", path="/")
        return res

    async def home(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Cookie"))
        if request.cookies.get("auth") != "t0k=n":
            return web.Response(status=403)
        return web.Response(text="welcome", content_type="text/html")

    app = web.Application()
    app.router.add_get("/login", login)
    app.router.add_get("/home", home)
    server = await serve(app)
    result = await crawl(str(server.make_url("/login")), retries=0, ignore_robots=True)
    [page] = result.pages
    assert page.status == 200 and page.final_url == str(server.make_url("/home"))
    assert seen == ["auth=t0k=n"]


async def test_one_file_carries_the_cookies_across_a_ctrl_c(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``--cookies F --save-cookies F``: the jar is written at Ctrl-C too; the next run uses it."""

    async def page(request: web.Request) -> web.Response:
        i = int(request.match_info["i"])
        if i > 0 and request.cookies.get("sid") != SESSION:
            return web.Response(status=403)
        await asyncio.sleep(0.05)
        res = web.Response(text=f"<a href='/n/{i + 1}'>next</a>", content_type="text/html")
        if i == 0:
            res.headers.add("Set-Cookie", f"sid={SESSION}; Path=/")
        return res

    app = web.Application()
    app.router.add_get("/n/{i}", page)
    server = await serve(app)
    jar = tmp_path / "jar.txt"  # not there yet: the first run starts empty
    first_run = await crawl(
        str(server.make_url("/n/0")), cookies=str(jar), save_cookies=str(jar), max_pages=1,
        ignore_robots=True,
    )  # fmt: skip
    assert [p.status for p in first_run.pages] == [200]
    assert {c.name for c in load_cookies(jar)} == {"sid"}
    with pytest.raises(OptionError, match="missing.txt: No such file"):
        check_options(CrawlConfig(cookies=str(tmp_path / "missing.txt"), save_cookies=str(jar)))
    _write(jar, [f"{server.host}\tFALSE\t/\tFALSE\t0\tpref\tdark"])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", "crawl", str(server.make_url("/n/0")), "-f", "jsonl",
        "--ignore-robots", "--cookies", str(jar), "--save-cookies", str(jar),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        first = [await asyncio.wait_for(proc.stdout.readline(), 30) for _ in range(3)]
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130, err
    assert all(b'"status":200' in line for line in first), first
    saved = {c.name: c.value for c in load_cookies(jar)}
    assert saved == {"pref": "dark", "sid": SESSION}
    again = await crawl(
        str(server.make_url("/n/7")), cookies=str(jar), max_pages=1, ignore_robots=True
    )
    assert [p.status for p in again.pages] == [200]


async def test_a_jar_that_cannot_be_saved_is_logged(serve, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    site = CookieSite()
    server = await serve(site.app())
    folder = tmp_path / "gone"
    folder.mkdir()
    fetcher = Fetcher(CrawlConfig(save_cookies=str(folder / "c.txt"), retries=0))
    await fetcher.fetch(str(server.make_url("/")))
    folder.rmdir()  # after the start-up check
    await fetcher.close()
    assert isinstance(fetcher.cookies_error, OptionError)
    assert "--save-cookies" in str(fetcher.cookies_error)
    assert "cannot save the cookies: --save-cookies: " in caplog.text
