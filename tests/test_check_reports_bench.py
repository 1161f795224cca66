"""The link-checker benchmark's ground truth (benchmarks/check.py), against its live server.

The benchmark scores every tool by `Site.truth` (the broken URLs as linked) and `Site.tricky`
(good links that naive checkers get wrong). If the server did not do what those sets say, every
figure in benchmarks/CHECK.md would be wrong; so a small site is served by the benchmark's own
``serve`` subprocess and each URL is asked the way a careful checker would: every truth URL
is broken (4xx/5xx at the end of its redirects, a refused connection, a timeout, or a page
without the fragment), every tricky one works (after one Retry-After wait, by GET after a HEAD
405), and no page of the site links the external server's unlinked pages.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_check", ROOT / "benchmarks" / "check.py")
assert _spec and _spec.loader
bench: Any = importlib.util.module_from_spec(_spec)
sys.modules["bench_check"] = bench
_spec.loader.exec_module(bench)

PAGES = 160  # from 156 pages up every special target is linked
HANG = 1.5
TIMEOUT = 1.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


def ask(url: str, method: str = "GET", timeout: float = 5.0) -> tuple[int | str, str, Any]:
    """(status or error kind, body, headers) without following redirects."""
    opener = urllib.request.build_opener(_NoRedirect, urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, method=method)
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace"), e.headers
    except TimeoutError:
        return "timeout", "", None
    except urllib.error.URLError as e:
        return ("timeout" if isinstance(e.reason, TimeoutError) else "connect"), "", None


def follow(url: str, method: str = "GET") -> tuple[int | str, str, str]:
    """(final status, body, final URL) following up to 5 redirects."""
    for _ in range(5):
        status, body, headers = ask(url, method, timeout=TIMEOUT)
        if status in (301, 302, 303, 307, 308):
            url = urllib.parse.urljoin(url, headers["Location"])
            continue
        return status, body, url
    return "too_many_redirects", "", url


def has_target(body: str, frag: str) -> bool:
    return bool(re.search(rf'\b(id|name)="{re.escape(frag)}"', body))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = bench.Server(PAGES, tmp_path_factory.mktemp("bench"), hang=HANG)
    with server as s:
        yield s, server


def test_every_truth_url_is_broken(site: Any) -> None:
    s, _ = site
    truth = s.truth()
    assert len(truth) == len({h for h, _, b in s.specials() if b}) > 90

    def check(url: str) -> None:
        base, _, frag = url.partition("#")
        status, body, _ = follow(base)
        if frag:
            assert status == 200 and not has_target(body, frag), url
        else:
            assert status in ("timeout", "connect") or int(status) >= 400, (url, status)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(check, sorted(truth)))


def test_every_tricky_url_works_for_a_careful_checker(site: Any) -> None:
    s, _ = site
    tricky = s.tricky()
    assert not tricky & s.truth()
    assert len(tricky) == len({h for h, _, b in s.specials() if not b}) > 50
    kinds: set[str] = set()

    def check(url: str) -> None:
        status, _, headers = ask(url, "HEAD")
        if status == 405:
            kinds.add("head_405")
            status, _, _ = ask(url)
        if status == 429:
            kinds.add("429_once")
            time.sleep(float(headers["Retry-After"]))
            status, _, _ = ask(url)
        if status == 302:
            kinds.add("redirect")
            status, _, _ = follow(url)
        assert status == 200, (url, status)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(check, sorted(tricky)))
    assert kinds == {"head_405", "429_once", "redirect"}


def test_pages_fragments_and_the_external_server(site: Any) -> None:
    s, _ = site
    linked: set[str] = set()
    for i in range(PAGES):
        status, body, _ = ask(f"{s.base}/p/{i}.html")
        assert status == 200
        assert 'id="s1"' in body and 'name="top"' in body
        hrefs = re.findall(r'(?:href|src)="([^"]+)"', body)
        linked.update(s.absolute(h) for h in hrefs)
    # Every special target is linked from some page; nothing links the unlinked external pages.
    assert {s.absolute(h) for h, _, _ in s.specials()} <= linked
    assert not [u for u in linked if "/ext/secret/" in u]
    status, body, _ = ask(f"{s.ext}/ext/ok/0")
    assert status == 200 and "/ext/secret/0" in body
    # A redirect that ends broken is scored under the URL as linked.
    assert bench._normal(f"{s.base}/nowhere/3", s) == f"{s.base}/redir-bad/3"
    assert bench._normal(s.base, s) == s.base + "/"


def test_the_server_counts_requests(tmp_path: Path) -> None:
    server = bench.Server(5, tmp_path, hang=0)
    with server as s:
        ask(f"{s.base}/p/1.html")
        ask(f"{s.ext}/ext/secret/1")
    hits = server.hits()
    assert hits["GET /p/1.html"] == 1 and hits["EXT GET /ext/secret/1"] == 1
