"""``crawler check`` through the real command line (a subprocess): reports and exit codes."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.checksite import LONG_LINES, TIMEOUT, CheckSite, free_port

CMD = [sys.executable, "-m", "crawler", "check"]
FAST = ["--timeout", str(TIMEOUT), "--retries", "0", "--max-redirects", "5"]
FAST += ["--recheck-delay", "0.2"]


async def run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *CMD, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def small_site(serve: Any, body: str) -> str:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=body, content_type="text/html")

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="<p id=here>fine</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/ok", ok)
    server = await serve(app)
    return f"http://127.0.0.1:{server.port}"


async def test_broken_site_exits_1_and_json_lists_them(tmp_path: Path) -> None:
    site = await CheckSite().start()
    try:
        out_file = tmp_path / "report.json"
        code, out, err = await run(site.base + "/", *FAST, "-f", "json", "-o", str(out_file))
    finally:
        await site.close()
    assert code == 1, err
    assert out == ""  # the report went to the file
    data = json.loads(out_file.read_text())
    assert {p["url"]: p["error"] for p in data["broken"]} == {
        u: x.error for u, x in site.broken().items()
    }
    assert data["stats"]["broken"] == len(site.broken())
    deep = next(p for p in data["broken"] if p["url"] == site.base + "/missing")
    assert {"page": site.base + "/long.html", "line": LONG_LINES, "column": 1} in [
        {k: r[k] for k in ("page", "line", "column")} for r in deep["referrers"]
    ]
    assert "broken" in err  # the one-line summary on stderr


async def test_text_report_groups_by_target_with_every_page_and_line() -> None:
    site = await CheckSite().start()
    try:
        code, out, _ = await run(site.base + "/", *FAST, "--no-external")
    finally:
        await site.close()
    assert code == 1
    assert out.count(f"http_404  {site.base}/missing\n") == 1  # one group a target
    block = out.split(f"http_404  {site.base}/missing\n", 1)[1].split("\n\n", 1)[0]
    for page, line, column, *_ in site.expected[site.base + "/missing"].where:
        assert f"{site.base}{page}:{line}:{column}  <a href='/missing'>" in block
    assert site.ext_base not in out


async def test_clean_site_exits_0(serve: Any) -> None:
    base = await small_site(serve, '<a href="/ok">ok</a> <a href="/ok#here">ok</a>')
    code, out, err = await run(base + "/", "--ignore-robots")
    assert code == 0, out + err
    assert "no broken links" in out


async def test_warnings_fail_only_with_fail_on_warnings(serve: Any) -> None:
    base = await small_site(serve, '<a href="/ok">ok</a> <a href="mailto:a@b.org">mail</a>')
    code, out, _ = await run(base + "/", "--ignore-robots")
    assert code == 0
    assert "scheme_unchecked  mailto:a@b.org" in out
    code, _, _ = await run(base + "/", "--ignore-robots", "--fail-on", "warnings")
    assert code == 1


async def test_usage_and_config_errors_exit_2(tmp_path: Path) -> None:
    code, _, err = await run()
    assert code == 2 and "URL" in err
    code, _, err = await run("http://127.0.0.1:1/", "--timeout", "-1")
    assert code == 2 and "--timeout" in err
    code, _, _ = await run("http://127.0.0.1:1/", "--format", "yaml")
    assert code == 2
    code, _, err = await run("http://127.0.0.1:1/", "-o", str(tmp_path / "no" / "such" / "f"))
    assert code == 2 and "output" in err


async def test_every_format_dispatched(serve: Any, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET  # noqa: PLC0415

    base = await small_site(serve, '<a href="/ok">ok</a>\n<a href="/nope">broken</a>')
    for fmt in ("junit", "sarif", "markdown", "html", "json", "text"):
        out = tmp_path / f"r.{fmt}"
        code, stdout, err = await run(base + "/", "--ignore-robots", "-f", fmt, "-o", str(out))
        assert code == 1, err
        text = out.read_text(encoding="utf-8")
        assert base + "/nope" in text, fmt
        if fmt == "junit":
            ET.fromstring(text)
        elif fmt in ("sarif", "json"):
            json.loads(text)


async def test_cache_in_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = await run("http://127.0.0.1:1/", "--cache", str(tmp_path / "no" / "c.json"))
    assert code == 2 and "--cache" in err


async def test_a_site_that_is_down_exits_1(tmp_path: Path) -> None:
    seed = f"http://127.0.0.1:{free_port()}/"
    code, out, _ = await run(seed, "--retries", "0", "--recheck-delay", "0")
    assert code == 1
    assert f"connect  {seed}" in out


async def test_state_dir_that_is_not_a_state_exits_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    code, _, err = await run("http://127.0.0.1:1/", "--state", str(tmp_path))
    assert code == 2 and "not a crawl state" in err


@pytest.mark.parametrize("inherited", ["default", "ignored"])
async def test_sigint_stops_with_130(inherited: str) -> None:
    # "ignored": started with SIGINT ignored, as a non-interactive shell starts a background
    # job (asyncio.run's own Ctrl-C handling is then off: the check used to run to its end)
    site = await CheckSite(page_delay=2.0).start()
    disposition = signal.SIG_IGN if inherited == "ignored" else signal.SIG_DFL
    try:
        proc = await asyncio.create_subprocess_exec(
            *CMD,
            site.base + "/",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, disposition),
        )
        for _ in range(100):
            await asyncio.sleep(0.05)
            if site.hits:
                break
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        await site.close()
    assert proc.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()


async def test_bad_fetch_options_and_a_redis_state_exit_2(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/"  # never fetched: each run must stop at its option
    code, _, err = await run(url, "--cookies", str(tmp_path / "missing.txt"))
    assert code == 2 and "--cookies" in err and "Traceback" not in err, err
    code, _, err = await run(url, "--auth-env", "CRAWLER_TEST_UNSET_VARIABLE")
    assert code == 2 and "--auth-env" in err and "Traceback" not in err, err
    code, _, err = await run(url, "--state", "redis://127.0.0.1:9/0")
    assert code == 2 and "a redis:// state is for crawler crawl" in err, err
    code, _, err = await run(url, "--name", "x")
    assert code == 2 and "unrecognized arguments: --name" in err, err
