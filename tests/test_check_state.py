"""``crawler check --state DIR``: a resumed check reports the pages of the earlier runs too."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

from crawler.check import CheckReport, check
from crawler.check.journal import JOURNAL_NAME, PageJournal
from crawler.core.results import PageResult
from crawler.extract import Link
from tests.checksite import TIMEOUT, CheckSite

CMD = [sys.executable, "-m", "crawler", "check"]
FAST: dict[str, Any] = {
    "timeout": TIMEOUT,
    "retries": 0,
    "backoff": 0.05,
    "max_redirects": 5,
    "recheck_delay": 0.2,
    "external": False,
}


def summary(report: CheckReport) -> set[tuple[str, str, tuple[tuple[str, int, int], ...]]]:
    return {
        (p.url, p.error, tuple(sorted((o.page, o.line, o.column) for o in p.referrers)))
        for p in report.broken + report.warnings
    }


def test_resumed_check_reports_what_one_run_reports(tmp_path: Path) -> None:
    state = str(tmp_path / "state")

    async def go() -> tuple[CheckReport, CheckReport, CheckReport]:
        site = await CheckSite().start()
        try:
            seed = site.base + "/"
            whole = await check(seed, **FAST)
            first = await check(seed, state=state, max_pages=3, **FAST)
            second = await check(seed, state=state, max_pages=100, **FAST)
        finally:
            await site.close()
        return whole, first, second

    whole, first, second = asyncio.run(go())
    assert first.stats.pages < whole.stats.pages  # the first run stopped early
    assert summary(second) == summary(whole)
    assert (tmp_path / "state" / JOURNAL_NAME).exists()


def test_journal_drops_a_line_cut_by_a_kill(tmp_path: Path) -> None:
    journal = PageJournal(tmp_path)
    page = PageResult("https://e.org/", 0, final_url="https://e.org/", status=200)
    page.content_type = "text/html"
    page.links = [Link("https://e.org/x", "/x", "a", "href", False, 3, 5)]
    journal.page(page)
    journal.flush()
    journal.close()
    path = tmp_path / JOURNAL_NAME
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"u": "https://e.org/cut", "l": [[')  # killed mid-line
    pages = list(PageJournal(tmp_path).replay())
    assert [(p.url, p.status, p.links) for p in pages] == [
        ("https://e.org/", 200, [Link("https://e.org/x", "/x", "a", "href", False, 3, 5)])
    ]
    assert path.read_bytes() == whole  # the cut line is gone before anything is appended


async def test_check_killed_then_resumed_reports_the_whole_site(tmp_path: Path) -> None:
    site = await CheckSite(page_delay=0.4).start()
    state = str(tmp_path / "state")
    args = [
        *CMD,
        site.base + "/",
        "--state",
        state,
        "--concurrency",
        "1",
        "--no-external",
        "-f",
        "json",
        *("--timeout", str(TIMEOUT), "--retries", "0", "--max-redirects", "5"),
        *("--recheck-delay", "0.2"),
    ]
    try:
        whole = await check(site.base + "/", **FAST)
        proc = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        journal = tmp_path / "state" / JOURNAL_NAME
        for _ in range(200):  # until a page or two are in the journal
            await asyncio.sleep(0.05)
            if journal.exists() and journal.read_bytes().count(b"\n") >= 1:
                break
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        killed_at = journal.read_bytes().count(b"\n")
        proc = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    finally:
        await site.close()
    assert proc.returncode == 1, err.decode()
    assert 0 < killed_at < journal.read_bytes().count(b"\n")  # killed midway
    data = json.loads(out)
    got = {
        (p["url"], p["error"], tuple(sorted((r["page"], r["line"]) for r in p["referrers"])))
        for p in data["broken"] + data["warnings"]
    }
    want = {
        (p.url, p.error, tuple(sorted((o.page, o.line) for o in p.referrers)))
        for p in whole.broken + whole.warnings
    }
    assert got == want


def test_a_state_that_is_a_file_or_foreign_is_refused_and_left_alone(tmp_path: Path) -> None:
    # the state directory is checked before the journal is read or written: a file (a
    # traceback before) and a directory holding something else are a clear error, exit 2
    import subprocess  # noqa: PLC0415

    a_file = tmp_path / "afile"
    a_file.write_text("mine\n")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine\n")
    for where, why in ((a_file, "not a directory"), (foreign, "not a crawl state")):
        done = subprocess.run(
            [*CMD, "http://127.0.0.1:9/", "--state", str(where)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert why in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert a_file.read_text() == "mine\n"
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
