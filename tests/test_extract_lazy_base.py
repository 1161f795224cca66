"""The compiled extractor's resolver without ada for serialised bases, and canonical IPv4 hosts.

``_lazy_resolver`` takes the fast fields (prefix, path, directory) of a page URL straight from
the string when it is WHATWG-serialised already, leaving the ada parse for later; it must give
exactly the fields ``_resolve.Resolver`` computes, and decline every other base. The fast path's
absolute form keeps an IPv4 host only in its canonical dotted-quad form; every other spelling
goes to ada. Both are checked against ada itself.
"""

from __future__ import annotations

import pytest
from ada_url import join_url
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.extract import LinkExtractorC
from crawler.extract._resolve import Resolver

pytestmark = pytest.mark.skipif(LinkExtractorC is None, reason="the compiled twin is not built")

_HOST = st.sampled_from(
    [
        "a.example",
        "A.example",
        "127.0.0.1",
        "1.2.3.4",
        "01.2.3.4",
        "1.2.3",
        "256.1.1.1",
        "0x7f.0.0.1",
        "1.2.3.4.",
        "a.1",
        "xn--nxasmq6b.example",
        "h",
        "[::1]",
        "1.2.3.04",
    ]  # fmt: skip
)
_PORT = st.sampled_from(["", ":80", ":443", ":8080", ":0080", ":65536", ":"])
_PATH = st.sampled_from(["", "/", "/a", "/a/b.html", "/a/./b", "/a/../b", "/%2e/", "/a b", "/é",
                         "//x", "/a?q=1", "/?", "/a#f", "/%7e/"])  # fmt: skip
BASES = st.builds(lambda s, h, p, q: f"{s}://{h}{p}{q}", st.sampled_from(["http", "https", "HTTP"]),
                  _HOST, _PORT, _PATH)  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(base=BASES)
def test_lazy_fields_are_the_resolvers(base: str) -> None:
    from crawler.extract._extract_c import _lazy_fields  # noqa: PLC0415 (compiled only)

    fields = _lazy_fields(base)
    r = Resolver(base)
    if fields is None:
        return
    # accepted: the base is serialised already, and the fields are the Resolver's
    assert r.valid and r.base == base and r._fast
    assert fields == (r._scheme == "https", r._prefix, r._path, r._dir, r._base_nf)


def test_lazy_fields_accept_page_urls() -> None:
    from crawler.extract._extract_c import _lazy_fields  # noqa: PLC0415

    for base in [
        "http://127.0.0.1:8080/docs/a.html?x=1",
        "https://a.example/",
        "http://1.2.3.4/x/",
    ]:
        assert _lazy_fields(base) is not None, base
    for base in ["https://A.example/", "http://a.example", "http://h:80/", "http://01.2.3.4/"]:
        assert _lazy_fields(base) is None, base


@settings(max_examples=600, deadline=None)
@given(base=BASES, ref=BASES | st.sampled_from(["//127.0.0.1:8080/x", "//1.2.3/x", "/p"]))
def test_fast_path_resolves_as_ada(base: str, ref: str) -> None:
    from crawler.extract._extract_c import resolve  # noqa: PLC0415

    try:
        want: str | None = join_url(base, ref).partition("#")[0]
    except ValueError:
        want = None
    if Resolver(base).valid:
        assert resolve(base, ref) == want
