"""``crawler audit --state DIR``: the link graph in SQLite (crawler/audit/diskgraph.py) gives
the report and the graph files the in-memory path gives, byte for byte, on the planted site
(tests/audit_site.py, every finding) and a generated site of a few thousand pages; an audit
killed with SIGKILL and resumed reports what a run in one go does."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from audit_gensite import gen_app
from audit_site import EXPECTED, site_app

from crawler.audit import audit
from crawler.audit.diskgraph import GRAPH_DB
from crawler.audit.model import AuditReport
from crawler.check.journal import JOURNAL_NAME

pytestmark = pytest.mark.timeout(180)
_ROOT = Path(__file__).resolve().parent.parent


def _graph_files(path: Path) -> dict[str, bytes]:
    if path.suffix == ".csv":
        stem = str(path)[: -len(".csv")]
        return {s: Path(stem + s).read_bytes() for s in (".nodes.csv", ".edges.csv")}
    return {path.suffix: path.read_bytes()}


def _json(report: AuditReport) -> dict[str, Any]:
    data = report.to_dict()
    data["stats"]["duration"] = 0
    return data


async def _both(
    tmp_path: Path, url: str, fmt: str, **options: Any
) -> tuple[dict[str, Any], dict[str, Any], dict[str, bytes], dict[str, bytes]]:
    """The audit in memory and with --state (one page at a time: the same crawl order)."""
    out = []
    for name, extra in (("mem", {}), ("disk", {"state": str(tmp_path / "state")})):
        graph = tmp_path / f"{name}{fmt}"
        report = await audit(url, graph=str(graph), concurrency=1, **options, **extra)
        out.append((_json(report), _graph_files(graph)))
    (mem, mem_graph), (disk, disk_graph) = out
    # the disk path was taken: the links are in the state's database, as many as reported
    with sqlite3.connect(tmp_path / "state" / GRAPH_DB) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM link").fetchone()
    assert rows == disk["stats"]["links"] > 0
    return mem, disk, mem_graph, disk_graph


@pytest.mark.parametrize("fmt", [".graphml", ".gexf", ".csv"])
async def test_planted_site_same_report_and_graph_from_disk(
    serve: Any, tmp_path: Path, fmt: str
) -> None:
    server = await serve(site_app())
    base = str(server.make_url("/")).rstrip("/")
    mem, disk, mem_graph, disk_graph = await _both(tmp_path, base + "/", fmt)
    assert {(f["kind"], f["url"].removeprefix(base)) for f in mem["findings"]} == EXPECTED
    assert disk == mem
    assert disk_graph == mem_graph


async def test_generated_site_same_report_and_graph_from_disk(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawler.audit import diskgraph  # noqa: PLC0415

    # small batches and few raw values kept: the columns emptied and the raw values (and the
    # compiled twin's tables) let go many times during the crawl
    monkeypatch.setattr(diskgraph, "BATCH_LINKS", 700)
    monkeypatch.setattr(diskgraph, "MAX_RAWS", 300)
    pages = 3000
    server = await serve(gen_app(pages))
    base = str(server.make_url("/")).rstrip("/")
    mem, disk, mem_graph, disk_graph = await _both(
        tmp_path, base + "/", ".csv", sitemaps=[base + "/sitemap.xml"], max_click_depth=2
    )
    kinds = {f["kind"] for f in mem["findings"]}
    # the site holds each of these, with places found by the target index
    assert kinds >= {"orphan", "redirect", "deep_page", "nofollow_inlinks_only",
                     "link_to_non_canonical", "linked_noindex", "no_outlinks"}  # fmt: skip
    assert mem["stats"]["pages"] >= pages
    assert sum(len(f["places"]) for f in mem["findings"]) > pages
    assert disk == mem
    assert disk_graph == mem_graph


def _sorted_places(data: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The findings with their places sorted (a resumed crawl's order is not one run's)."""
    return sorted(
        (
            f["kind"],
            f["url"],
            f["detail"],
            f["target"],
            tuple(sorted(tuple(p.values()) for p in f["places"])),
        )
        for f in data["findings"]
    )


