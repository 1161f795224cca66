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
    """The whole driver on 60-page sites of each kind with nginx: ours and wget each fetch every
    page once (the dense site's archive pages through nginx's /archive/ mapping too)."""
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()) or not shutil.which("wget"):
        pytest.skip("needs nginx and wget installed")
    out = tmp_path / "out.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "crawl.py"), "--pages", "60",
           "--site", "all", "--crawlers", "ours,wget", "--site-dir", str(tmp_path),
           "--time-limit", "120", "--json", str(out)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=280, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads(out.read_text())
    assert [s["site"] for s in data["sites"]] == ["standard", "dense", "small"]
    for site in data["sites"]:
        runs = {r["name"]: r for r in site["runs"]}
        for name in ("ours", "wget"):
            assert runs[name]["pages"] == 60, (site["site"], name, runs[name])
            assert runs[name]["gets"] == 60, (site["site"], name, runs[name])
            assert runs[name]["non_200"] == 0
            assert runs[name]["cpu"] > 0 and runs[name]["rss_mb"] > 0
        assert runs["wget"]["requests"] == 120  # HEAD + GET a page, as the counting note says
        assert site["server_errors"] == []
    assert data["runs"] == data["sites"][0]["runs"]
    assert "WARNING" not in res.stdout
    assert res.stdout.count("bar (issue 9, ours): ") == 3


# ----------------------------------------------------------- the link-dense and small sites

CRAWL_DIR = ROOT / "benchmarks" / "crawl"
_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"crawlbench_{name}", CRAWL_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


dense = _load("sitegen_dense")
small = _load("sitegen_small")
DENSE_HOST = "bench.test:8080"


def _remove_dots(path: str) -> str:
    """RFC 3986 5.2.4 on a path that starts with "/"."""
    segs = path.split("/")
    out: list[str] = []
    for k, seg in enumerate(segs):
        last = k == len(segs) - 1
        if seg in (".", ".."):
            if seg == ".." and len(out) > 1:
                out.pop()
            if last:
                out.append("")
            continue
        out.append(seg)
    return "/".join(out)


def _unescape(text: str) -> str:
    """Decode the escapes of unreserved characters (the rest upper-cased), RFC 3986 6.2.2."""
    import re  # noqa: PLC0415

    def fix(m):
        ch = chr(int(m.group(1), 16))
        return ch if ch in _UNRESERVED else m.group(0).upper()

    return re.sub(r"%([0-9A-Fa-f]{2})", fix, text)


def _normal(base: str, href: str) -> tuple[str, str, str]:
    """(scheme, host, path?query) of href resolved against base and normalised."""
    parts = urlsplit(urljoin(base, href.strip()))
    path = _unescape(_remove_dots(parts.path or "/"))
    query = f"?{parts.query}" if parts.query else ""
    return parts.scheme.lower(), parts.netloc.lower(), path + query


def _hrefs(data: bytes) -> tuple[list[str], list[tuple[str, str, str]]]:
    """(<a href> values, every other URL-bearing attribute but <link href>) via html5lib."""
    doc = html5lib.parse(data, namespaceHTMLElements=False)
    hrefs: list[str] = []
    others: list[tuple[str, str, str]] = []
    for el in doc.iter():
        if not isinstance(el.tag, str):
            continue
        assert el.tag not in ("base", "iframe", "frame", "area", "img", "script"), el.tag
        for name, value in el.attrib.items():
            if el.tag == "a" and name == "href":
                hrefs.append(value)
            elif name in sitegen._URL_ATTRS:
                others.append((el.tag, name, value))
    return hrefs, others


def _reachable(graph: dict[str, set[str]], root: str = "/") -> set[str]:
    seen = {root}
    queue = deque([root])
    while queue:
        for nxt in graph[queue.popleft()]:
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


