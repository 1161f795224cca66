"""The crawl benchmark's site generator (benchmarks/crawl/sitegen.py), without nginx.

A 50-page site is built and read back with html5lib (what a spec-compliant parser puts in
the DOM): every link resolves to a page of the site, every page is reachable from ``/``,
the sizes are in the stated range, and nothing else on a page points at the site itself
(so wget, which follows img/script/link URLs too, requests exactly the pages).
"""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import subprocess
import sys
from collections import deque
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import html5lib
import pytest

ROOT = Path(__file__).resolve().parents[1]
SITEGEN = ROOT / "benchmarks" / "crawl" / "sitegen.py"
CORPUS = ROOT.parent / "shared" / "corpus" / "pages"
HOST = "http://bench.test"
N = 50

pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir() or not SITEGEN.exists(), reason="needs ../shared/corpus/pages"
)


def _load_sitegen():
    spec = importlib.util.spec_from_file_location("crawlbench_sitegen", SITEGEN)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up by name
    spec.loader.exec_module(mod)
    return mod


sitegen = _load_sitegen()


@pytest.fixture(scope="module")
def filler():
    return sitegen.load_filler(CORPUS)


@pytest.fixture(scope="module")
def built(tmp_path_factory, filler):
    root = tmp_path_factory.mktemp("site")
    info = sitegen.build_site(root, N, seed=7, corpus_dir=CORPUS)
    return root, info, sitegen.Site(N, filler, seed=7)


def _page_links(data: bytes, page_url: str) -> tuple[list[str], list[tuple[str, str, str]]]:
    """(resolved <a href> URLs without fragment, every other URL-bearing attribute)."""
    doc = html5lib.parse(data, namespaceHTMLElements=False)
    links: list[str] = []
    others: list[tuple[str, str, str]] = []
    for el in doc.iter():
        if not isinstance(el.tag, str):
            continue
        for name, value in el.attrib.items():
            if el.tag in ("a", "area") and name == "href":
                links.append(urldefrag(urljoin(page_url, value.strip()))[0])
            elif name in sitegen._URL_ATTRS:
                others.append((el.tag, name, value))
        assert el.tag not in ("base", "iframe", "frame", "area"), el.tag
        if el.tag == "meta":
            assert (el.get("http-equiv") or "").lower() != "refresh"
    return links, others


def test_files_sizes_and_stamp(built):
    root, info, site = built
    files = sorted(root.rglob("*.html"))
    assert len(files) == N
    assert {f.relative_to(root).as_posix() for f in files} == {site.file_name(i) for i in range(N)}
    sizes = [f.stat().st_size for f in files]
    assert all(sitegen.MIN_BYTES <= s <= sitegen.MAX_BYTES for s in sizes), (min(sizes), max(sizes))
    assert info.total_bytes == sum(sizes)
    # A second build with the same arguments reuses the site instead of rewriting it.
    before = files[0].stat().st_mtime_ns
    sitegen.build_site(root, N, seed=7, corpus_dir=CORPUS)
    assert files[0].stat().st_mtime_ns == before


def test_links_resolve_reach_every_page_and_match_the_plan(built):
    root, _, site = built
    paths = {site.path(i): i for i in range(N)}
    graph: dict[str, set[str]] = {}
    for i in range(N):
        url = HOST + site.path(i)
        links, others = _page_links((root / site.file_name(i)).read_bytes(), url)
        # about a hundred same-host links a page
        assert 85 <= len(links) <= 130, (i, len(links))
        targets = set()
        for link in links:
            parts = urlsplit(link)
            assert f"{parts.scheme}://{parts.netloc}" == HOST, link
            assert parts.path in paths and not parts.query, link
            targets.add(parts.path)
        # what the page links to is what the generator's plan says (plus its own #top)
        assert targets == {site.path(j) for j in site.links(i)} | {site.path(i)}
        # nothing else points at the site: off-site asset URLs only
        for tag, name, value in others:
            assert value.startswith(sitegen.OFFSITE), (i, tag, name, value)
        graph[site.path(i)] = targets

    depth = {"/": 0}
    queue = deque(["/"])
    while queue:
        cur = queue.popleft()
        for nxt in graph[cur]:
            if nxt not in depth:
                depth[nxt] = depth[cur] + 1
                queue.append(nxt)
    assert set(depth) == set(paths)  # every page reachable from the root
    assert max(depth.values()) <= 2
    assert all(depth[site.path(i)] <= site.depth(i) for i in range(N))


def test_link_spellings_are_varied(built):
    root, _, site = built
    text = b"".join((root / site.file_name(i)).read_bytes() for i in range(1, 12)).decode()
    for form in ('href="/', 'href="../', 'href="./../', "#comments", 'href="#top"'):
        assert form in text, form


def test_deterministic_and_seeded(filler):
    a, b, c = (
        sitegen.Site(N, filler, seed=3),
        sitegen.Site(N, filler, seed=3),
        sitegen.Site(N, filler, seed=4),
    )
    for i in (0, 17, 49):
        assert a.page(i) == b.page(i)
        assert a.page(i) != c.page(i)


def test_full_size_tree_depth(filler):
    n = 20_000
    site = sitegen.Site(n, filler, seed=1)
    covered = {0}
    for i in range(n):
        covered.update(site.children(i))
    assert covered == set(range(n))  # the tree alone reaches every page
    assert max(site.depth(i) for i in range(n)) == math.ceil(math.log(n, sitegen.FANOUT))
    assert len({site.path(i) for i in range(n)}) == n
    for i in (0, 1, 500, 19_999):  # a few full-size pages render within the range
        assert sitegen.MIN_BYTES <= len(site.page(i)) <= sitegen.MAX_BYTES


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_benchmark_end_to_end_small(tmp_path):
    """The whole driver on a 60-page site with nginx: ours and wget each fetch every page once."""
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()) or not shutil.which("wget"):
        pytest.skip("needs nginx and wget installed")
    out = tmp_path / "out.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "crawl.py"), "--pages", "60",
           "--crawlers", "ours,wget", "--site-dir", str(tmp_path), "--time-limit", "120",
           "--json", str(out)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=280, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = {r["name"]: r for r in json.loads(out.read_text())["runs"]}
    for name in ("ours", "wget"):
        assert runs[name]["pages"] == 60, (name, runs[name])
        assert runs[name]["gets"] == 60, (name, runs[name])
        assert runs[name]["non_200"] == 0
        assert runs[name]["cpu"] > 0 and runs[name]["rss_mb"] > 0
    assert runs["wget"]["requests"] == 120  # HEAD + GET a page, as the counting note says
    assert "WARNING" not in res.stdout
