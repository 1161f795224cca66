"""What a new user trips on (issue 25, item 7): ``crawler check``'s help, ``--version``, exit
codes and ``--external``; ``crawl --help``'s shown defaults; ``crawler config``; corpus skips
that say why; the one-line hint when the compiled extractor is missing."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer

from crawler.config import CrawlConfig, load_config

ROOT = Path(__file__).resolve().parent.parent
CMD = [sys.executable, "-m", "crawler"]
HINT = 'crawler: the compiled extractor is not installed (pure Python, slower): see README "Set-up"'


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CMD, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def help_text(command: str) -> str:
    done = cli(command, "--help")
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())


def test_check_help_offers_no_redis_state() -> None:
    text = help_text("check")
    assert "redis://HOST" not in text
    assert "--state DIR keep the check's state in DIR (SQLite)" in text
    assert "a redis:// state is for crawler crawl only (default: in memory)" in text


def test_check_has_version_exit_codes_and_says_resources_is_its_default() -> None:
    done = cli("check", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == cli("--version").stdout and done.stdout.startswith("crawler ")
    text = help_text("check")
    assert "2 usage or config error, 130 SIGINT, 143 SIGTERM" in text
    assert "--resources same as --link-set resources, the default here" in text


def test_crawl_help_shows_the_real_default_of_name() -> None:
    assert "share one database (default: default)" in help_text("crawl")


def test_crawler_config_prints_the_repositorys_example(tmp_path: Path) -> None:
    done = cli("config")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (ROOT / "config.example.toml").read_text(encoding="utf-8")
    assert "config print a commented example config file" in help_text("--help")
    assert "`crawler config` prints an example" in help_text("crawl")
    path = tmp_path / "crawl.toml"  # what a pip user saves is a config the crawl takes
    path.write_text(done.stdout, encoding="utf-8")
    assert load_config(str(path)) == CrawlConfig()


# -- --external, SIGTERM: real runs --


async def _start(app: web.Application, host: str = "127.0.0.1") -> TestServer:
    server = TestServer(app, host=host, port=0)
    await server.start_server()
    return server


async def _check(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *CMD, "check", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_external_is_the_explicit_mirror_of_no_external() -> None:
    gone = web.Application()  # the "external" host: every URL 404
    external = await _start(gone, "127.0.0.2")
    link = f"http://127.0.0.2:{external.port}/gone"

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=f'<a href="{link}">x</a>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    site = await _start(app)
    base = f"http://127.0.0.1:{site.port}/"
    try:
        fast = ("--timeout", "2", "--retries", "0", "-q", "-f", "json")
        off = await _check(base, *fast, "--no-external")
        on = await _check(base, *fast, "--no-external", "--external")  # the last one wins
        plain = await _check(base, *fast)
    finally:
        await site.close()
        await external.close()
    assert off[0] == 0 and link not in off[1], off
    assert on[0] == 1 and link in on[1], on
    assert plain[0] == 1 and link in plain[1], plain


async def test_check_stopped_by_sigterm_exits_143() -> None:
    asked = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        asked.set()
        await asyncio.sleep(30)
        return web.Response(text="late", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", slow)
    site = await _start(app)
    proc = await asyncio.create_subprocess_exec(
        *CMD,
        "check",
        f"http://127.0.0.1:{site.port}/",
        "--timeout",
        "60",
        "--ignore-robots",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await asyncio.wait_for(asked.wait(), 30)
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await site.close()
    assert proc.returncode == 143, err
    assert "crawler check: error: interrupted" in err.decode()
    assert "Traceback" not in err.decode()


# -- the compiled extractor missing: said once at the start --


def _pure_tree(tmp_path: Path) -> Path:
    """A copy of the package without its compiled modules (an install without a compiler)."""
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT / "crawler",
        tree / "crawler",
        ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__"),
    )
    return tree


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLER_")}
    return env | extra


async def _run(*args: str, env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    """``python -m crawler ARGS`` in ``cwd``, off the tree (``-m`` puts cwd first on the path)."""
    proc = await asyncio.create_subprocess_exec(
        *CMD,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_crawl_without_the_compiled_extractor_says_so(tmp_path: Path) -> None:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text='<a href="/a">a</a>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    site = await _start(app)
    url = f"http://127.0.0.1:{site.port}/"
    pure = _env(PYTHONPATH=str(_pure_tree(tmp_path)))
    built = _env(PYTHONPATH=str(ROOT))
    try:
        version = await _run("--version", env=pure, cwd=tmp_path)
        crawl = await _run("crawl", url, "--max-pages", "2", env=pure, cwd=tmp_path)
        check = await _run("check", url, env=pure, cwd=tmp_path)
        quiet = await _run("crawl", url, "--max-pages", "2", "-q", env=pure, cwd=tmp_path)
        asked = await _run(
            "crawl",
            url,
            "--max-pages",
            "2",
            env=pure | {"CRAWLER_NO_EXTENSIONS": "1"},
            cwd=tmp_path,
        )
        compiled = await _run("crawl", url, "--max-pages", "2", env=built, cwd=tmp_path)
        usage = await _run("crawl", "not-a-url", env=pure, cwd=tmp_path)
    finally:
        await site.close()
    assert "extractor: py" in version[1]
    for rc, _, err in (crawl, check):
        assert rc == 0, err
        assert err.splitlines()[0] == HINT  # the first line, once
        assert err.count("compiled extractor") == 1
    assert quiet[0] == 0 and quiet[2] == ""
    assert asked[0] == 0 and "compiled extractor" not in asked[2]
    assert usage[0] == 2 and "compiled extractor" not in usage[2]
    if "extractor: c" in (await _run("--version", env=built, cwd=tmp_path))[1]:
        assert compiled[0] == 0 and "compiled extractor" not in compiled[2]


# -- corpus tests on a fresh clone (no ../shared): every skip names its reason --


def test_corpus_tests_skip_naming_the_missing_corpus(tmp_path: Path) -> None:
    project = tmp_path / "clone"  # no ../shared beside it
    shutil.copytree(ROOT / "tests", project / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(project), str(ROOT)])
    files = ["test_extract_where.py", "test_extract_accel.py", "test_extract_corpus.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-k", "corpus"]
        + [f"tests/{f}" for f in files],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    skips = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips, done.stdout
    assert "got empty parameter set" not in done.stdout
    for line in skips:
        assert "../shared/corpus/pages" in line or "compiled extractor not built" in line, line
