"""Proof by SIGKILL (issue 10): real ``crawler crawl --state DIR`` processes killed at random
moments, then resumed, until one exits 0; the guarantees of the README are then checked
against the server's own request log, the output file and ``crawler status``.

The site (tests/killsite.py) is served by its own process, which outlives every kill and logs
every GET with its start and end time. Each crawler run is a separate ``python -m crawler``
process; a run is killed (SIGKILL, or SIGINT for the Ctrl-C test) after a random number of
requests have reached the server plus a random fraction of a second, or, at random, a random
time after its start (during start-up or recovery). Everything random comes from
``random.Random(seed)``: a failure names its seed and the test id that replays the same
schedule (the kill moments are the same in requests, not to the microsecond, so a race may
need a few replays).

What is checked, for every crawl:

* the union of the pages fetched over all runs is the site (:meth:`KillSite.expected`), and
  nothing else (never a ``/private/`` URL robots.txt disallows);
* no URL is fetched twice in one run; one fetched again in a later run was fetched in a run
  that was killed (it was in flight then), and per kill at most ``concurrency`` requests are
  fetched again (a redirect and its in-line target count once);
* ``-f jsonl``: every line of the output parses, the file ends with a newline, every page
  fetched has its record (``url`` or ``final_url``), a page has more than one record only
  if it was fetched more than once;
* ``-f urls``: every discovered in-scope URL is listed; a URL listed twice is a link (or the
  redirect target) of a page that was in flight at a kill;
* the final run's summary counts the whole crawl (as many pages as there are records);
* ``crawler status --state DIR`` afterwards: nothing queued, nothing in flight.
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.killsite import KillSite

ROOT = Path(__file__).resolve().parent.parent
PAGES = 200
CONCURRENCY = 8
RUN_LIMIT = 60.0  # seconds one crawler run may take before the test gives up on it
SUMMARY = re.compile(r"crawler: (?:done|stopped \(\w+\)) in [^:]*: (\d+) pages")


# ------------------------------------------------------------------ the server process


class SiteServer:
    """``python -m tests.killsite`` in its own process; its request log over HTTP."""

    def __init__(self, pages: int, seed: int) -> None:
        self.site = KillSite(pages=pages, seed=seed)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.killsite", "--pages", str(pages), "--seed", str(seed)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.origin = f"http://127.0.0.1:{self.port}"

    def _get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.origin + path, timeout=10) as r:
            return bytes(r.read())

    def count(self) -> int:
        return int(self._get("/__count"))

    def log(self) -> list[tuple[str, float, float | None]]:
        return [(p, s, e) for p, s, e in json.loads(self._get("/__log"))]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def server_factory() -> Iterator[Callable[..., SiteServer]]:
    started: list[SiteServer] = []

    def start(pages: int = PAGES, seed: int = 1) -> SiteServer:
        s = SiteServer(pages, seed)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


# ------------------------------------------------------------------ crawler runs


@dataclass
class Run:
    """One crawler process: how it ended and when (wall clock, as the server logs)."""

    started: float
    ended: float
    exit: int
    stopped_by: str | None  # "SIGKILL", "SIGINT" or None (it ended by itself)
    stderr: str
    stopped_at: float = 0.0  # when the signal was sent


@dataclass
class Crawl:
    """A crawl of one site through several runs on one state directory."""

    server: SiteServer
    workdir: Path
    fmt: str = "jsonl"
    label: str = "crawl"  # for messages: the seed and how to replay it
    extra: tuple[str, ...] = ()
    runs: list[Run] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return self.workdir / "state"

    @property
    def out(self) -> Path:
        return self.workdir / f"out.{self.fmt}"

    def command(self, *more: str, url: bool = False) -> list[str]:
        cmd = [sys.executable, "-m", "crawler", "crawl"]
        if url or not self.runs:
            cmd.append(self.server.origin + "/")
        cmd += ["--state", str(self.state), "-c", str(CONCURRENCY), "--per-host"]
        cmd += [str(CONCURRENCY), "-f", self.fmt, "-o", str(self.out), *self.extra, *more]
        return cmd

    def run(
        self,
        *more: str,
        stop: signal.Signals | None = None,
        after_requests: int | None = None,
        after_seconds: float = 0.0,
        url: bool = False,
    ) -> Run:
        """Start a run; with ``stop``, send it that signal once the server has seen
        ``after_requests`` more requests (None: do not wait for any) and ``after_seconds``
        more have passed. ``url``: give the seed again (the same command as the first run;
        without it a resumed run names no URL). Returns once the process has ended."""
        err_path = self.workdir / f"run{len(self.runs)}.err"
        base = self.server.count()
        with open(err_path, "wb") as err:
            started = time.time()
            proc = subprocess.Popen(
                self.command(*more, url=url),
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=self.workdir,
            )
            sent = None
            sent_at = 0.0
            try:
                if stop is not None:
                    while after_requests is not None and proc.poll() is None:
                        if self.server.count() - base >= after_requests:
                            break
                        time.sleep(0.005)
                    deadline = time.monotonic() + after_seconds
                    while proc.poll() is None and time.monotonic() < deadline:
                        time.sleep(0.002)
                    if proc.poll() is None:
                        sent_at = time.time()
                        proc.send_signal(stop)
                        sent = stop.name
                code = proc.wait(RUN_LIMIT)
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            ended = time.time()
        run = Run(started, ended, code, sent, err_path.read_text(errors="replace"), sent_at)
        self.runs.append(run)
        return run

    def status(self) -> dict[str, object]:
        res = subprocess.run(
            [sys.executable, "-m", "crawler", "status", "--state", str(self.state)]
            + ["--format", "json"],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.workdir,
        )
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)
        assert isinstance(data, dict)
        return data


NO_CRAWL_YET = "holds no crawl yet"


def resume(crawl: Crawl, rng: random.Random, **kw: object) -> Run:
    """One resumed run: at random the same command again (with the URL) or none named.

    A run killed before the state held the crawl (during start-up) leaves nothing to
    continue: a run with no URL is then refused (exit 2), which is right only if nothing
    had been fetched yet; the same command with the URL follows.
    """
    with_url = rng.random() < 0.5
    run = crawl.run(url=with_url, **kw)  # type: ignore[arg-type]
    if not with_url and run.exit == 2 and NO_CRAWL_YET in run.stderr:
        fetched = [p for p, _, _ in crawl.server.log() if p != "/robots.txt"]
        assert not fetched, f"{crawl.label}: {NO_CRAWL_YET}, yet {len(fetched)} were fetched"
        crawl.runs.pop()
        run = crawl.run(url=True, **kw)  # type: ignore[arg-type]
    return run


def kill_and_resume(crawl: Crawl, rng: random.Random, kills: int) -> Crawl:
    """Kill ``kills`` runs at random moments, then resume until a run exits 0."""
    for _ in range(kills):
        if rng.random() < 0.25:  # during start-up, opening the state or recovering it
            kw: dict[str, object] = {"after_seconds": rng.uniform(0.05, 0.8)}
        else:
            kw = {"after_requests": rng.randrange(1, 80), "after_seconds": rng.uniform(0, 0.15)}
        run = resume(crawl, rng, stop=signal.SIGKILL, **kw)
        if run.stopped_by is None:  # it finished before the kill: the crawl is over
            assert run.exit == 0, f"{why_of(crawl)}: exit {run.exit}:\n{run.stderr}"
            return crawl
        assert run.exit == -signal.SIGKILL, f"{why_of(crawl)}: exit {run.exit}:\n{run.stderr}"
    for _ in range(3):
        run = resume(crawl, rng)
        if run.exit == 0:
            return crawl
    raise AssertionError(f"{why_of(crawl)}: no run exited 0; last:\n{crawl.runs[-1].stderr}")


# ------------------------------------------------------------------ the checks


def _run_of(crawl: Crawl, t: float) -> int:
    """The run a request that reached the server at ``t`` came from: the last one started
    before ``t``. (Not "the one alive at ``t``": a request sent just before a kill may be
    read by the server after the process is gone; the next run, not started yet, cannot
    have sent it.)"""
    i = 0
    for j, run in enumerate(crawl.runs):
        if run.started <= t:
            i = j
    return i


def check_fetches(crawl: Crawl, why: str) -> dict[str, list[int]]:
    """The site fetched, duplicates only from stopped runs and at most ``concurrency`` per
    stop. Returns each path's runs (the run index of each of its GETs)."""
    site = crawl.server.site
    expected, _ = site.expected()
    runs_of: dict[str, list[int]] = {}
    answered: dict[tuple[str, int], float | None] = {}  # (path, run) -> when its GET ended
    for path, start, end in crawl.server.log():
        i = _run_of(crawl, start)
        runs_of.setdefault(path, []).append(i)
        answered[path, i] = end
    robots = runs_of.pop("/robots.txt", [])
    fetched = set(runs_of)
    assert fetched - expected == set(), f"{why}: fetched outside the site"
    assert expected - fetched == set(), f"{why}: never fetched (lost)"
    assert len(robots) <= len(crawl.runs), f"{why}: robots.txt fetched {len(robots)} times"
    redirect_of = {target: src for src, (_, target) in site.redirects.items()}
    for i, run in enumerate(crawl.runs):
        again = set()
        for path, runs in runs_of.items():
            assert runs.count(i) <= 1, (
                f"{why}: {path} fetched {runs.count(i)} times in run {i}; its runs {runs}; "
                f"redirects to it and their runs: "
                f"{[(s, runs_of.get(s)) for s, (_, t) in site.redirects.items() if t == path]}"
            )
            if i in runs and any(r > i for r in runs):
                again.add(path)
        if run.stopped_by is None:
            assert not again, f"{why}: run {i} ended by itself, yet fetched again: {again}"
        leases = {p for p in again if redirect_of.get(p) not in again}

        def before_stop(p: str, run: Run = run, i: int = i) -> str:
            end = answered[p, i]
            return "unanswered" if end is None else f"{run.stopped_at - end:+.3f}"

        assert len(leases) <= CONCURRENCY, (
            f"{why}: {len(leases)} requests of run {i} ({run.stopped_by}) fetched again "
            f"(at most {CONCURRENCY} were in flight); each with the seconds between the end "
            f"of its answer and the stop: {[(p, before_stop(p)) for p in sorted(leases)]}"
        )
    return runs_of


