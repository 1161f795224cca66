"""Canonicalisation (idempotent, WHATWG-based) and scope rules."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from crawler.urls.policy import UrlPolicy, host_of, join, origin_of, registrable_domain


@pytest.fixture
def policy() -> UrlPolicy:
    return UrlPolicy(["http://example.com/"])


@pytest.mark.parametrize(
    ("raw", "canon"),
    [
        ("HTTP://ExAmple.COM/a", "http://example.com/a"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("http://example.com/a#frag", "http://example.com/a"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com/?", "http://example.com/"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/%7e%41%2f%2F%e2%82%ac", "http://example.com/~A%2F%2F%E2%82%AC"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://example.com/%zz", "http://example.com/%zz"),
        ("http://bücher.example/", "http://xn--bcher-kva.example/"),
        ("  http://example.com/x  ", "http://example.com/x"),
        ("http://example.com/?b=2&a=1", "http://example.com/?b=2&a=1"),
        ("http://example.com/??", "http://example.com/??"),
    ],
)
def test_canonical(policy: UrlPolicy, raw: str, canon: str) -> None:
    assert policy.canonical(raw) == canon
    assert policy.canonical(canon) == canon


@pytest.mark.parametrize(
    "raw",
    [
        "javascript:alert(1)",
        "mailto:a@b",
        "file:///etc/passwd",
        "data:text/html,x",
        "ftp://x/",
        "",
        "http://",
        "http://exa mple.com/",
        "not a url",
    ],
)
def test_not_http_or_invalid_is_none(policy: UrlPolicy, raw: str) -> None:
    assert policy.canonical(raw) is None


def test_resolved_fast_path_matches_full_parse(policy: UrlPolicy) -> None:
    for raw in ["http://example.com/a%7e?x=%41#f", "https://example.com/p?", "mailto:x@y"]:
        assert policy.canonical_resolved(raw) == policy.canonical(raw)


def test_sort_query_and_drop_params() -> None:
    p = UrlPolicy(sort_query=True, drop_params=["utm_*", "sessionid"])
    assert (
        p.canonical("http://e.com/p?z=1&utm_source=a&a=2&sessionid=9&utm_medium=b")
        == "http://e.com/p?a=2&z=1"
    )
    assert p.canonical("http://e.com/p?utm_source=a") == "http://e.com/p"
    assert p.canonical("http://e.com/p?b&&a") == "http://e.com/p?a&b"
    q = UrlPolicy(drop_params=["utm_*"])
    assert q.canonical("http://e.com/p?z=1&utm_x=2&a=3") == "http://e.com/p?z=1&a=3"


_url_text = st.lists(
    st.sampled_from(
        list("aZ09-._~%/?#&=:@!$'()*+,; \\\"<>{}|^`[]é€\x00\t")
        + ["%2e", "%7E", "%41", "%zz", "..", "%2F", "%e2%82%ac", "utm_a=1&"]
    ),
    max_size=20,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https", "HTTP", "hTtPs"]),
    host=st.sampled_from(
        ["example.com", "EXAMPLE.com", "127.0.0.1", "[::1]", "bücher.de", "a.b.c"]
    ),
    port=st.sampled_from(["", ":80", ":443", ":8080"]),
    rest=_url_text,
    sort=st.booleans(),
)
# (a stray '%' before an escape of a hex digit: decoded, it made a new escape)
@example(scheme="http", host="example.com", port="", rest="%%41a", sort=False)
@example(scheme="http", host="example.com", port="", rest="a%%34%31", sort=True)
def test_canonical_is_idempotent(scheme: str, host: str, port: str, rest: str, sort: bool) -> None:
    p = UrlPolicy(sort_query=sort, drop_params=["utm_*"] if sort else ())
    once = p.canonical(f"{scheme}://{host}{port}/{rest}")
    if once is None:
        return
    assert once.startswith(("http://", "https://"))
    assert "#" not in once
    assert p.canonical(once) == once
    assert p.canonical_resolved(once) == once


def test_scope_host_is_port_aware() -> None:
    # Same host name AND the seed's port: 50 ports of one host are 50 servers, not one site.
    p = UrlPolicy(["http://Example.com:8080/start"])
    assert p.in_scope("http://example.com:8080/x")
    assert p.in_scope("https://example.com:8080/x")  # same port: the scheme does not matter
    assert not p.in_scope("http://example.com/x")
    assert not p.in_scope("https://example.com:9/x")
    assert not p.in_scope("http://www.example.com:8080/x")
    assert not p.in_scope("http://other.org:8080/x")
    # http on 80 and https on 443 count as one port: the usual upgrade stays in scope
    d = UrlPolicy(["http://example.com/"])
    assert d.in_scope("https://example.com/a") and d.in_scope(
        d.canonical("http://example.com:80/a") or ""
    )
    assert d.in_scope(d.canonical("https://example.com:443/a") or "")
    assert not d.in_scope("http://example.com:443/a")  # http on 443 is another port
    assert not d.in_scope("https://example.com:80/a")
    assert not d.in_scope("http://example.com:8080/a")
    v6 = UrlPolicy(["http://[::1]:8000/"])
    assert v6.in_scope("http://[::1]:8000/x") and not v6.in_scope("http://[::1]:8001/x")
    assert not v6.in_scope("http://[::1]/x")


def test_scope_origin_is_exact() -> None:
    p = UrlPolicy(["http://example.com/", "https://b.example.com:8443/"], scope="origin")
    assert p.in_scope("http://example.com/x") and p.in_scope(
        p.canonical("http://example.com:80/x") or ""
    )
    assert not p.in_scope("https://example.com/x")
    assert p.in_scope("https://b.example.com:8443/x")
    assert not p.in_scope("http://b.example.com:8443/x")
    assert not p.in_scope("https://b.example.com/x")


def test_each_seed_brings_its_own_port() -> None:
    # two seeds: (a, 8080) and (b, 9090); a on 9090 is neither
    p = UrlPolicy(["http://a.test:8080/", "http://b.test:9090/"])
    assert p.in_scope("http://a.test:8080/") and p.in_scope("http://b.test:9090/")
    assert not p.in_scope("http://a.test:9090/") and not p.in_scope("http://b.test:8080/")


def test_scope_domain_uses_public_suffix_list() -> None:
    p = UrlPolicy(["http://www.example.co.uk/"], scope="domain")
    assert p.in_scope("http://shop.example.co.uk/")
    assert p.in_scope("https://example.co.uk/")
    assert not p.in_scope("http://other.co.uk/")
    assert not p.in_scope("http://shop.example.co.uk:8080/")  # port-aware too
    ip = UrlPolicy(["http://127.0.0.1:5000/"], scope="domain")
    assert ip.in_scope("http://127.0.0.1:5000/a")
    assert not ip.in_scope("http://127.0.0.1:6000/")
    assert not ip.in_scope("http://127.0.0.2:5000/")


def test_scope_subdomains() -> None:
    p = UrlPolicy(["http://blog.example.com/"], scope="subdomains")
    assert p.in_scope("http://a.blog.example.com/")
    assert p.in_scope("https://blog.example.com/")
    assert not p.in_scope("http://example.com/")
    assert not p.in_scope("http://evilblog.example.com/")
    assert not p.in_scope("http://a.blog.example.com:81/")  # port-aware too


def test_include_exclude() -> None:
    p = UrlPolicy(["http://e.com/"], include=[r"/docs/"], exclude=[r"\.pdf$", "private"])
    assert p.in_scope("http://e.com/docs/a")
    assert not p.in_scope("http://e.com/blog/a")
    assert not p.in_scope("http://e.com/docs/a.pdf")
    assert not p.in_scope("http://e.com/docs/private/x")


def test_too_long() -> None:
    p = UrlPolicy(max_url_length=30)
    assert not p.too_long("http://e.com/short")
    assert p.too_long("http://e.com/" + "x" * 30)
    assert not UrlPolicy().too_long("http://e.com/" + "x" * 10000)


def test_helpers() -> None:
    assert host_of("http://u:p@Host.example:81/x") == "Host.example"
    assert host_of("http://[::1]:8080/x") == "[::1]"
    assert host_of("http://[::1]/x") == "[::1]"
    assert origin_of("http://u:p@h.example:81/x/y") == "http://h.example:81"
    assert origin_of("https://h.example") == "https://h.example"
    assert join("http://e.com/a/b", "../c?x#y") == "http://e.com/c?x#y"
    assert join("http://e.com/", "http://[bad") is None
    assert registrable_domain("a.b.example.co.uk") == "example.co.uk"
    assert registrable_domain("localhost") == "localhost"
    assert registrable_domain("10.0.0.1") == "10.0.0.1"


@pytest.mark.parametrize(
    ("link", "expected"),
    [
        ("http://user:pw@Example.com/a", "http://example.com/a"),
        ("https://user@example.com:8443/a?b#c", "https://example.com:8443/a?b"),
        ("http://example.com/a@b", "http://example.com/a@b"),  # an @ in the path stays
        ("http://example.com/?q=a@b", "http://example.com/?q=a@b"),
    ],
)
def test_canonical_drops_userinfo(link: str, expected: str) -> None:
    policy = UrlPolicy(["http://example.com/"])
    assert policy.canonical(link) == expected


def test_scope_cache_is_bounded_in_bytes_too() -> None:
    # A hostile site's links to thousands of distinct 2,000-character host names: the
    # per-origin scope cache holds a bounded number of characters, not 65,536 such keys.
    p = UrlPolicy(["http://example.com/"])
    label = "a" * 60
    for i in range(6000):
        host = ".".join([label] * 32) + f".h{i}.test"  # ~1,960 characters
        assert not p.in_scope(f"http://{host}/x")
    assert sum(len(k) for k in p._by_origin) <= (4 << 20) + 2100
    assert p.in_scope("http://example.com/x")
