"""The command line of issues 11 and 14: the new flags, their errors (exit 2, naming the
option and the reason), and the secrets rule: a credential never appears in stdout, stderr,
the state directory, or ``crawler status``; a resumed crawl asks for it again."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import sys
from pathlib import Path

import pytest
from aiohttp import web

from crawler.cli import main as cli
from crawler.cli import options
from crawler.config import CrawlConfig
from tests.conftest import ServeApp
from tests.test_cli import CRAWLER, Done, no_traceback
from tests.test_cli_state import files_of as files_of_dir

USER, PASSWORD = "alice", "Pw-7s3cr3t-Q"
TOKEN = "tok-93ZZ-q"
SECRETS = (
    PASSWORD,
    TOKEN,
    base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),  # the Authorization value
)


async def run_env(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Done:
    """The console script with ``env`` added to (or, for a value None, removed from) ours."""
    environ = dict(os.environ)
    for key, value in (env or {}).items():
        environ[key] = value
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "CL_PW"):
        if key not in (env or {}):
            environ.pop(key, None)
    proc = await asyncio.create_subprocess_exec(
        *CRAWLER,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environ,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


def no_secret(*texts: str | bytes) -> None:
    for text in texts:
        data = text.encode() if isinstance(text, str) else text
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret!r} leaked"


def main(capsys: pytest.CaptureFixture[str], *argv: str) -> Done:
    """``crawler ARGV`` in this process (for errors raised before any crawl starts)."""
    try:
        rc = cli.main(list(argv))
    except SystemExit as exc:
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return Done(rc, out, err)


# -- the flags --


def parse(*argv: str) -> CrawlConfig:
    config = options.config_from_args(cli.build_parser().parse_args(["crawl", *argv]))
    assert isinstance(config, CrawlConfig)
    return config


def test_the_new_flags_become_config_keys() -> None:
    config = parse(
        "http://127.0.0.1:1/",
        *("--header", "X-A: 1", "-H", "Accept-Language: fr"),
        *("--cookies", "in.txt", "--save-cookies", "out.txt"),
        *("--auth", "u:p:with:colons", "--proxy", "http://127.0.0.1:3128"),
        *("--warc", "c.warc.gz", "--state", "redis://127.0.0.1:6379/3", "--name", "site-1"),
        *("--lease-timeout", "90", "--metrics-port", "9100", "--metrics-host", "::1"),
    )
    assert config.headers == ("X-A: 1", "Accept-Language: fr")
    assert (config.cookies, config.save_cookies) == ("in.txt", "out.txt")
    assert (config.auth, config.proxy, config.warc) == (
        "u:p:with:colons",
        "http://127.0.0.1:3128",
        "c.warc.gz",
    )
    assert (config.state, config.name, config.lease_timeout) == (
        "redis://127.0.0.1:6379/3",
        "site-1",
        90.0,
    )
    assert (config.metrics_port, config.metrics_host) == (9100, "::1")
    assert parse("http://127.0.0.1:1/", "--auth-env", "CL_PW").auth_env == "CL_PW"


def test_origin_auth_is_config_file_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[http.origin_auth]\n"https://a.test:8443" = "u:p"\n')
    assert parse("https://a.test:8443/", "--config", str(path)).origin_auth == {
        "https://a.test:8443": "u:p"
    }
    done = main(capsys, "crawl", "https://a.test/", "--origin-auth", "x")
    assert done.rc == 2 and "unrecognized arguments: --origin-auth" in done.err


def test_help_lists_the_new_options(capsys: pytest.CaptureFixture[str]) -> None:
    done = main(capsys, "crawl", "--help")
    assert done.rc == 0
    text = " ".join(done.out.split())
    for flag in (
        "--header 'NAME: VALUE'",
        "--cookies FILE",
        "--save-cookies FILE",
        "--auth USER:PASSWORD",
        "--auth-env VAR",
        "--proxy URL",
        "--warc FILE",
        "--name NAME",
        "--lease-timeout S",
        "--metrics-port PORT",
        "--metrics-host HOST",
        "sitemap",
    ):
        assert flag in text, flag
    assert "with a redis:// state: across all workers, fixed for the crawl" in text
    assert "never stored or printed" in text
    done = main(capsys, "status", "--help")
    assert "--name NAME" in done.out and "redis://" in done.out


# -- errors: exit 2, the option and the reason, no secret --


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--header", f"X-Api-Key {TOKEN}"],
            "--header: item 0: 'X-Api-Key ...' is not 'Name: va",
        ),
        (
            ["--header", "A: 1", "-H", "B C: 2"],
            "--header: item 1: 'B C' is not a valid header na",
        ),
        (["--proxy", "socks5://127.0.0.1:1080"], "--proxy: 'socks5://127.0.0.1:1080': SOCKS prox"),
        (["--proxy", f"socks5h://u:{PASSWORD}@h:1"], "'socks5h://u:***@h:1': SOCKS proxies are no"),
        (
            ["--proxy", "127.0.0.1:3128"],
            "--proxy: '127.0.0.1:3128' is not an http(s)://HOST[:PORT]",
        ),
        (["--auth", PASSWORD], "--auth: must be 'user:password' (no colon found)"),
        (["--auth", "u:p", "--auth-env", "CL_PW"], "--auth-env: cannot be given with auth"),
        (["--auth-env", "CL_PW"], "--auth-env: the environment variable CL_PW is not set"),
        (["--auth-env", "1X"], "--auth-env: must be an environment variable name"),
        (["--name", "n"], "--name: needs a redis:// state (--state redis://HOST:PORT/DB)"),
        (["--name", "a/b", "--state", "redis://h/0"], "--name: must be 1-64 letters"),
        (["--state", "redis://h:1/db"], "--state: 'redis://h:1/db': the database must be a numb"),
        (["--state", f"redis://:{PASSWORD}@h:99999/0"], "--state: 'redis://:***@h:99999/0' is n"),
        (["--metrics-port", "65536"], "--metrics-port: must be a TCP port (0-65535); got 65536"),
        (["--lease-timeout", "-1"], "--lease-timeout: must be a finite number >= 0; got -1.0"),
        (["--format", "xml"], "argument --format/-f: invalid choice: 'xml'"),
    ],
)
def test_a_bad_option_is_exit_2_naming_it_and_the_reason(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CL_PW", raising=False)
    done = main(capsys, "crawl", "http://127.0.0.1:9/", *argv)
    assert done.rc == 2, done.err
    assert message in done.err, done.err
    assert done.out == ""
    no_secret(done.err)


def test_a_cookies_file_that_is_missing_or_malformed_is_exit_2_with_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = main(capsys, "crawl", "http://127.0.0.1:9/", "--cookies", str(tmp_path / "no.txt"))
    assert done.rc == 2 and done.err.startswith("crawler: error: --cookies"), done.err
    assert "no.txt" in done.err
    bad = tmp_path / "bad.txt"
    bad.write_text("# Netscape HTTP Cookie File\n.a.test\tTRUE\t/\tFALSE\t0\tsid\n")
    done = main(capsys, "crawl", "http://127.0.0.1:9/", "--cookies", str(bad))
    assert done.rc == 2 and "--cookies" in done.err and "line 2" in done.err, done.err


def test_the_extract_command_has_no_sitemap(capsys: pytest.CaptureFixture[str]) -> None:
    done = main(capsys, "extract", "-", "--base", "http://a.test/", "-f", "sitemap")
    assert done.rc == 2 and "invalid choice: 'sitemap'" in done.err


# -- the secrets rule, end to end: a site behind Basic auth, a token header, --state --


def auth_site() -> web.Application:
    """Five pages linked in a chain; each demands USER:PASSWORD and the X-Api-Key TOKEN."""
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    async def handler(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != expected:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="t"'})
        if request.headers.get("X-Api-Key") != TOKEN:
            return web.Response(status=403, text="no token")
        n = int(request.match_info["n"] or 0)
        link = f'<a href="/p/{n + 1}">next</a>' if n < 4 else ""
        return web.Response(text=f"<html><body>{link}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get(r"/p/{n:\d*}", handler)
    return app


@pytest.fixture
async def secret_site(serve: ServeApp) -> str:
    server = await serve(auth_site())
    return f"http://127.0.0.1:{server.port}"


async def test_credentials_never_appear_and_a_resume_asks_for_them(
    secret_site: str, tmp_path: Path
) -> None:
    state, out = tmp_path / "state", tmp_path / "out.jsonl"
    seed = secret_site + "/p/0"
    header = ("--header", f"X-Api-Key: {TOKEN}")
    done = await run_env(
        "crawl", seed, "--auth", f"{USER}:{PASSWORD}", *header, "--state", str(state),
        "-f", "jsonl", "-o", str(out), "--max-pages", "2", "--ignore-robots",
    )  # fmt: skip
    no_traceback(done)
    assert done.rc == 0, done.err
    assert len(out.read_text().splitlines()) == 2
    no_secret(done.out, done.err, out.read_bytes(), *files_of_dir(state).values())

    # resumed without --auth: refused, nothing changed
    before = files_of_dir(state)
    done = await run_env("crawl", "--state", str(state), *header, "--max-pages", "0")
    assert done.rc == 2, done.err
    origin = secret_site
    assert (
        f"crawler: error: this crawl was started with --auth for {origin}; give it again:"
        " credentials are not stored"
    ) in done.err
    # without the token header
    done = await run_env("crawl", "--state", str(state), "--auth", f"{USER}:{PASSWORD}")
    assert done.rc == 2
    assert "this crawl was started with --header 'X-Api-Key: ...'; give it again" in done.err
    no_secret(done.err)
    assert files_of_dir(state) == before

    # the status shows neither, but says which header names were sent
    for fmt in ("text", "json"):
        status = await run_env("status", "--state", str(state), "-f", fmt)
        assert status.rc == 0, status.err
        no_secret(status.out, status.err)
    settings = json.loads(status.out)["settings"]
    assert settings["credentials"] == {"--auth": [origin], "--header": ["X-Api-Key"]}

    # given again, by --auth-env this time: the crawl goes on to its end
    done = await run_env(
        "crawl", "--state", str(state), "--auth-env", "CL_PW", *header, "--max-pages", "0",
        env={"CL_PW": f"{USER}:{PASSWORD}"},
    )  # fmt: skip
    no_traceback(done)
    assert done.rc == 0, done.err
    assert sorted(json.loads(line)["url"] for line in out.read_text().splitlines()) == [
        f"{secret_site}/p/{n}" for n in range(5)
    ]
    assert " 5 pages (5 ok, 0 failed)" in done.err
    no_secret(done.out, done.err, out.read_bytes(), *files_of_dir(state).values())

    # --auth-env is stored (a name, not a secret): unset, the resume says so
    done = await run_env("crawl", "--state", str(state), *header)
    assert done.rc == 2
    assert "--auth-env: the environment variable CL_PW is not set" in done.err


async def test_a_wrong_password_is_reported_without_it(secret_site: str) -> None:
    done = await run_env(
        "crawl", secret_site + "/p/0", "--auth", f"{USER}:x{PASSWORD}",
        "--header", f"X-Api-Key: {TOKEN}", "-f", "jsonl", "--ignore-robots",
    )  # fmt: skip
    no_traceback(done)
    assert done.rc == 1 and "http_401 1" in done.err, done.err
    assert PASSWORD not in done.out + done.err and TOKEN not in done.out + done.err


# -- metrics --


async def test_a_metrics_port_in_use_is_exit_2(secret_site: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = await run_env("crawl", secret_site + "/p/0", "--metrics-port", str(port), "-q")
    no_traceback(done)
    assert done.rc == 2, done.err
    assert f"--metrics-port: cannot serve metrics on 127.0.0.1:{port}" in done.err
    assert "address already in use" in done.err.lower()


def test_a_seed_url_with_a_password_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    done = main(capsys, "crawl", f"http://{USER}:{PASSWORD}@127.0.0.1:9/")
    assert done.rc == 2
    assert f"URL 'http://{USER}:***@127.0.0.1:9/' holds a password: give the credentials" in (
        done.err
    )
    no_secret(done.err)


# -- the WARC file's errors --


async def test_a_warc_file_that_cannot_be_written_is_an_error(
    secret_site: str, tmp_path: Path
) -> None:
    seed = (secret_site + "/p/0", "--auth", f"{USER}:{PASSWORD}", "-H", f"X-Api-Key: {TOKEN}")
    done = await run_env("crawl", *seed, "--warc", str(tmp_path / "no" / "c.warc.gz"))
    assert done.rc == 2 and done.out == ""
    assert f"--warc: cannot write {tmp_path}/no/c.warc.gz: no directory {tmp_path}/no" in done.err
    done = await run_env("crawl", *seed, "--warc", str(tmp_path))
    assert done.rc == 2 and f"--warc: {tmp_path} is a directory" in done.err
    # a resumed crawl does not append to a file that is not a WARC
    state, bad = tmp_path / "state", tmp_path / "bad.warc.gz"
    bad.write_bytes(b"not a warc\n")
    done = await run_env("crawl", *seed, "--state", str(state), "--max-pages", "1", "-q")
    assert done.rc == 0, done.err
    done = await run_env("crawl", "--state", str(state), *seed[1:], "--warc", str(bad))
    no_traceback(done)
    assert done.rc == 2 and f"--warc: {bad}: not a gzip WARC file" in done.err, done.err
    assert bad.read_bytes() == b"not a warc\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
async def test_a_warc_write_error_stops_the_crawl_with_exit_1(secret_site: str) -> None:
    done = await run_env(
        "crawl", secret_site + "/p/0", "--auth", f"{USER}:{PASSWORD}", "-H", f"X-Api-Key: {TOKEN}",
        "--warc", "/dev/full",
    )  # fmt: skip
    no_traceback(done)
    assert done.rc == 1, done.err
    assert "crawler: error: cannot write the WARC file /dev/full: No space left on device" in (
        done.err
    )


# -- start-up: the new dependencies are imported only when their feature is used --

_PROBE = """
import json, sys
from crawler.cli import main as cli
try:
    rc = cli.main(sys.argv[1:])
except SystemExit as exc:  # --help
    rc = exc.code
heavy = ("redis", "warcio", "prometheus_client")
print(json.dumps([rc, sorted({m.split(".")[0] for m in sys.modules} & set(heavy))]))
"""


@pytest.mark.parametrize(
    ("argv", "imported"),
    [
        (["--version"], []),
        (["crawl", "--help"], []),
        (["crawl", "SITE", "-q"], []),
        (["crawl", "SITE", "-q", "--warc", "TMP/c.warc.gz"], ["warcio"]),
    ],
)
async def test_redis_warcio_and_prometheus_are_imported_only_when_used(
    secret_site: str, tmp_path: Path, argv: list[str], imported: list[str]
) -> None:
    args = [a.replace("SITE", secret_site + "/p/0").replace("TMP", str(tmp_path)) for a in argv]
    if "crawl" in args and "--help" not in args:
        args += ["--auth", f"{USER}:{PASSWORD}", "-H", f"X-Api-Key: {TOKEN}"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _PROBE, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    rc, modules = json.loads(out.decode().splitlines()[-1])
    assert rc == 0, err.decode()
    assert modules == imported