def check_summary_and_status(crawl: Crawl, pages: int, why: str) -> None:
    last = crawl.runs[-1]
    m = SUMMARY.search(last.stderr)
    assert m, f"{why}: no summary in the last run's stderr:\n{last.stderr}"
    assert int(m.group(1)) == pages, f"{why}: summary counts {m.group(1)} pages, not {pages}"
    status = crawl.status()
    assert status["queued"] == 0, f"{why}: status after the end: {status}"
    assert status["in_flight"] == 0, f"{why}: status after the end: {status}"
    done = status["done"] - status["failed"].get("robots_disallowed", 0)
    assert done == pages, f"{why}: status says {done} pages done, not {pages}: {status}"


def check_jsonl(crawl: Crawl, runs_of: dict[str, list[int]], why: str) -> int:
    """Every line parses, every page has its record; returns the number of pages."""
    origin = crawl.server.origin
    data = crawl.out.read_bytes()
    assert data == b"" or data.endswith(b"\n"), f"{why}: the output's last line is cut"
    records = [json.loads(line) for line in data.decode().splitlines()]
    covered = {r["url"] for r in records} | {r["final_url"] for r in records}
    covered = {u[len(origin) :] for u in covered if u and u.startswith(origin)}
    assert set(runs_of) - covered == set(), f"{why}: pages fetched without a record"
    per_url = Counter(r["url"] for r in records)
    for url, n in per_url.items():
        gets = len(runs_of.get(url[len(origin) :], []))
        assert n <= max(gets, 1), f"{why}: {n} records of {url}, fetched {gets} times"
    return len(per_url)


