"""The command line, end to end: the real console script as a subprocess against a real
aiohttp site on 127.0.0.1, plus in-process checks of argument parsing and the README/CI."""

from __future__ import annotations

import ast
import asyncio
import csv
import importlib.metadata
import io
import json
import os
import pty
import re
import shutil
import signal
import socket
import sys
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

from crawler.cli import main as cli
from crawler.cli import options
from crawler.config import KEYS, ConfigError, CrawlConfig

ROOT = Path(__file__).resolve().parent.parent


def console_script() -> list[str]:
    """The installed `crawler` script of this interpreter (else `python -m crawler`)."""
    beside = Path(sys.executable).with_name("crawler")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("crawler")
    return [found] if found else [sys.executable, "-m", "crawler"]


CRAWLER = console_script()


@dataclass
class Done:
    rc: int
    out: str
    err: str

    def lines(self) -> list[str]:
        return self.out.splitlines()


async def run(*args: str, stdin: bytes | None = None, timeout: float = 60) -> Done:
    proc = await asyncio.create_subprocess_exec(
        *CRAWLER,
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


# -- the test site --

# path -> body; every page is HTML. /missing is linked but answers 404.
SITE = {
    "/": (
        '<title>home</title><a href="/a">A</a> <a href="b" rel="nofollow">B</a>'
        ' <a href="http://other.invalid/x">elsewhere</a> <a href="mailto:me@example.org">mail</a>'
        ' <img src="/img.png">'
    ),
    "/a": '<a href="/c">C</a> <a href="/">home</a> <a href="/missing">broken</a>',
    "/b": '<a href="/c?x=1">C1</a> <a href="/a#top">A again</a>',
    "/c": "<p>no links here</p>",
    "/c?x=1": "<p>a leaf</p>",
}
# (source, target, tag, nofollow) of every link occurrence, as the csv format must list them
EDGES = [
    ("/", "/a", "a", False),
    ("/", "/b", "a", True),
    ("/", "http://other.invalid/x", "a", False),
    ("/", "mailto:me@example.org", "a", False),
    ("/a", "/c", "a", False),
    ("/a", "/", "a", False),
    ("/a", "/missing", "a", False),
    ("/b", "/c?x=1", "a", False),
    ("/b", "/a", "a", False),
]
IN_SCOPE = ["/", "/a", "/b", "/c", "/missing", "/c?x=1"]
DEPTH = {"/": 0, "/a": 1, "/b": 1, "/c": 2, "/missing": 2, "/c?x=1": 2}
REFERRER = {"/a": "/", "/b": "/", "/c": "/a", "/missing": "/a", "/c?x=1": "/b"}

Serve = Callable[[web.Application], Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``base = await serve(app)``: ``app`` on 127.0.0.1:<free port>, stopped after the test."""
    runners: list[web.AppRunner] = []

    async def start(app: web.Application) -> str:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        host, port = runner.addresses[0][:2]
        return f"http://{host}:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


def site_app(pages: dict[str, str]) -> web.Application:
    async def handler(request: web.Request) -> web.Response:
        body = pages.get(request.path_qs)
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handler)
    return app


def endless_app(delay: float) -> web.Application:
    """/n/<i> links to five new pages /n/<5i+1..5i+5>, each after ``delay`` seconds."""

    async def handler(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            raise web.HTTPNotFound()
        await asyncio.sleep(delay)
        i = int(request.path.rsplit("/", 1)[-1] or 0)
        links = "".join(f'<a href="/n/{5 * i + k}">{k}</a>' for k in range(1, 6))
        return web.Response(text=f"<p>page {i}</p>{links}", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    return app


@pytest.fixture
async def site(serve: Serve) -> str:
    return await serve(site_app(SITE))


def no_traceback(done: Done) -> None:
    assert "Traceback" not in done.err, done.err
    assert "Exception ignored" not in done.err, done.err


# -- the console script and the output formats --


def test_console_script_is_installed() -> None:
    """The README's install puts `crawler` beside the interpreter; the tests use that script."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"crawler": "crawler.cli.main:main"}
    assert CRAWLER[0] != sys.executable, "console script not installed: run `pip install .` first"


async def test_urls_each_in_scope_url_once(site: str) -> None:
    done = await run("crawl", site + "/")
    no_traceback(done)
    assert done.rc == 0, done.err
    assert sorted(done.lines()) == sorted(site + p for p in IN_SCOPE)
    assert done.lines()[0] == site + "/", "the seed comes first"
    # the summary goes to stderr, not stdout; no live line when stderr is not a terminal
    assert "crawler: done in" in done.err and "6 pages (5 ok, 1 failed)" in done.err
    assert "errors: http_404 1" in done.err
    assert "\r" not in done.err


async def test_urls_all_links_marks_the_others(site: str) -> None:
    done = await run("crawl", site + "/", "--all-links", "--quiet")
    assert done.rc == 0, done.err
    assert done.err == ""
    lines = done.lines()
    assert sorted(lines) == sorted(
        [site + p for p in IN_SCOPE]
        + ["http://other.invalid/x\texternal", "mailto:me@example.org\tother"]
    )


async def test_jsonl_one_record_a_fetched_page(site: str) -> None:
    done = await run("crawl", site + "/", "--format", "jsonl", "-q")
    assert done.rc == 0, done.err
    records = [json.loads(line) for line in done.lines()]
    by_url = {r["url"].removeprefix(site): r for r in records}
    assert sorted(by_url) == sorted(IN_SCOPE)
    for path, rec in by_url.items():
        assert rec["depth"] == DEPTH[path]
        ref = REFERRER.get(path)
        assert rec["referrer"] == (site + ref if ref else None)
        assert rec["final_url"] == site + path
        assert rec["elapsed_ms"] >= 0
        if path == "/missing":
            assert (rec["status"], rec["error"]) == (404, "http_404")
            continue
        assert (rec["status"], rec["error"]) == (200, None)
        assert rec["content_type"] == "text/html"
        assert rec["bytes"] == len(SITE[path].encode())
        expected = [t if ":" in t else site + t for s, t, _, _ in EDGES if s == path]
        assert rec["links"] == expected


async def test_csv_one_row_a_link(site: str) -> None:
    done = await run("crawl", site + "/", "--format", "csv", "-q")
    assert done.rc == 0, done.err
    rows = list(csv.reader(io.StringIO(done.out)))
    assert rows[0] == ["source", "target", "tag", "nofollow"]
    got = sorted(tuple(r) for r in rows[1:])
    want = sorted(
        (site + s, t if ":" in t else site + t, tag, "true" if nf else "false")
        for s, t, tag, nf in EDGES
    )
    assert got == want


async def test_output_file_leaves_stdout_empty(site: str, tmp_path: Path) -> None:
    out = tmp_path / "links.txt"
    done = await run("crawl", site + "/", "-o", str(out), "-q")
    assert done.rc == 0 and done.out == ""
    assert sorted(out.read_text().splitlines()) == sorted(site + p for p in IN_SCOPE)


async def test_config_file_with_overrides(site: str, tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text(
        f'seeds = ["{site}/"]\n'
        "[limits]\nmax_pages = 2\n"
        '[scope]\nexclude = ["/b$"]\n'
        '[output]\nformat = "csv"\n'
    )
    # the file alone: csv, two pages, /b never fetched
    done = await run("crawl", "--config", str(config), "-q")
    assert done.rc == 0, done.err
    sources = {r[0] for r in list(csv.reader(io.StringIO(done.out)))[1:]}
    assert sources == {site + "/", site + "/a"}
    # flags override the file: jsonl, no page limit; the file's exclude still holds
    done = await run("crawl", "--config", str(config), "--format", "jsonl", "--max-pages", "0")
    assert done.rc == 0, done.err
    fetched = sorted(json.loads(line)["url"].removeprefix(site) for line in done.lines())
    assert fetched == ["/", "/a", "/c", "/missing"]  # /b excluded, so /c?x=1 never found
    # a URL on the command line replaces the file's seeds
    done = await run("crawl", site + "/c", "--config", str(config), "-f", "urls")
    assert done.lines() == [site + "/c"]


async def test_seed_that_fails_exits_1(serve: Serve) -> None:
    base = await serve(site_app({}))
    done = await run("crawl", base + "/", "--retries", "0")
    no_traceback(done)
    assert done.rc == 1, done.err
    assert "0 ok, 1 failed" in done.err and "errors: http_404 1" in done.err
    # nothing listens on a port we bound and closed: a connect error, still exit 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = await run("crawl", f"http://127.0.0.1:{port}/", "--retries", "0")
    no_traceback(done)
    assert done.rc == 1, done.err
    assert "errors: connect 1" in done.err


BAD = [
    # (file text or None, args, message on stderr)
    ("max_page = 5\n", [], "crawl.toml: max_page: unknown key (did you mean 'max_pages'?)"),
    ('concurrency = "many"\n', [], "crawl.toml: concurrency: must be an integer; got a string"),
    ('[scope]\ninclude = ["("]\n', [], "crawl.toml: include: item 0 is not a valid regular exp"),
    ('seeds = ["example.org"]\n', [], "crawl.toml: seeds: 'example.org' is not an http(s) URL"),
    ("max_pages = = 1\n", [], "crawl.toml: invalid TOML"),
    (None, ["--concurrency", "-1"], "--concurrency: must be >= 1; got -1"),
    (None, ["--delay", "nan"], "--delay: must be a finite number >= 0; got nan"),
    (None, ["--include", "(x"], "--include: item 0 is not a valid regular expression"),
    (None, ["ftp://example.org/"], "URL 'ftp://example.org/' is not an http(s) URL"),
    (None, ["example.org"], "URL 'example.org' is not an http(s) URL (did you mean"),
    (None, ["--config", "/nonexistent/crawl.toml"], "crawl.toml: cannot read config file"),
    (None, ["--max-pages", "ten"], "argument --max-pages: invalid int value: 'ten'"),
    (None, ["--max-pagez", "3"], "unrecognized arguments: --max-pagez"),
    (None, ["--scope", "planet"], "argument --scope: invalid choice: 'planet'"),
    (None, ["-o", "/nonexistent/dir/out.txt"], "cannot open output file '/nonexistent/dir/out"),
    (None, [], "no seed URL"),
]


@pytest.mark.parametrize(("text", "args", "message"), BAD)
async def test_bad_input_exits_2_with_its_reason(
    tmp_path: Path, text: str | None, args: list[str], message: str
) -> None:
    argv = ["crawl", *args]
    if text is not None:
        path = tmp_path / "crawl.toml"
        path.write_text(text)
        argv += ["--config", str(path)]
    if not any(a.startswith(("http", "ftp", "example")) for a in args) and text is None:
        if args:  # a good seed (never reached: the error comes first)
            argv.append("http://127.0.0.1:9/")
    done = await run(*argv)
    no_traceback(done)
    assert done.rc == 2, (done.rc, done.err)
    assert message in done.err
    assert done.out == ""


async def test_no_command_and_version() -> None:
    done = await run()
    assert done.rc == 2 and "a command is required" in done.err
    done = await run("--version")
    assert done.rc == 0
    assert re.fullmatch(
        r"crawler \d+\.\d+\.\d+ \(extractor: (py|c); event loop: (uvloop|asyncio); "
        r"Python 3\.\d+\.\d+\)\n",
        done.out,
    ), done.out
    assert (await run("crawl", "--version")).out == done.out  # `docker run IMAGE --version`
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", "--version", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert out.decode() == done.out


async def test_help_shows_every_option_with_its_default() -> None:
    done = await run("crawl", "--help")
    assert done.rc == 0
    text = " ".join(done.out.split())
    for option in options._OPTIONS.values():
        flag = option[0][0]
        assert re.search(re.escape(flag) + r"\b.*?\(default: [^)]", text), flag
    assert "exit codes: 0 done, 1" in text


# -- signals, closed pipes, the live line --


async def start_slow_crawl(base: str, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *CRAWLER,
        "crawl",
        base + "/n/0",
        "--format",
        "jsonl",
        "--concurrency",
        "4",
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
async def test_signal_stops_cleanly(serve: Serve, sig: signal.Signals, code: int) -> None:
    base = await serve(endless_app(delay=0.05))
    proc = await start_slow_crawl(base)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        first = [await asyncio.wait_for(proc.stdout.readline(), 30) for _ in range(3)]
        proc.send_signal(sig)
        rest, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    out = b"".join(first) + rest
    done = Done(proc.returncode or 0, out.decode(), err.decode())
    no_traceback(done)
    assert done.rc == code, done.err
    assert out.endswith(b"\n"), "a half-written last line"
    records = [json.loads(line) for line in done.lines()]  # every line is whole JSON
    assert len(records) >= 3
    assert f"crawler: stopped ({sig.name}) in" in done.err
    pages = int(re.search(r" (\d+) pages \(", done.err).group(1))  # type: ignore[union-attr]
    assert pages >= len(records)


async def test_sigint_cancels_requests_in_flight(serve: Serve) -> None:
    """A server that never answers: Ctrl-C must not wait for the 60 s timeout."""
    hung, release = asyncio.Event(), asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            raise web.HTTPNotFound()
        hung.set()
        await release.wait()  # the server's shutdown would wait for a sleeping handler
        return web.Response(text="late")

    app = web.Application()
    app.router.add_get("/{tail:.*}", hang)
    base = await serve(app)
    proc = await asyncio.create_subprocess_exec(
        *CRAWLER,
        "crawl",
        base + "/hang",
        "--timeout",
        "60",
        "--read-timeout",
        "60",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await asyncio.wait_for(hung.wait(), 30)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        elapsed = loop.time() - t0
    finally:
        release.set()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130, err
    assert elapsed < 10, f"took {elapsed:.1f}s to stop"
    assert out.decode() == base + "/hang\n"
    assert "crawler: stopped (SIGINT)" in err.decode()


async def test_closed_pipe_ends_the_crawl_quietly(serve: Serve) -> None:
    base = await serve(endless_app(delay=0.01))
    script = " ".join(f"'{a}'" for a in CRAWLER)
    for quiet in ("--quiet", ""):
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            f"set -o pipefail; {script} crawl {base}/n/0 {quiet} | head -1",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert out.decode() == f"{base}/n/0\n"
        assert err.decode() == "", "no traceback, no summary"
        assert proc.returncode == 0


async def on_a_terminal(*args: str, stdout_too: bool) -> tuple[int, str]:
    """Run with stderr (and maybe stdout) on a pseudo-terminal; return its exit code and text."""
    master, slave = pty.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(
            *CRAWLER,
            *args,
            stdout=slave if stdout_too else asyncio.subprocess.DEVNULL,
            stderr=slave,
        )
        os.close(slave)
        slave = -1
        chunks = []
        loop = asyncio.get_running_loop()
        while True:  # read while it runs: a full terminal buffer would block the crawler
            try:
                data = await loop.run_in_executor(None, os.read, master, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not data:
                break
            chunks.append(data)
        rc = await asyncio.wait_for(proc.wait(), 60)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    return rc, b"".join(chunks).decode()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
async def test_output_that_cannot_be_written_exits_1(site: str) -> None:
    done = await run("crawl", site + "/", "-o", "/dev/full")
    no_traceback(done)
    assert done.rc == 1
    assert "crawler: error: cannot write output: No space left on device" in done.err
    assert "crawler: stopped (output error) in" in done.err


async def test_extract_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    path = tmp_path / "big.html"
    path.write_bytes(b"".join(b'<a href="/p/%d">x</a>' % i for i in range(200_000)))
    script = " ".join(f"'{a}'" for a in CRAWLER)
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        f"set -o pipefail; {script} extract '{path}' --base https://s.test/ | head -2",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert out.decode().splitlines() == ["https://s.test/p/0", "https://s.test/p/1"]
    assert err.decode() == ""
    assert proc.returncode == 0


async def test_live_progress_line_on_a_terminal(serve: Serve) -> None:
    base = await serve(endless_app(delay=0.05))
    args = ("crawl", base + "/n/0", "--max-pages", "30", "--concurrency", "2")
    rc, tty = await on_a_terminal(*args, stdout_too=False)
    assert rc == 0
    assert "\r\x1b[Kpages " in tty
    assert re.search(r"pages \d+ \| in flight \d+ \| queued \d+ \| [\d.]+ pages/s \| errors 0", tty)
    assert "crawler: done in" in tty and "30 pages (30 ok, 0 failed)" in tty
    # stdout on the same terminal: each URL on a line of its own, never after the live line
    rc, tty = await on_a_terminal(*args, stdout_too=True)
    assert rc == 0
    assert "\r\x1b[Kpages " in tty
    lines = re.split(r"\r\n|\r\x1b\[K|\n", tty)
    urls = [ln for ln in lines if "/n/" in ln]
    assert len(urls) > 30 and all(re.fullmatch(re.escape(base) + r"/n/\d+", u) for u in urls)


# -- crawler extract --

DOC = (
    b'<base href="/dir/"><a href="a.html">1</a><a href="a.html#x">2</a>'
    b'<a href="//other.test/" rel="nofollow">3</a><img src="i.png">'
)


async def test_extract_formats(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_bytes(DOC)
    base = "https://s.test/x/page.html"
    done = await run("extract", str(path), "--base", base)
    assert done.rc == 0, done.err
    assert done.lines() == ["https://s.test/dir/a.html", "https://other.test/"]
    done = await run("extract", "-", "--base", base, "--resources", stdin=DOC)
    assert done.lines() == [
        "https://s.test/dir/a.html",
        "https://other.test/",
        "https://s.test/dir/i.png",
    ]
    done = await run("extract", str(path), "--base", base, "--format", "jsonl")
    records = [json.loads(line) for line in done.lines()]
    assert [(r["url"], r["raw"], r["tag"], r["attr"], r["nofollow"]) for r in records] == [
        ("https://s.test/dir/a.html", "a.html", "a", "href", False),
        ("https://s.test/dir/a.html", "a.html#x", "a", "href", False),
        ("https://other.test/", "//other.test/", "a", "href", True),
    ]
    done = await run("extract", str(path), "--base", base, "-f", "csv")
    assert list(csv.reader(io.StringIO(done.out))) == [
        ["source", "target", "tag", "nofollow"],
        [base, "https://s.test/dir/a.html", "a", "false"],
        [base, "https://s.test/dir/a.html", "a", "false"],
        [base, "https://other.test/", "a", "true"],
    ]


async def test_extract_errors(tmp_path: Path) -> None:
    done = await run("extract", str(tmp_path / "nope.html"), "--base", "https://s.test/")
    assert done.rc == 2 and "nope.html" in done.err and "No such file" in done.err
    done = await run("extract", "-", "--base", "s.test", stdin=b"")
    assert done.rc == 2 and "--base: 's.test' is not an http(s) URL" in done.err
    done = await run("extract", "-", stdin=b"")
    assert done.rc == 2 and "--base" in done.err
    no_traceback(done)


# -- in-process: argument parsing --


def parse(*argv: str) -> object:
    return options.config_from_args(cli.build_parser().parse_args(["crawl", *argv]))


def test_flags_become_config_keys(tmp_path: Path) -> None:
    config = parse(
        "https://s.test/",
        "--max-pages=7",
        "--include",
        "a",
        "--include",
        "b",
        "--drop-param",
        "utm_source",
        "--ignore-robots",
        "--resources",
        "-c",
        "3",
        "--timeout",
        "2.5",
    )
    assert config == CrawlConfig(
        seeds=("https://s.test/",),
        max_pages=7,
        include=("a", "b"),
        drop_params=("utm_source",),
        ignore_robots=True,
        link_set="resources",
        concurrency=3,
        timeout=2.5,
    )
    path = tmp_path / "c.toml"
    path.write_text("ignore_robots = true\nquiet = true\nmax_pages = 9\n")
    config = parse("https://s.test/", "--config", str(path), "--no-ignore-robots")
    assert (config.ignore_robots, config.quiet, config.max_pages) == (False, True, 9)  # type: ignore[attr-defined]


def test_every_key_has_a_flag() -> None:
    assert set(options._OPTIONS) == set(KEYS) - {"seeds"} - set(options.FILE_ONLY)
    assert set(options.FILE_ONLY) == {"origin_auth"}  # a table: config file only


def test_flag_errors_name_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--per-host: must be >= 1; got 0$"):
        parse("https://s.test/", "--per-host", "0")
    with pytest.raises(SystemExit) as info:
        cli.main(["crawl", "--max-depth", "x"])
    assert info.value.code == 2


# -- the README and CI --


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def setup_commands() -> list[str]:
    """The commands of the README's set-up section (its first code block)."""
    section = readme().split("## Set-up", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```(?:sh|bash|console)?\n(.*?)```", section, flags=re.S)
    assert block, "no code block in the Set-up section"
    return [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]


def test_readme_set_up_is_two_commands_and_ci_runs_the_second() -> None:
    install, test = setup_commands()
    venv = "python3 -m venv .venv && . .venv/bin/activate && "  # PEP 668: works on Debian too
    assert install.startswith(venv + "pip install . && crawler crawl https://")
    assert test == venv + "pip install -e '.[test]' && pytest"
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"\n{test} || status=$?\n" in ci, ".ci/run must run the README's test command verbatim"


def test_readme_documents_exit_codes_and_formats() -> None:
    text = readme()
    for code in ("0", "1", "2", "130", "143"):
        assert re.search(rf"^\| `?{code}`? \|", text, flags=re.M), f"exit code {code}"
    for fmt in ("urls", "jsonl", "csv"):
        assert f"--format {fmt}" in text or f"`{fmt}`" in text
    assert "config.example.toml" in text


def test_every_module_the_tests_import_is_installed_by_the_test_extra() -> None:
    """A fresh `pip install -e '.[test]'` must bring every third-party module the tests import
    (CI's venv has nothing else)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {
        re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower().replace("_", "-")
        for req in project["dependencies"] + project["optional-dependencies"]["test"]
    }
    local = {p.stem for p in (ROOT / "tests").glob("*.py")} | {"crawler", "tests"}
    # the project's own top-level folders of Python code (fuzz/, benchmarks/) are local too
    local |= {p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    imported: set[str] = set()
    for path in (ROOT / "tests").glob("*.py"):  # real imports, not "from the ..." in a docstring
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    third_party = {name for name in imported - local if name not in sys.stdlib_module_names} - {
        "__future__"
    }
    dists = importlib.metadata.packages_distributions()
    missing = {}
    for name in sorted(third_party):
        owners = {d.lower().replace("_", "-") for d in dists.get(name, [name])}
        if not owners & declared:
            missing[name] = sorted(owners)
    assert not missing, f"imported by tests but not in dependencies or the test extra: {missing}"


async def test_urls_format_holds_no_page_links(serve: Serve) -> None:
    # A hostile page of 8 MB of `<a href=/x>` is ~760,000 Link objects (~150 MB) if kept on
    # its PageResult; the urls format never reads them, so the crawl must not hold them. The
    # crawler's peak RSS is read in a wrapper process of its own (RUSAGE_CHILDREN). (The text
    # first: a body with no text at all is the frameset-ok hold-back's case, not this one.)
    dense = "<p>text</p>" + "<a href=/x>" * (8 * 1024 * 1024 // 11)
    app = site_app({"/": dense, "/x": "<p>x"})
    url = await serve(app)
    wrapper = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024\n"
        "print(peak, len(done.stdout.splitlines()), done.returncode)\n"
    )

    async def peak_mb(page: str, *args: str) -> tuple[int, int, int]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", wrapper, *CRAWLER, "crawl", url + page, "-q", "--ignore-robots",
            *args, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
        peak, lines, rc = map(int, out.split())
        return peak, lines, rc

    base_peak, lines, rc = await peak_mb("/x")  # a one-page crawl: the interpreter and aiohttp
    assert rc == 0 and lines == 1
    urls_peak, lines, rc = await peak_mb("/", "-f", "urls")
    assert rc == 0 and lines == 2
    jsonl_peak, lines, rc = await peak_mb("/", "-f", "jsonl")
    assert rc == 0 and lines == 2  # jsonl needs them: one record lists every link
    print(f"peak RSS: one small page {base_peak} MB, urls {urls_peak} MB, jsonl {jsonl_peak} MB")
    assert urls_peak < base_peak + 40, (base_peak, urls_peak)


INVALID_DOC = (
    b'<a href="http://a b/">bad</a><a href="/ok">ok</a><a href="//">x</a><a href="/ok">again</a>'
)


async def test_invalid_links_on_the_command_line(serve: Serve, tmp_path: Path) -> None:
    # A value that does not resolve (Link.url None): extract lists it in jsonl (url null)
    # and nowhere else; crawl --all-links lists it once, raw, marked invalid; jsonl records
    # carry it in invalid_links; the summary counts it. Nothing crashes.
    path = tmp_path / "page.html"
    path.write_bytes(INVALID_DOC)
    base = "https://s.test/"
    done = await run("extract", str(path), "--base", base)
    assert (done.rc, done.lines()) == (0, ["https://s.test/ok"]), done.err
    done = await run("extract", str(path), "--base", base, "-f", "jsonl")
    urls = [json.loads(line)["url"] for line in done.lines()]
    assert urls == [None, "https://s.test/ok", None, "https://s.test/ok"]
    done = await run("extract", str(path), "--base", base, "-f", "csv")
    assert done.rc == 0 and len(done.lines()) == 3  # header + the two valid ones
    url = await serve(site_app({"/": INVALID_DOC.decode(), "/ok": "<p>ok"}))
    done = await run("crawl", url + "/", "--ignore-robots", "--all-links")
    assert done.rc == 0, done.err
    assert done.lines() == [url + "/", "http://a b/\tinvalid", url + "/ok", "//\tinvalid"]
    assert "; 2 invalid" in done.err
    done = await run("crawl", url + "/", "--ignore-robots", "-f", "jsonl")
    records = {r["url"]: r for r in map(json.loads, done.lines())}
    assert records[url + "/"]["invalid_links"] == ["http://a b/", "//"]