@pytest.fixture(scope="module")
def dense_built(tmp_path_factory):
    root = tmp_path_factory.mktemp("dense")
    info = dense.build_site(root, 60, seed=7, host=DENSE_HOST)
    return root, info, dense.DenseSite(60, 7, DENSE_HOST)


def test_dense_files_sizes_and_links(dense_built):
    root, info, site = dense_built
    urls = {site.url(i): i for i in range(site.n)}
    assert len(urls) == site.n
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html"))
    assert files == sorted(site.file_name(i) for i in range(site.n))
    counts = []
    off_hosts: set[str] = set()
    graph: dict[str, set[str]] = {}
    for i in range(site.n):
        data = (root / site.file_name(i)).read_bytes()
        assert dense.MIN_BYTES <= len(data) <= dense.MAX_BYTES, (i, len(data))
        hrefs, others = _hrefs(data)
        assert others == [], (i, others[:3])  # only <a href>s carry URLs
        counts.append(len(hrefs))
        page_url = f"http://{DENSE_HOST}{site.url(i)}"
        targets: set[str] = set()
        for href in hrefs:
            if href.startswith("mailto:"):
                continue
            scheme, host, path = _normal(page_url, href)
            if host == DENSE_HOST:
                # every same-host URL is a page of the site, in whatever spelling
                assert scheme == "http" and path in urls, (i, href, path)
                targets.add(path)
            else:
                assert host.endswith(".example") and host.startswith("host"), (i, href)
                off_hosts.add(host)
        assert targets == {site.url(j) for j in site.links(i)}, i
        graph[site.url(i)] = targets
    assert all(dense.LINKS[0] <= c <= dense.LINKS[1] for c in counts), (min(counts), max(counts))
    assert 168 <= sum(counts) / len(counts) <= 185
    assert len(off_hosts) >= 280  # ~300 other hosts, each only linked to
    assert _reachable(graph) == set(urls)
    assert info.total_bytes == sum((root / f).stat().st_size for f in files)
    before = (root / files[0]).stat().st_mtime_ns
    dense.build_site(root, 60, seed=7, host=DENSE_HOST)  # reused, not rewritten
    assert (root / files[0]).stat().st_mtime_ns == before
    assert dense.stamped_host(root) == DENSE_HOST


def test_dense_every_link_form_is_there(dense_built):
    import re  # noqa: PLC0415

    root, _, site = dense_built
    text = b"".join((root / site.file_name(i)).read_bytes() for i in range(site.n)).decode()
    hrefs = re.findall(r'href="([^"]*)"', text)
    forms = {
        "root-relative": r"^/[a-z~]",
        "../": r"^\.\./",
        "./": r"^\./",
        "same directory": r"^\d+-[a-z-]+\.html$",
        "protocol-relative same host": "^//" + re.escape(DENSE_HOST) + "/",
        "absolute same host": "^http://" + re.escape(DENSE_HOST) + "/",
        "query-only": r"^\?page=\d+$",
        "fragment-only": r"^#",
        "%7E": "%7E",
        "%7e": "%7e",
        "other lower-case escape": r"%(?!7e)[0-9a-f]*[a-f][0-9a-f]*",
        "dot segment in the middle": r"^/[a-z~]+/\./s\d/\.\./",
        "parent segment in the middle": r"^/[a-z~]+/s\d/\.\./s\d/\./",
        "absolute other host": r"^https?://host\d{3}\.example/",
        "protocol-relative other host": r"^//host\d{3}\.example/",
        "upper-case other host": r"^HTTP://HOST\d{3}\.EXAMPLE/",
        "fragment": r"\.html#c\d$",
    }
    for name, pattern in forms.items():
        n = sum(1 for h in hrefs if re.search(pattern, h))
        assert n >= 5, (name, n)