def check_urls(crawl: Crawl, runs_of: dict[str, list[int]], why: str) -> None:
    """Every discovered URL listed; one listed twice is a link of a page fetched twice."""
    site, origin = crawl.server.site, crawl.server.origin
    _, discovered = site.expected()
    data = crawl.out.read_bytes()
    assert data == b"" or data.endswith(b"\n"), f"{why}: the output's last line is cut"
    lines = Counter(data.decode().splitlines())
    listed = {u[len(origin) :] for u in lines}
    assert discovered - listed == set(), f"{why}: discovered URLs not listed"
    assert listed - discovered == set(), f"{why}: listed, yet not in scope"
    refetched = {p for p, runs in runs_of.items() if len(runs) > 1}
    relisted_ok = {t for p in refetched for _, t in site.links.get(p, []) if t} | refetched
    relisted_ok |= {site.redirects[p][1] for p in refetched if p in site.redirects}
    twice = {u[len(origin) :] for u, n in lines.items() if n > 1}
    assert twice - relisted_ok == set(), f"{why}: listed twice, yet no page in flight links it"


def why_of(crawl: Crawl) -> str:
    stops = [r.stopped_by or f"exit {r.exit}" for r in crawl.runs]
    return f"{crawl.label}, runs {stops}"


# ------------------------------------------------------------------ the tests


