"""``crawler crawl --state DIR`` and ``crawler status``, end to end through the console script:
resume with or without URLs, outputs appended and repaired, settings refused by flag name,
bad state refused with nothing changed, status read-only. (The SIGKILL proofs are in
tests/test_resume_kill.py.)"""

from __future__ import annotations

import argparse
import csv
import fcntl
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crawler import CrawlConfig, Crawler
from crawler.cli import main as cli
from crawler.cli import options
from crawler.state.sqlite import SQLiteState
from tests.conftest import ServeApp
from tests.test_cli import IN_SCOPE, SITE, Done, no_traceback, run, site_app

PAGES = len(IN_SCOPE)  # 6: five ok, /missing 404


@pytest.fixture
async def site(serve: ServeApp) -> str:
    """test_cli's small site (SITE): its base URL, no trailing slash."""
    server = await serve(site_app(SITE))
    return f"http://127.0.0.1:{server.port}"


def files_of(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` and its bytes (to prove nothing changed)."""
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def jsonl_urls(path: Path) -> list[str]:
    return [json.loads(line)["url"] for line in path.read_text().splitlines()]


async def test_resume_with_no_url_continues_the_stored_crawl(site: str, tmp_path: Path) -> None:
    state, out = tmp_path / "state", tmp_path / "out.jsonl"
    done = await run("crawl", site + "/", "--state", str(state), "-f", "jsonl", "-o", str(out),
                     "--max-pages", "2")  # fmt: skip
    no_traceback(done)
    assert done.rc == 0, done.err
    assert len(jsonl_urls(out)) == 2
    # the same budget again (stored, not given): nothing more to do, nothing written
    before = out.read_bytes()
    done = await run("crawl", "--state", str(state))
    assert done.rc == 0, done.err
    assert out.read_bytes() == before and done.out == ""  # the stored -f jsonl -o out.jsonl
    assert " 2 pages (2 ok, 0 failed)" in done.err  # the whole crawl's count
    # a higher budget counts the whole crawl: 4 is two more
    done = await run("crawl", "--state", str(state), "--max-pages", "4")
    assert done.rc == 0, done.err
    assert len(jsonl_urls(out)) == 4 and " 4 pages (4 ok, 0 failed)" in done.err
    # no budget: the crawl goes on where it stopped, appending to the same file
    done = await run("crawl", "--state", str(state), "--max-pages", "0")
    no_traceback(done)
    assert done.rc == 0, done.err
    assert out.read_bytes().startswith(before)
    urls = jsonl_urls(out)
    assert sorted(urls) == sorted(site + p for p in IN_SCOPE), "each page once"
    assert f" {PAGES} pages (5 ok, 1 failed)" in done.err
    assert "crawler: resumed: 4 pages from earlier runs, 0 in flight at the last stop" in done.err
    assert "errors: http_404 1" in done.err


async def test_a_resumed_output_loses_its_cut_line_and_keeps_the_rest(
    site: str, tmp_path: Path
) -> None:
    state, out = tmp_path / "state", tmp_path / "out.jsonl"
    args = ("--state", str(state), "-f", "jsonl", "-o", str(out))
    done = await run("crawl", site + "/", *args, "--max-pages", "3")
    assert done.rc == 0, done.err
    whole = out.read_bytes()
    cut = b'{"url":"' + site.encode() + b'/c","final_'
    with open(out, "ab") as fh:
        fh.write(cut)  # what a kill -9 in the middle of a write leaves
    done = await run("crawl", *args, "--max-pages", "0")
    no_traceback(done)
    assert done.rc == 0, done.err
    data = out.read_bytes()
    assert data.startswith(whole) and data.endswith(b"\n")
    assert sorted(jsonl_urls(out)) == sorted(site + p for p in IN_SCOPE)  # every line parses
    assert f"crawler: output: {len(cut)} bytes of a line cut at the last stop removed" in done.err


async def test_urls_and_csv_outputs_are_appended_csv_header_once(site: str, tmp_path: Path) -> None:
    for fmt in ("urls", "csv"):
        state, out = tmp_path / f"state-{fmt}", tmp_path / f"out.{fmt}"
        out.write_text("from another crawl\n")  # a new crawl truncates as without a state
        args = ("--state", str(state), "-f", fmt, "-o", str(out), "-q")
        done = await run("crawl", site + "/", *args, "--max-pages", "1")
        assert done.rc == 0 and done.err == "", done.err
        assert "another crawl" not in out.read_text()
        done = await run("crawl", *args, "--max-pages", "0")
        assert done.rc == 0, done.err
        text = out.read_text()
        if fmt == "urls":
            assert sorted(text.splitlines()) == sorted(site + p for p in IN_SCOPE)
        else:
            rows = list(csv.reader(io.StringIO(text)))
            assert rows[0] == ["source", "target", "tag", "nofollow"]
            assert ["source", "target", "tag", "nofollow"] not in rows[1:]
            assert {r[0] for r in rows[1:]} == {site + "/", site + "/a", site + "/b"}


async def test_new_seeds_are_added_on_resume(site: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = await run("crawl", site + "/c", "--state", str(state), "-q")
    assert done.rc == 0 and done.lines() == [site + "/c"], done.err
    done = await run("crawl", site + "/b", "--state", str(state), "-f", "jsonl")
    assert done.rc == 0, done.err
    assert sorted(jsonl_urls_of(done)) == sorted(site + p for p in IN_SCOPE if p != "/c")
    status = json.loads((await run("status", "--state", str(state), "-f", "json")).out)
    assert status["seeds"] == [site + "/c", site + "/b"]
    assert status["done"] == PAGES and status["queued"] == 0


def jsonl_urls_of(done: Done) -> list[str]:
    return [json.loads(line)["url"] for line in done.lines()]


@pytest.mark.parametrize(
    ("args", "file_text", "message"),
    [
        (["--max-depth", "1"], None, "--max-depth: this crawl was started with 16, this run"),
        (["--scope", "domain"], None, '--scope: this crawl was started with "host"'),
        (["--exclude", "/b"], None, "--exclude: this crawl was started with []"),
        (["--resources"], None, '--link-set: this crawl was started with "links"'),
        (["--sort-query"], None, "--sort-query: this crawl was started with false"),
        ([], "[scope]\ninclude = ['/a']\n", "crawl.toml: include: this crawl was started with []"),
    ],
)
async def test_a_flag_that_changes_what_is_crawled_is_refused_by_name(
    site: str, tmp_path: Path, args: list[str], file_text: str | None, message: str
) -> None:
    state, out = tmp_path / "state", tmp_path / "out.jsonl"
    done = await run("crawl", site + "/", "--state", str(state), "-f", "jsonl", "-o", str(out),
                     "--max-pages", "2")  # fmt: skip
    assert done.rc == 0, done.err
    with open(out, "ab") as fh:
        fh.write(b'{"half')  # a cut line: must stay as it is, the run is refused first
    before_state, before_out = files_of(state), out.read_bytes()
    if file_text is not None:
        config = tmp_path / "crawl.toml"
        config.write_text(file_text)
        args = [*args, "--config", str(config)]
    done = await run("crawl", "--state", str(state), "--max-pages", "0", *args)
    no_traceback(done)
    assert done.rc == 2, done.err
    assert message in done.err
    assert "cannot change on resume" in done.err and "new state directory" in done.err
    assert files_of(state) == before_state and out.read_bytes() == before_out
    # the stored value given again is fine, and a per-run flag may change
    done = await run("crawl", "--state", str(state), "--max-depth", "16", "-c", "2",
                     "--max-pages", "0", "-q")  # fmt: skip
    assert done.rc == 0, done.err
    assert sorted(jsonl_urls(out)) == sorted(site + p for p in IN_SCOPE)


async def test_another_format_into_the_same_file_is_refused(site: str, tmp_path: Path) -> None:
    state, out = tmp_path / "state", tmp_path / "out.jsonl"
    args = ("--state", str(state), "-o", str(out))
    assert (await run("crawl", site + "/", *args, "-f", "jsonl", "--max-pages", "1")).rc == 0
    before = out.read_bytes()
    done = await run("crawl", "--state", str(state), "-f", "urls", "--max-pages", "0")
    assert done.rc == 2
    assert f"--format: {out} holds this crawl's jsonl records" in done.err
    assert out.read_bytes() == before
    other = tmp_path / "urls.txt"  # another file: fine
    done = await run("crawl", "--state", str(state), "-f", "urls", "-o", str(other), "-q",
                     "--max-pages", "0")  # fmt: skip
    assert done.rc == 0, done.err
    assert other.read_text() != "" and out.read_bytes() == before


async def test_no_url_and_no_crawl_in_the_state_is_a_usage_error(tmp_path: Path) -> None:
    done = await run("crawl", "--state", str(tmp_path / "new"))
    assert done.rc == 2
    assert "no seed URL: " + str(tmp_path / "new") + " holds no crawl yet" in done.err
    assert not (tmp_path / "new").exists()
    done = await run("crawl")
    assert done.rc == 2 and "no seed URL: give one or more URLs" in done.err


async def test_bad_state_is_refused_and_nothing_changes(site: str, tmp_path: Path) -> None:
    # not a state: a directory holding something else
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"\xff\xd8")
    done = await run("crawl", site + "/", "--state", str(other), "-o", str(tmp_path / "o.txt"))
    no_traceback(done)
    assert done.rc == 2 and "not a crawl state (it holds cat.jpg)" in done.err
    assert files_of(other) == {"cat.jpg": b"\xff\xd8"}
    # a corrupt database: bytes overwritten in the middle
    state, out = tmp_path / "state", tmp_path / "out.txt"
    assert (await run("crawl", site + "/", "--state", str(state), "-o", str(out), "-q")).rc == 0
    db = state / "state.db"
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\x00garbage" * ((4096 - 100) // 8)
    db.write_bytes(bytes(data))
    before_state, before_out = files_of(state), out.read_bytes()
    done = await run("crawl", "--state", str(state))
    no_traceback(done)
    assert done.rc == 2 and "crawler: error: " in done.err, done.err
    assert files_of(state) == before_state and out.read_bytes() == before_out


async def test_a_state_in_use_is_refused_and_its_output_left_alone(
    site: str, tmp_path: Path
) -> None:
    state, out = tmp_path / "state", tmp_path / "out.txt"
    assert (await run("crawl", site + "/", "--state", str(state), "-o", str(out), "-q")).rc == 0
    with open(out, "ab") as fh:
        fh.write(b"http://being-writ")  # the other process is in the middle of a line
    before = out.read_bytes()
    fd = os.open(state / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the crawl using it would
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}".encode(), 0)
        done = await run("crawl", "--state", str(state), "--max-pages", "0")
        status = await run("status", "--state", str(state))
    finally:
        os.close(fd)
    no_traceback(done)
    assert done.rc == 2 and f"in use by process {os.getpid()}" in done.err, done.err
    assert out.read_bytes() == before
    assert status.rc == 0 and f"running as process {os.getpid()};" in status.out


async def test_status_reads_without_changing_anything(site: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = await run("crawl", site + "/", "--state", str(state), "--max-pages", "3",
                     "--max-depth", "5", "-q")  # fmt: skip
    assert done.rc == 0, done.err
    before = files_of(state)
    text = await run("status", "--state", str(state))
    data = await run("status", "--state", str(state), "--format", "json")
    assert files_of(state) == before
    assert text.rc == 0 and data.rc == 0, text.err + data.err
    status = json.loads(data.out)
    assert (status["done"], status["in_flight"], status["hosts"]) == (3, 0, 1)
    assert status["queued"] == PAGES - 3 and status["seen"] >= PAGES
    assert status["seeds"] == [site + "/"]
    assert status["settings"]["crawl"]["max_depth"] == 5
    assert status["settings"]["run"]["max_pages"] == 3
    lines = text.out.splitlines()
    assert lines[0].startswith(f"state:     {state} (not running; format 1;")
    assert f"queued:    {status['queued']}" in lines
    assert "in flight: 0 at the last stop" in lines
    assert "done:      3 (3 ok, 0 failed)" in lines
    assert f"seeds:     {site}/" in lines
    assert "crawl:     max_depth = 5 (fixed for this crawl)" in lines
    assert "last run:  max_pages = 3, quiet = true" in lines
    # run to the end: nothing left
    assert (await run("crawl", "--state", str(state), "--max-pages", "0", "-q")).rc == 0
    text = await run("status", "--state", str(state))
    assert "done:      6 (5 ok, 1 failed: http_404 1)" in text.out
    assert text.out.endswith("nothing left to crawl\n")


async def test_status_errors(tmp_path: Path) -> None:
    done = await run("status", "--state", str(tmp_path / "none"))
    assert done.rc == 2 and "no crawl state here" in done.err
    assert not (tmp_path / "none").exists()
    done = await run("status")
    assert done.rc == 2 and "--state" in done.err


async def test_state_flag_errors() -> None:
    done = await run("crawl", "http://127.0.0.1:9/", "--state", "redis://127.0.0.1:6379/x")
    assert done.rc == 2
    assert "--state: 'redis://127.0.0.1:6379/x': the database must be a number" in done.err
    done = await run("crawl", "http://127.0.0.1:9/", "--state", "redis://:pw9@/0")
    assert done.rc == 2 and "--state: 'redis://:***@/0' has no host" in done.err
    assert "pw9" not in done.err
    done = await run("crawl", "http://127.0.0.1:9/", "--name", "a", "--state", "dir")
    assert done.rc == 2 and "--name: needs a redis:// state" in done.err
    done = await run("crawl", "http://127.0.0.1:9/", "--frontier", "memory")
    assert done.rc == 2 and "unrecognized arguments: --frontier" in done.err


async def test_the_library_can_give_a_full_synchronous_state(site: str, tmp_path: Path) -> None:
    """The README's durability paragraph: Crawler(config, state=SQLiteState(DIR,
    synchronous="full"))."""
    state = SQLiteState(str(tmp_path / "s"), synchronous="full")
    config = CrawlConfig(seeds=(site + "/",), state=str(tmp_path / "s"))
    modes = []
    async with Crawler(config, state=state) as crawler:
        async for _page in crawler:
            modes.append(state._conn.execute("PRAGMA synchronous").fetchone()[0])
    assert modes and set(modes) == {2}  # FULL, on every page
    status = json.loads((await run("status", "--state", str(tmp_path / "s"), "-f", "json")).out)
    assert (status["done"], status["queued"]) == (PAGES, 0)


async def test_state_sync_full_on_the_command_line_and_in_the_library(
    site: str, tmp_path: Path
) -> None:
    config = CrawlConfig(seeds=(site + "/",), state=str(tmp_path / "lib"), state_sync="full")
    modes = []
    async with Crawler(config) as crawler:
        async for _page in crawler:
            conn = crawler._state._conn  # type: ignore[attr-defined]
            modes.append(conn.execute("PRAGMA synchronous").fetchone()[0])
    assert modes and set(modes) == {2}  # FULL, on every page
    done = await run("crawl", site + "/", "--state", str(tmp_path / "s"), "--state-sync", "full",
                     "-q")  # fmt: skip
    assert done.rc == 0, done.err
    status = json.loads((await run("status", "--state", str(tmp_path / "s"), "-f", "json")).out)
    assert status["done"] == PAGES and status["settings"]["run"]["state_sync"] == "full"


# -- in-process: what `crawler check` reuses, and that it is imported only for check --


def test_given_keys_are_the_flags_and_the_file_keys(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[scope]\nexclude = ['x']\n[limits]\nmax_pages = 3\n")
    parser = cli.build_parser()
    args = parser.parse_args(["crawl", "--state", "d", "-c", "2", "--no-quiet"])
    assert options.given_keys(args) == {"state", "concurrency", "quiet"}
    args = parser.parse_args(["crawl", "http://s.test/", "--config", str(config), "--resources"])
    assert options.given_keys(args) == {"seeds", "exclude", "max_pages", "link_set"}


def test_add_crawl_options_for_another_command() -> None:
    parser = argparse.ArgumentParser()
    options.add_crawl_options(parser, exclude={"format", "output", "all_links"})
    args = parser.parse_args(["--max-depth", "2", "--state", "d"])
    assert vars(args) == {"max_depth": 2, "state": "d"}  # only what was given
    with pytest.raises(SystemExit):
        parser.parse_args(["--format", "jsonl"])
    assert options.flag_of("max_depth") == "--max-depth" and options.flag_of("seeds") == "URL"


def test_the_check_module_is_imported_only_for_check() -> None:
    code = (
        "import sys\nfrom crawler.cli import main as cli\n"
        "cli.build_parser()\nprint('crawler.cli.check' in sys.modules)\n"
        "cli.build_parser(check=True)\nprint('crawler.cli.check' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


# -- the README's section says what the code does --


def _state_section() -> str:
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    return text.split("## Crawl state and resume", 1)[1].split("\n## ", 1)[0]


def test_readme_lists_the_fixed_and_per_run_settings_as_the_code_has_them() -> None:
    from crawler.core.settings import CRAWL_DEFINING, PER_RUN  # noqa: PLC0415

    section = _state_section()
    fixed_part = section.split("| fixed for the crawl | why |", 1)[1].split("\n\n", 1)[0]
    fixed = set(re.findall(r"`(\w+)`", fixed_part))
    assert fixed == set(CRAWL_DEFINING)
    per_run_part = section.split("Every other setting is **per run**:", 1)[1].split(". A ", 1)[0]
    named = set(re.findall(r"`(\w+)`", per_run_part))
    timeouts = {"timeout", "connect_timeout", "read_timeout"}  # "the timeouts"
    assert named | timeouts == set(PER_RUN)


def test_readme_names_every_key_of_the_status_json() -> None:
    from crawler.cli.status import as_dict  # noqa: PLC0415

    section = _state_section()
    json_part = section.split("`--format json` prints one object", 1)[1]
    named = set(re.findall(r"`(\w+)`", json_part))

    class Fake:
        location, version, in_use_by, created, files = "d", 1, None, 0.0, {}
        hosts, counters, settings, seeds = 0, {}, None, []
        counts = type("C", (), {"queued": 0, "leased": 0, "done": 0, "failed": {}, "seen": 0,
                                "origins": 0})()  # fmt: skip

    assert set(as_dict(Fake())) <= named
