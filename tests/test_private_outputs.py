"""The files a crawl writes are private (0600) when the crawl sends credentials.

The WARC holds the bodies of the pages the credentials open and the site's Set-Cookie values,
the output the URLs only a logged-in user finds: with ``--auth`` (and the other credential
options) they are created 0600, whatever the umask; without credentials they follow the umask
as any file does. Real crawls (the console script) of a local site behind HTTP Basic
(tests/authsite.py) and of an open one, under umask 022.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawler.config import CrawlConfig
from crawler.config.credentials import sends_credentials
from crawler.output.files import open_output
from crawler.output.sinks import open_sink
from tests.authsite import PASSWORD, USER, AuthSite
from tests.test_cli import Serve, run, serve, site_app  # noqa: F401  (serve: the fixture)


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    """The usual umask (the subprocesses inherit it): without credentials files are 0644."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_which_options_send_credentials() -> None:
    seed = ("https://s.test/",)
    none: dict[str, str] = {}
    assert not sends_credentials(CrawlConfig(seeds=seed), none)
    assert not sends_credentials(CrawlConfig(seeds=seed, headers=("Accept: text/html",)), none)
    assert not sends_credentials(CrawlConfig(seeds=seed, proxy="http://127.0.0.1:3128"), none)
    assert not sends_credentials(CrawlConfig(seeds=seed), {"HTTP_PROXY": "http://p:3128"})
    for cfg in (
        CrawlConfig(seeds=seed, auth="u:p"),
        CrawlConfig(seeds=seed, auth_env="CRAWL_AUTH"),
        CrawlConfig(seeds=seed, origin_auth={"https://s.test": "u:p"}),
        CrawlConfig(seeds=seed, headers=("Authorization: Bearer t",)),
        CrawlConfig(seeds=seed, headers=("X-Api-Key: k",)),
        CrawlConfig(seeds=seed, headers=("Cookie: a=b",)),
        CrawlConfig(seeds=seed, cookies="cookies.txt"),
        CrawlConfig(seeds=seed, proxy="http://u:p@127.0.0.1:3128"),
        CrawlConfig(seeds=seed, bearer_env="CRAWL_TOKEN"),
        CrawlConfig(seeds=seed, origin_headers={"https://api.s.test": ("X-Trace: 1",)}),
    ):
        assert sends_credentials(cfg, none), cfg
    assert sends_credentials(CrawlConfig(seeds=seed), {"HTTPS_PROXY": "http://u:p@proxy:3128"})


def test_an_existing_file_is_made_private_a_device_is_left_be(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    os.chmod(path, 0o644)
    with open_output(str(path), append=True, private=True) as fh:
        fh.write(b"new\n")
    assert mode(path) == 0o600 and path.read_text() == "old\nnew\n"
    before = mode(Path(os.devnull))
    open_output(os.devnull, append=False, private=True).close()
    assert mode(Path(os.devnull)) == before


@pytest.mark.parametrize("fmt", ["urls", "jsonl", "csv", "sitemap"])
@pytest.mark.parametrize("resume", [None, False])
def test_every_output_format_is_private_with_credentials(
    tmp_path: Path, fmt: str, resume: bool | None
) -> None:
    for private, want in ((True, 0o600), (False, 0o644)):
        path = tmp_path / f"{fmt}-{private}-{resume}.out"
        sink = open_sink(fmt, str(path), resume=resume, private=private)
        sink.start(resume)
        sink.close()
        assert mode(path) == want, (fmt, private)
        for extra in tmp_path.glob(path.name + ".*"):  # a kept sitemap's side file
            assert mode(extra) == want, extra


async def test_warc_and_output_are_0600_with_auth_0644_without(
    serve: Serve,  # noqa: F811
    tmp_path: Path,
) -> None:
    site = await serve(AuthSite(away="http://127.0.0.1:9").app())
    warc, out = tmp_path / "auth.warc.gz", tmp_path / "auth.jsonl"
    done = await run(
        "crawl", site + "/", "--auth", f"{USER}:{PASSWORD}", "--ignore-robots", "--max-pages",
        "3", "-f", "jsonl", "-o", str(out), "--warc", str(warc), "-q",
    )  # fmt: skip
    assert done.rc == 0, done.err
    assert '"status":200' in out.read_text()  # the credentials opened the pages
    assert warc.stat().st_size > 0
    assert (mode(warc), mode(out)) == (0o600, 0o600)

    plain = await serve(site_app({"/": "<a href='/a'>a</a>", "/a": "<p>a"}))
    warc, out = tmp_path / "plain.warc.gz", tmp_path / "plain.jsonl"
    done = await run(
        "crawl", plain + "/", "--ignore-robots", "-f", "jsonl", "-o", str(out),
        "--warc", str(warc), "-q",
    )  # fmt: skip
    assert done.rc == 0, done.err
    assert (mode(warc), mode(out)) == (0o644, 0o644)


async def test_a_resumed_crawl_with_credentials_makes_its_earlier_files_private(
    serve: Serve,  # noqa: F811
    tmp_path: Path,
) -> None:
    # A WARC and output written 0644 by an earlier run: the run that sends credentials
    # appends to them, and makes them 0600 before its first byte.
    site = await serve(AuthSite(away="http://127.0.0.1:9").app())
    state, warc, out = tmp_path / "st", tmp_path / "a.warc.gz", tmp_path / "a.txt"
    common = ["--state", str(state), "--warc", str(warc), "-o", str(out), "-q"]
    done = await run("crawl", site + "/", "--ignore-robots", "--max-pages", "1", *common)
    assert done.rc == 1, done.err  # 401 without credentials: errors only
    assert (mode(warc), mode(out)) == (0o644, 0o644)
    done = await run("crawl", "--auth", f"{USER}:{PASSWORD}", "--max-pages", "3", *common)
    assert done.rc == 1 and "Traceback" not in done.err, done.err  # nothing left to fetch
    assert (mode(warc), mode(out)) == (0o600, 0o600)
