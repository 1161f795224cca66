"""benchmarks/extract.py on tiny input, so that it cannot rot.

The script is run as a process on a three-page corpus written here and three link-dense
pages (its whole output format and exit status), and its pieces are checked in-process: the
link-dense generator has the forms and counts it claims, the selectolax+ada peer returns the
same URLs as our extractor on them (and the agreement check reports a page where the two
differ), and the peer's ada resolver agrees with ``ada_url.join_url``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import ada_url
import pytest

from crawler.extract import LinkExtractor

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "extract.py"

PAGES = {
    "a.html": b"<!doctype html><title>a</title><a href='/x'>x</a> <a href='../up/y.html#f'>y</a>"
    b"<area href='?q=1'><iframe src='//other.example/f'></iframe><a href='#top'>t</a>",
    "b.html": b"<head><base href='https://base.example/b/c/'>"
    b"<meta http-equiv=Refresh content='5; url=next.html'></head>"
    b"<a href=' rel/./a/../z '>z</a><a href='HTTPS://Up.Example:443/P'>p</a>"
    b"<a href='http://a b/'>bad</a><a href='mailto:m@example.org'>m</a>",
    "c.html": b"<frameset><frame src='left.html'><frame src='/right.html'></frameset>",
}


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("extract_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _load()


def test_script_runs_on_tiny_input(tmp_path: Path) -> None:
    for name, data in PAGES.items():
        (tmp_path / name).write_bytes(data)
    args = [str(SCRIPT), "--corpus", str(tmp_path), "--dense", "3", "--repeat", "1"]
    p = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, env=os.environ
    )
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    names = ["crawler py", "crawler py 1KiB chunks", "selectolax+ada", "selectolax+ada.join_url"]
    names.append("py links -> py intake")
    if LinkExtractor.__module__.endswith("_extract_c"):
        names += ["crawler c", "crawler c 1KiB chunks", "c intake: new URLs out"]
        names.append("c links -> c intake")
    for title in ("link-sparse corpus: 3 pages", "link-dense pages ("):
        assert title in out, out
    for name in names:
        rows = [line for line in out.splitlines() if line[:26].rstrip() == name]
        assert len(rows) == 2, (name, out)  # one row a page set
        assert rows[0].split()[-1].endswith("x"), rows
    # 5 + 4 + 2 links resolve on the corpus ("http://a b/" does not); the 3 pages agree.
    assert "3 pages, 0.0 MB, 11 links" in out, out
    assert "link-sparse corpus: the lists agree on 3 of 3 pages" in out, out
    assert "link-dense pages: the lists agree on 3 of 3 pages" in out, out
    # The intake rows: the URLs a crawl of the corpus's site would not know yet, each once
    # (a.html and c.html resolve against example.org; b.html's base moves its links off it).
    intake = [line.split()[-2] for line in out.splitlines() if "intake" in line[:26]]
    k = len(intake) // 2  # the rows of the corpus, then of the dense pages
    assert k and intake[:k] == [intake[0]] * k and intake[k:] == [intake[k]] * k, out
    assert 0 < int(intake[0]) <= 11 and 0 < int(intake[k]) < 3 * 190, out


def test_pathological_only_shows_each_input_against_the_floor(tmp_path: Path) -> None:
    (tmp_path / "a.html").write_bytes(PAGES["a.html"])
    args = [str(SCRIPT), "--corpus", str(tmp_path), "--pathological-only", "--size", "0.02"]
    p = subprocess.run(
        [sys.executable, *args, "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    out = p.stdout
    assert p.returncode == (1 if "NOT met" in out else 0), out + p.stderr
    impls = ["py", "c"] if LinkExtractor.__module__.endswith("_extract_c") else ["py"]
    rows = {(line[:32].rstrip(), line[32:37].strip()): line for line in out.splitlines()}
    for name in [*_load().pathological(20_000), "normal page (corpus)"]:
        for impl in impls:
            row = rows[(name, impl)]
            seconds, mbs, links, *floor = row[37:].split()
            assert float(mbs) > 0 and links == "0" or name.startswith("normal"), row
            if not name.startswith("normal"):
                assert " ".join(floor[:2]) == {"py": "2 MB/s", "c": "20 MB/s"}[impl], row
                assert floor[2:] in (["met"], ["NOT", "met"]), row
    assert "link-sparse corpus" not in out  # nothing else ran


def test_pathological_bench_fails_under_the_floor(
    bench: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for impl in bench.FLOOR_MBS:
        monkeypatch.setitem(bench.FLOOR_MBS, impl, 1e-9)
    assert bench.pathological_bench([], 20_000, 1)
    monkeypatch.setitem(bench.FLOOR_MBS, "py", 1e9)
    assert not bench.pathological_bench([], 20_000, 1)
    out = capsys.readouterr().out
    n = len(bench.pathological(20_000))
    twins = 2 if bench.LinkExtractorC is not None else 1
    # Every row of the first run met; of the second, only the compiled twin's.
    assert out.count("1e+09 MB/s NOT met") == n, out
    assert out.count("1e-09 MB/s met") == n * twins + n * (twins - 1), out


@pytest.mark.parametrize("source", ["own", "auto"])
def test_dense_pages_are_dense(bench: ModuleType, source: str) -> None:
    name, pages = bench.dense_pages(4, 2000, 1, source)
    assert len(pages) == 4
    assert name == "extract.dense_page" or source == "auto"
    forms = ("../", "./", "//", "?page=", "#", "%7", "/./", "/../", "https://host")
    for url, data in pages:
        assert 36_000 <= len(data) <= 50_000, len(data)
        ex = LinkExtractor(url)
        links = ex.feed(data) + ex.close()
        assert 160 <= len(links) <= 200, len(links)
        raws = [link.raw for link in links]
        for form in forms:
            assert any(form in r for r in raws), form
        # the same lists from the peer
        assert bench.run_selectolax_ada(url, data) == [u for u, *_ in links if u is not None]
    hosts = {
        u.split("/")[2]
        for url, data in pages
        for u in bench.run_selectolax_ada(url, data)
        if u.startswith("http") and "127.0.0.1" not in u
    }
    assert len(hosts) >= 60, len(hosts)
    if source == "own":  # deterministic per seed, different per page
        assert bench.dense_page(7, 2000, 1) == bench.dense_page(7, 2000, 1)
        assert bench.dense_page(7, 2000, 1) != bench.dense_page(7, 2000, 2)


def test_agreement_reports_a_difference(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ours reports links inside <template> (see _machine's deviations); a DOM query does not.
    page = b"<a href=/a></a><template><a href=/t></a></template>"
    ours = bench._ours_whole(type(LinkExtractor("https://x.example/")))
    same, n = bench.agreement("t", [("https://x.example/", page)], ours, bench.run_selectolax_ada)
    assert (same, n) == (0, 1)
    out = capsys.readouterr().out
    assert "only ours: https://x.example/t" in out
    assert "the lists agree on 0 of 1 pages" in out


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "#f",
        "?q=1#f",
        "../a/./b",
        "//h.example/x",
        "http://a b/",
        "https://:99999/",
        " /s p ",
        "HTTP://X.EXAMPLE:80/a",
        "\u00e9/\u00fc?\u00e4",
        "javascript:void(0)",
        "%2e%2e/x",
    ],
)
def test_peer_resolver_is_ada(bench: ModuleType, raw: str) -> None:
    base = "https://example.org/dir/page.html"
    resolve = bench.ada_resolver(base)
    try:
        want: str | None = ada_url.join_url(base, raw).split("#")[0]
    except ValueError:
        want = None
    assert resolve(raw) == want
    assert resolve(raw) == want  # from the cache