def _kill_test(server_factory, tmp_path: Path, request, seed: int, kills: int, fmt: str) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    server = server_factory(seed=seed)
    label = f"seed {seed} (replay: pytest -m 'slow or not slow' '{request.node.nodeid}')"
    crawl = kill_and_resume(Crawl(server, tmp_path, fmt=fmt, label=label), rng, kills)
    why = why_of(crawl)
    print(why)  # with -s: how many kills landed
    killed = sum(r.stopped_by == "SIGKILL" for r in crawl.runs)
    assert killed >= 1, f"{why}: the crawl ended before any kill"
    runs_of = check_fetches(crawl, why)
    if fmt == "jsonl":
        pages = check_jsonl(crawl, runs_of, why)
        check_summary_and_status(crawl, pages, why)
    else:
        check_urls(crawl, runs_of, why)
        # No records to count the pages by: each URL fetched is a page, except a redirect
        # target followed in-line (fetched as a hop of its source's request); which of
        # them were depends on the order, so the count is bounded, then held to the summary.
        status = crawl.status()
        pages = status["done"] - status["failed"].get("robots_disallowed", 0)
        targets = {t for _, t in crawl.server.site.redirects.values()}
        assert len(runs_of) - len(targets) <= pages <= len(runs_of), f"{why}: {status}"
        check_summary_and_status(crawl, pages, why)


@pytest.mark.parametrize("seed", [1, 2], ids=lambda s: f"seed-{s}")
def test_sigkill_then_resume_jsonl(server_factory, tmp_path: Path, request, seed: int) -> None:  # type: ignore[no-untyped-def]
    _kill_test(server_factory, tmp_path, request, seed, kills=3, fmt="jsonl")


@pytest.mark.parametrize("seed", [11], ids=lambda s: f"seed-{s}")
def test_sigkill_then_resume_urls(server_factory, tmp_path: Path, request, seed: int) -> None:  # type: ignore[no-untyped-def]
    _kill_test(server_factory, tmp_path, request, seed, kills=3, fmt="urls")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 112), ids=lambda s: f"seed-{s}")
def test_sigkill_many_times(server_factory, tmp_path: Path, request, seed: int) -> None:  # type: ignore[no-untyped-def]
    fmt = "jsonl" if seed % 3 else "urls"
    _kill_test(server_factory, tmp_path, request, seed, kills=8, fmt=fmt)


def test_ctrl_c_then_resume(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """SIGINT: exit 130 after a clean stop; the resumed run finishes the crawl."""
    crawl = Crawl(server_factory(seed=5), tmp_path)
    first = crawl.run(stop=signal.SIGINT, after_requests=60)
    assert first.stopped_by == "SIGINT", "the crawl ended before the test could stop it"
    assert first.exit == 130, first.stderr
    assert SUMMARY.search(first.stderr), first.stderr
    status = crawl.status()
    assert status["queued"] > 0, status
    last = crawl.run()
    assert last.exit == 0, last.stderr
    why = why_of(crawl)
    runs_of = check_fetches(crawl, why)
    check_summary_and_status(crawl, check_jsonl(crawl, runs_of, why), why)


def test_max_pages_then_resume_with_more(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A clean stop by the page budget, then a higher budget: counted across runs, nothing
    fetched twice (nothing was in flight at a clean stop), then the rest of the site."""
    crawl = Crawl(server_factory(seed=6), tmp_path)
    first = crawl.run("--max-pages", "60")
    assert first.exit == 0, first.stderr
    assert (m := SUMMARY.search(first.stderr)) and int(m.group(1)) == 60, first.stderr
    second = crawl.run("--max-pages", "150")
    assert second.exit == 0, second.stderr
    assert (m := SUMMARY.search(second.stderr)) and int(m.group(1)) == 150, second.stderr
    status = crawl.status()  # done counts the URLs robots.txt disallowed too: not pages
    assert status["done"] - status["failed"].get("robots_disallowed", 0) == 150, status
    last = crawl.run("--max-pages", "0")  # a resumed run keeps the last run's budget
    assert last.exit == 0, last.stderr
    why = why_of(crawl)
    runs_of = check_fetches(crawl, why)
    twice = {p: r for p, r in runs_of.items() if len(r) > 1}
    assert twice == {}, f"{why}: fetched twice after clean stops"
    pages = check_jsonl(crawl, runs_of, why)
    check_summary_and_status(crawl, pages, why)
    records = crawl.out.read_text().splitlines()
    assert len(records) == pages, f"{why}: {len(records)} records for {pages} pages"


def test_site_model_matches_an_uninterrupted_crawl(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The baseline the kill tests lean on: one run fetches the site exactly once a URL."""
    crawl = Crawl(server_factory(seed=1), tmp_path)
    run = crawl.run()
    assert run.exit == 0, run.stderr
    runs_of = check_fetches(crawl, "uninterrupted")
    assert all(len(r) == 1 for r in runs_of.values())
    check_summary_and_status(crawl, check_jsonl(crawl, runs_of, "uninterrupted"), "uninterrupted")