def test_dense_deterministic_seeded_and_importable():
    a = dense.DenseSite(60, 3, DENSE_HOST)
    for i in (0, 5, 31, 59):
        page = a.page(i)
        assert page == dense.DenseSite(60, 3, DENSE_HOST).page(i)
        assert page == dense.dense_page(i, 60, 3, DENSE_HOST)
        assert page != dense.DenseSite(60, 4, DENSE_HOST).page(i)
    assert dense.dense_url(5, 60, 3, DENSE_HOST) == f"http://{DENSE_HOST}/archive/?page=1"
    assert b"127.0.0.1" not in a.page(1)  # the host is the one asked for


def test_dense_full_size_reachable_and_sized():
    site = dense.DenseSite(2000, 1, "127.0.0.1:8080")
    graph = {site.url(i): {site.url(j) for j in site.links(i)} for i in range(site.n)}
    assert _reachable(graph) == {site.url(i) for i in range(site.n)}
    for i in (0, 5, 777, 1999):
        page = site.page(i)
        assert dense.MIN_BYTES <= len(page) <= dense.MAX_BYTES
        assert dense.LINKS[0] <= page.count(b"<a href=") <= dense.LINKS[1]


@pytest.fixture(scope="module")
def small_built(tmp_path_factory):
    root = tmp_path_factory.mktemp("small")
    info = small.build_site(root, 100, seed=7)
    return root, info, small.SmallSite(100, 7)


def test_small_files_sizes_links_and_reach(small_built):
    root, info, site = small_built
    urls = {site.url(i): i for i in range(site.n)}
    assert sorted(p.name for p in root.glob("*.html")) == sorted(
        site.file_name(i) for i in range(site.n)
    )
    counts = []
    graph: dict[str, set[str]] = {}
    for i in range(site.n):
        data = (root / site.file_name(i)).read_bytes()
        assert small.MIN_BYTES <= len(data) <= small.MAX_BYTES, (i, len(data))
        hrefs, others = _hrefs(data)
        page_url = "http://bench.test" + site.url(i)
        targets: set[str] = set()
        for href in hrefs:
            scheme, host, path = _normal(page_url, href)
            if host == "bench.test":
                assert path in urls, (i, href)
                targets.add(path)
            else:
                assert host.endswith(".example"), (i, href)
        assert targets == {site.url(j) for j in site.links(i)}, i
        # <link rel=home/up/prev/next> point at pages too; nothing else carries a URL
        for tag, name, value in others:
            assert tag == "link" and name == "href", (i, tag, name)
            assert _normal(page_url, value)[2] in urls, (i, value)
        assert b'href="index.html"' not in data  # "/" has one URL: home is "./"
        if site.kind[i][1]:  # a section page: about 20 links
            assert 14 <= len(hrefs) <= 27, (i, len(hrefs))
        counts.append(len(hrefs))
        graph[site.url(i)] = targets
    assert _reachable(graph) == set(urls)
    assert info.total_bytes == sum(p.stat().st_size for p in root.glob("*.html"))


def test_small_full_size_mean_links_and_sizes():
    import re  # noqa: PLC0415

    site = small.SmallSite(1500, 1)
    counts = []
    for i in range(0, site.n, 3):
        page = site.page(i)
        assert small.MIN_BYTES <= len(page) <= small.MAX_BYTES
        counts.append(len(re.findall(rb"<a [^>]*href=", page)))
    assert 18 <= sum(counts) / len(counts) <= 24, sum(counts) / len(counts)
    graph = {site.url(i): {site.url(j) for j in site.links(i)} for i in range(site.n)}
    assert _reachable(graph) == {site.url(i) for i in range(site.n)}
    big = small.SmallSite(3000, 1)  # the largest manual: the title page lists 97 chapters
    for i in (0, 1, 2, 1550, 2999):
        assert small.MIN_BYTES <= len(big.page(i)) <= small.MAX_BYTES, i
    again = small.SmallSite(1500, 1)
    other = small.SmallSite(1500, 2)
    for i in (0, 1, 2, 777, 1499):
        assert site.page(i) == again.page(i) != other.page(i)