async def test_audit_killed_then_resumed_reports_as_one_run(serve: Any, tmp_path: Path) -> None:
    pages = 600
    server = await serve(gen_app(pages, delay=0.005))
    base = str(server.make_url("/")).rstrip("/")
    options = {"sitemaps": [base + "/sitemap.xml"], "max_click_depth": 2}
    whole = _json(await audit(base + "/", concurrency=1, **options))  # type: ignore[arg-type]
    state = tmp_path / "state"
    args = [
        *(sys.executable, "-m", "crawler", "audit", base + "/", "--state", str(state)),
        *("--sitemap", base + "/sitemap.xml", "--max-click-depth", "2"),
        *("--concurrency", "1", "-q", "-f", "json"),
    ]
    env = dict(os.environ, PYTHONPATH=str(_ROOT))
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(*args, stdout=pipe, stderr=pipe, env=env)
    journal = state / JOURNAL_NAME
    for _ in range(600):  # until some pages are in the journal (and so in the graph)
        await asyncio.sleep(0.05)
        if journal.exists() and journal.read_bytes().count(b"\n") >= 100:
            break
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    killed_at = journal.read_bytes().count(b"\n")
    assert (state / GRAPH_DB).exists()
    proc = await asyncio.create_subprocess_exec(*args, stdout=pipe, stderr=pipe, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 1, err.decode()
    assert 0 < killed_at < journal.read_bytes().count(b"\n")  # killed midway
    resumed = json.loads(out)
    with sqlite3.connect(state / GRAPH_DB) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM link").fetchone()
    assert rows == resumed["stats"]["links"] == whole["stats"]["links"]
    assert resumed["stats"]["depth"] == whole["stats"]["depth"]
    assert resumed["stats"]["edges"] == whole["stats"]["edges"]
    assert resumed["counts"] == whole["counts"]
    assert _sorted_places(resumed) == _sorted_places(whole)


def _disk_site(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pages: int, depth: int) -> Any:
    """test_audit_memory's synthetic graph (a page in two runs and all), its links recorded
    into a DiskOccurrences."""
    import test_audit_memory  # noqa: PLC0415

    from crawler.audit.auditor import Auditor  # noqa: PLC0415
    from crawler.audit.diskgraph import DiskOccurrences  # noqa: PLC0415

    class OnDisk(Auditor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.store = DiskOccurrences(str(tmp_path / GRAPH_DB))

    monkeypatch.setattr(test_audit_memory, "Auditor", OnDisk)
    return test_audit_memory._site(pages, max_click_depth=depth)[0]


def test_sql_walk_gives_the_columns_walk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The report's counts, click depth and places from SQL (GROUP BY, a BFS a level at a
    time) are those of the in-memory columns, on a graph where a page's links are in two
    runs and thousands of pages are deeper than the limit."""
    import test_audit_memory  # noqa: PLC0415

    from crawler.audit.analysis import build_report  # noqa: PLC0415

    mem = build_report(test_audit_memory._site(5000, max_click_depth=2)[0])
    auditor = _disk_site(monkeypatch, tmp_path, 5000, 2)
    disk = build_report(auditor)
    auditor.store.close()
    assert len([f for f in mem.findings if f.kind == "deep_page"]) > 3000
    assert disk.to_dict() == mem.to_dict()


def test_disk_store_memory_does_not_grow_with_the_links(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Recording 30,000 pages' links (4 a page): the in-memory columns and raw values grow
    with them; on disk what is held is a batch, and the report adds a few integers a page."""
    import tracemalloc  # noqa: PLC0415

    import test_audit_memory  # noqa: PLC0415

    from crawler.audit import diskgraph  # noqa: PLC0415
    from crawler.audit.analysis import build_report  # noqa: PLC0415

    pages = 30_000
    monkeypatch.setattr(diskgraph, "MAX_RAWS", 1000)  # (65,536: more than this site has)
    tracemalloc.start()
    try:
        mem = test_audit_memory._site(pages, max_click_depth=100)[0]
        mem_held = tracemalloc.get_traced_memory()[0]
        del mem
        base = tracemalloc.get_traced_memory()[0]
        auditor = _disk_site(monkeypatch, tmp_path, pages, 100)
        disk_held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        report = build_report(auditor)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
        auditor.store.close()
    assert report.stats.links == len(auditor.store) > 3 * pages
    # the same site: the columns (14 bytes a link) and the raw values (30,000 here: their
    # bytes in one buffer, compiled; a str each in an Interner, pure) are the difference;
    # on disk, a batch and at most MAX_RAWS raw values
    assert mem_held - disk_held > 20 * report.stats.links, (mem_held, disk_held)
    assert peak / pages < 150, f"{peak / pages:.0f} bytes a page"


async def test_state_directory_refused_before_the_graph_is_written(
    serve: Any, tmp_path: Path
) -> None:
    """A --state that is a file, a foreign directory, or one a running audit holds: a clear
    error (exit 2), and the graph file is not made or replaced there."""
    env = dict(os.environ, PYTHONPATH=str(_ROOT))
    pipe = asyncio.subprocess.PIPE

    async def run(*args: str) -> tuple[int, str, str]:
        cmd = (sys.executable, "-m", "crawler", "audit", *args)
        proc = await asyncio.create_subprocess_exec(*cmd, stdout=pipe, stderr=pipe, env=env)
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    code, _, err = await run("http://127.0.0.1:9/", "--state", str(a_file), "-q")
    assert code == 2 and "not a directory" in err and "Traceback" not in err
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    code, _, err = await run("http://127.0.0.1:9/", "--state", str(foreign), "-q")
    assert code == 2 and "not a crawl state" in err
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]

    server = await serve(gen_app(300, delay=0.01))
    base = str(server.make_url("/"))
    state = tmp_path / "state"
    args = (base, "--state", str(state), "--concurrency", "1", "-q", "-f", "json")
    cmd = (sys.executable, "-m", "crawler", "audit", *args)
    first = await asyncio.create_subprocess_exec(*cmd, stdout=pipe, stderr=pipe, env=env)
    journal = state / JOURNAL_NAME
    for _ in range(400):
        await asyncio.sleep(0.05)
        if journal.exists() and journal.read_bytes().count(b"\n") >= 20:
            break
    code, _, err = await run(*args)
    assert code == 2 and "in use by process" in err
    out, err_first = await asyncio.wait_for(first.communicate(), 120)
    assert first.returncode in (0, 1), err_first.decode()
    report = json.loads(out)
    with sqlite3.connect(state / GRAPH_DB) as db:  # the first run's graph, whole
        (rows,) = db.execute("SELECT COUNT(*) FROM link").fetchone()
    assert rows == report["stats"]["links"] > 800
    assert report["stats"]["pages"] >= 300
