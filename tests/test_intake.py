"""The link intake (crawler.urls.intake): both twins, and the compiled extractor feeding it.

What must hold:
* the compiled canonicalisation is ``UrlPolicy.canonical_resolved`` exactly, for every URL and
  every query setting (sort_query, drop_params with ``*``, ``?`` and character classes);
* both twins give the same items for the same links and the same marks;
* the compiled extractor with ``intake=`` gives, for any chunking, the items the pure-Python
  extractor's Links give through the pure-Python intake (corpus pages, generated link-dense
  pages with every relative form);
* a repeated link creates no Python object on that path.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.config import CrawlConfig
from crawler.extract import Link, LinkExtractorC, LinkExtractorPy
from crawler.urls.intake import IntakeC, IntakePy, canonicalizer, intake_for
from crawler.urls.policy import UrlPolicy
from tests.extract_common import PAGES, feed_in

needs_c = pytest.mark.skipif(
    IntakeC is None or LinkExtractorC is None, reason="the compiled twins are not built"
)
TWINS = [IntakePy] + ([IntakeC] if IntakeC is not None else [])
SEED = "http://site.example/"

# -- URLs: every case canonical_resolved works on ------------------------------------------

_HOSTS = ["site.example", "u:p@site.example", "a@b@site.example", "site.example:8080",
          "other.example", "[::1]", "127.0.0.1"]  # fmt: skip
_PATH = st.lists(
    st.sampled_from(
        [
            "a",
            "B",
            "%7e",
            "%7E",
            "%2f",
            "%2F",
            "%41",
            "%zz",
            "%4",
            "%",
            "~",
            ".",
            "x@y",
            "é",
            "%C3%A9",
            "%%41",
            ";p",
            "%25",
            "-_.",
        ]  # fmt: skip
    ),
    max_size=5,
).map(lambda parts: "/" + "/".join(parts))
_PARAM = st.sampled_from(
    [
        "a=1",
        "b=2",
        "utm_source=x",
        "utm_=y",
        "x=",
        "xy=1",
        "q",
        "",
        "a=1",
        "Z=0",
        "c=%41",
        "ref=3",
        "b",
        "a=0",
        "[x]=1",
        "k=v=w",
    ]  # fmt: skip
)
_QUERY = st.one_of(
    st.just(""),
    st.just("?"),
    st.just("??"),
    st.lists(_PARAM, max_size=6).map(lambda ps: "?" + "&".join(ps)),
)
_FRAG = st.sampled_from(["", "#", "#f", "#a?b", "#%41"])
URLS = st.builds(
    lambda scheme, host, path, query, frag: f"{scheme}://{host}{path}{query}{frag}",
    st.sampled_from(["http", "https", "ftp"]),
    st.sampled_from(_HOSTS),
    _PATH,
    _QUERY,
    _FRAG,
)
QUERY_RULES = [
    {},
    {"sort_query": True},
    {"drop_params": ["utm_*"]},
    {"drop_params": ["utm_*", "x?", "ref"], "sort_query": True},
    {"drop_params": ["[ab]"]},  # a character class: the policy (fnmatch) decides
    {"drop_params": ["*"]},
    {"drop_params": ["*=*", "?"]},
]


def _policy(rules: dict[str, Any]) -> UrlPolicy:
    return UrlPolicy([SEED], **rules)


@needs_c
@pytest.mark.parametrize("rules", QUERY_RULES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(url=URLS)
def test_compiled_canonical_is_canonical_resolved(rules: dict[str, Any], url: str) -> None:
    policy = _policy(rules)
    assert IntakeC(policy, **rules).canonical(url) == policy.canonical_resolved(url)


@needs_c
def test_compiled_canonical_cases() -> None:
    rules = {"sort_query": True, "drop_params": ["utm_*"]}
    it = IntakeC(_policy(rules), **rules)
    cases = {
        "http://site.example/p?": "http://site.example/p",
        "http://site.example/p??": "http://site.example/p??",
        "http://u:pw@site.example/%7e%2f%41?b=1&a=2&&utm_x=3#f": "http://site.example/~%2FA?a=2&b=1",
        "https://site.example/?utm_a=1&utm_b=2": "https://site.example/",
        # a stray '%' (no two hex digits): escapes only upper-cased, so that decoding cannot
        # make a new escape of it ("%%41a" -> "%Aa" -> "%AA": not idempotent)
        "http://site.example/%%41%4": "http://site.example/%%41%4",
        "http://site.example/%%41a": "http://site.example/%%41a",
        "http://site.example/a%%34%31?q=%7e": "http://site.example/a%%34%31?q=%7E",
        "http://site.example/%7e%41?q=%7e": "http://site.example/~A?q=~",
        "mailto:x@site.example": None,
    }
    for url, want in cases.items():
        assert it.canonical(url) == want, url


@pytest.mark.parametrize("rules", QUERY_RULES)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(url=URLS)
def test_the_checkers_canonicalizer_is_the_crawls_canonical_resolved(
    rules: dict[str, Any], url: str
) -> None:
    # the checker's and the audit's new targets are canonicalised by it (compiled when the
    # intake is): the crawl's canonical form under the config's query rules
    config = CrawlConfig(seeds=[SEED], **rules)
    policy = UrlPolicy.from_config(config)
    canonical = canonicalizer(config, policy)
    assert canonical(url) == policy.canonical_resolved(url)
    if IntakeC is not None:
        assert isinstance(getattr(canonical, "__self__", None), IntakeC)


# -- the twins agree -------------------------------------------------------------------------


def _same_items(a: list[Any], b: list[Any], marked: set[str]) -> None:
    """The same items, up to the recent table's evictions.

    The table is direct-mapped and each twin hashes differently (Python's hash, SipHash under
    its own key), so a marked URL one of them evicted (another URL took its slot) comes out of
    that one only: correct (the state decides again), but not the same. Everything else is.
    """
    assert [x for x in a if x not in marked] == [x for x in b if x not in marked]


def _links(urls: list[str | None], nofollow: list[bool]) -> list[Link]:
    return [
        Link(u, u or "bad", "a", "href", nf, 1, 1) for u, nf in zip(urls, nofollow, strict=True)
    ]


@needs_c
@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(
        st.lists(
            st.tuples(
                st.one_of(URLS, st.none(), st.sampled_from(["mailto:a@b", "javascript:x"])),
                st.booleans(),
                st.booleans(),
            ),
            max_size=20,
        ),
        max_size=6,
    ),
    respect_nofollow=st.booleans(),
    all_links=st.booleans(),
    rules=st.sampled_from(QUERY_RULES),
)
def test_twins_give_the_same_items(
    batches: list[list[tuple[str | None, bool, bool]]],
    respect_nofollow: bool,
    all_links: bool,
    rules: dict[str, Any],
) -> None:
    policy = _policy(rules)
    kw = {"respect_nofollow": respect_nofollow, "all_links": all_links, **rules}
    py, c = IntakePy(policy, **kw), IntakeC(policy, **kw)
    marked: set[str] = set()
    for batch in batches:
        links = _links([u for u, _, _ in batch], [nf for _, nf, _ in batch])
        a, b = py.take(links), c.take(links)
        _same_items(a, b, marked)
        assert py.found == c.found
        # what the crawl would mark: some of the new URLs (the others stay unknown)
        chosen = [x for x, (_, _, m) in zip(a, batch, strict=False) if isinstance(x, str) and m]
        py.mark_many(chosen)
        c.mark_many(chosen)
        marked.update(chosen)
        for x in chosen:  # (the table keeps ASCII URLs only: every WHATWG-serialised one)
            assert py.knows(x) == c.knows(x) == x.isascii()


@pytest.mark.parametrize("twin", TWINS)
def test_marked_urls_are_dropped_and_forget_empties(twin: Any) -> None:
    it = twin(_policy({}))
    links = _links(["http://site.example/a#x", "http://site.example/a", "http://o.example/"],
                   [False] * 3)  # fmt: skip
    assert it.take(links) == ["http://site.example/a", "http://site.example/a", "http://o.example/"]
    it.mark("http://site.example/a")
    assert it.take(links) == ["http://o.example/"]
    assert (it.found, it.repeated) == (6, 2)
    it.forget()
    assert len(it.take(links)) == 3


@pytest.mark.parametrize("twin", TWINS)
def test_nofollow_invalid_and_other_links(twin: Any) -> None:
    links = [
        Link("http://site.example/nf", "nf", "a", "href", True, 1, 1),
        Link(None, "http://[bad", "a", "href", False, 1, 2),
        Link("mailto:a@b.example", "mailto:a@b.example", "a", "href", False, 1, 3),
    ]
    it = twin(_policy({}), respect_nofollow=True)
    assert it.take(links) == [links[1]]  # nofollow dropped, invalid kept, other dropped
    it = twin(_policy({}), all_links=True)
    assert it.take(links) == ["http://site.example/nf", links[1], links[2]]
    assert it.found == 3


def test_intake_for_reads_the_config() -> None:
    cfg = CrawlConfig(seeds=(SEED,), respect_nofollow=True, all_links=True, sort_query=True)
    it = intake_for(cfg, UrlPolicy.from_config(cfg), IntakePy)
    assert it.respect_nofollow and it.all_links
    with pytest.raises(ValueError, match="power of two"):
        IntakePy(UrlPolicy([SEED]), slots=1000)
    with pytest.raises(ValueError, match="power of two"):
        IntakePy(UrlPolicy([SEED]), slots=2)


# -- the compiled extractor feeding the compiled intake ---------------------------------------

_FORMS = [
    "/r/{i}.html", "../up/{i}.html", "./same/{i}.html", "same{i}.html", "//site.example/pr/{i}",
    "//h{j}.example/x", "?page={i}", "#frag{i}", "", "/esc/%7e{i}/%7E/%41%2f", "a/./b/../c{i}",
    "/x/../../y{i}", "http://h{j}.example/abs/{i}", "HTTP://Site.Example:80/{i}", "https://s.example:443/",
    "/q?b={i}&a=1&&utm_x=2", "/p?", "mailto:m{i}@site.example", "javascript:void(0)", "http://[bad",
    "  /ws/{i}  ", "/amp?a=1&amp;b={i}", "/é/{i}", "//xn--nxasmq6b.example/", "http://1.2.3.4/",
    "/%2e%2e/dot", "tel:+1", "/r/{i}.html",
    # other schemes the direct path drops without resolving, and those it must not
    "foo:&#47;/[bad", "x-y:\n//[bad", "x-y:\t\tq", "WS:x", "File:x", "ftp:y", "mailto:&#47;",
    "a+b.c-d:opaque?q#f", "c:x", "1a:x", "javascript:{i}",
]  # fmt: skip


def _dense_page(rng: random.Random, n_links: int) -> bytes:
    parts = ["<!doctype html><html><head><title>t</title></head><body>"]
    for k in range(n_links):
        form = rng.choice(_FORMS).format(i=rng.randrange(40), j=rng.randrange(300))
        rel = ' rel="nofollow"' if rng.random() < 0.05 else ""
        tag = rng.choice(["a", "a", "a", "area"])
        parts.append(f'<{tag} href="{form}"{rel}>l{k}</{tag}> text <b>x</b>\n')
    parts.append("</body></html>")
    return "".join(parts).encode()


def _direct(data: bytes, url: str, sizes: list[int], intake: Any) -> list[Any]:
    return feed_in(LinkExtractorC, data, sizes, url, intake=intake)[0]


def _reference(data: bytes, url: str, intake: IntakePy) -> list[Any]:
    ex = LinkExtractorPy(url, None)
    items: list[Any] = intake.take(ex.feed(data) + ex.close())
    return items


def _mark_some(items: list[Any], rng: random.Random, marked: set[str], *intakes: Any) -> None:
    chosen = [x for x in items if isinstance(x, str) and rng.random() < 0.7]
    marked.update(chosen)
    for it in intakes:
        it.mark_many(chosen)


def _compare_pages(pages: list[tuple[str, bytes]], seed: int, kw: dict[str, Any]) -> None:
    rng = random.Random(seed)
    policy = _policy({k: v for k, v in kw.items() if k in ("sort_query", "drop_params")})
    py, c = IntakePy(policy, **kw), IntakeC(policy, **kw)
    marked: set[str] = set()
    for url, data in pages:
        want = _reference(data, url, py)
        sizes = [rng.randrange(1, 400) for _ in range(rng.randrange(0, 30))]
        got = _direct(data, url, sizes, c)
        _same_items(got, want, marked)
        assert not [x for x in got if isinstance(x, str) and c.knows(x)]
        assert c.found == py.found
        _mark_some(want, rng, marked, py, c)


@needs_c
@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"respect_nofollow": True},
        {"all_links": True, "sort_query": True},
        {"drop_params": ["utm_*", "[ab]"]},
    ],  # fmt: skip
)
def test_direct_path_equals_the_python_path_on_dense_pages(kw: dict[str, Any]) -> None:
    rng = random.Random(7)
    pages = [
        (f"http://site.example/d{k % 4}/sub/p{k}.html", _dense_page(rng, rng.randrange(1, 200)))
        for k in range(25)
    ]
    _compare_pages(pages, 11, kw)


@needs_c
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), n=st.integers(0, 60))
def test_direct_path_any_chunking(seed: int, n: int) -> None:
    rng = random.Random(seed)
    pages = [("http://site.example/a/b/c.html", _dense_page(rng, n)) for _ in range(2)]
    _compare_pages(pages, seed, {})


@needs_c
@pytest.mark.skipif(not PAGES, reason="needs ../shared/corpus/pages")
def test_direct_path_equals_the_python_path_on_the_corpus() -> None:
    pages = [(f"http://site.example/c/{p.stem}.html", p.read_bytes()) for p in PAGES]
    _compare_pages(pages, 3, {})


@needs_c
def test_a_repeated_link_creates_no_python_object() -> None:
    data = b"".join(
        b'<a href="/nav/%d.html">n</a> <a href="../up/%d">u</a>\n' % (k % 20, k % 20)
        for k in range(5000)
    )
    url = "http://site.example/d/p.html"
    it = IntakeC(_policy({}))
    first = _direct(data, url, [], it)
    it.mark_many(x for x in first if isinstance(x, str))
    ex = LinkExtractorC(url, None, intake=it)
    ex.feed(data[:100])  # warm up (the encoding is decided, buffers sized)
    before = sys.getallocatedblocks()
    items = ex.feed(data[100:])
    after = sys.getallocatedblocks()
    assert items == []
    assert it.repeated >= 9990
    # 10,000 links went through: a handful of blocks (the chunk's buffers), not one per link
    assert after - before < 100, after - before


# -- a bound state: its seen set probed by the intake ----------------------------------------


def _seen_twins() -> list[tuple[Any, Any]]:
    from crawler.urls import fingerprint, seen  # noqa: PLC0415

    out = [(seen.MemorySeenSetPy, fingerprint.FingerprinterPy)]
    if seen.MemorySeenSetC is not None:
        out.append((seen.MemorySeenSetC, fingerprint.FingerprinterC))
    return out


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("parts", _seen_twins())
@pytest.mark.parametrize("keyed", [False, True])
def test_a_bound_state_drops_what_it_knows(twin: Any, parts: tuple[Any, Any], keyed: bool) -> None:
    seen_cls, fper_cls = parts
    fper = fper_cls(b"k" * 16) if keyed else None

    def fp(url: str) -> int:  # the state's fingerprint: keyed BLAKE2b, or MemoryState's hash
        return fper(url) if fper is not None else (hash(url) & (2**64 - 1)) or 1

    urls = [f"http://site.example/p/{i}" for i in range(50)]
    seen = seen_cls()
    for url in urls[::2]:
        seen.add_fp(fp(url))
    it = twin(_policy({}))
    it.bind(seen, fper)
    links = _links([u + "#f" for u in urls], [False] * len(urls))
    items = it.take(links)
    # the compiled twin probes only the compiled seen set and fingerprint (else unbound:
    # admission probes alone, the result is the same)
    probed = twin is IntakePy or (
        IntakeC is not None and seen_cls.__module__ == "crawler.urls._hash_c"
    )
    if probed:
        assert items == urls[1::2]
        assert it.known == 25
        assert all(it.knows(u) for u in urls[::2])  # put in the table: the next is a repeat
    else:
        assert items == urls and it.known == 0
    it.bind(None)
    it.forget()
    assert it.take(links) == urls  # unbound, forgotten: everything comes out again


# -- a host scope: new out-of-scope URLs kept as fingerprints --------------------------------


def _scoped_pair(fper_kind: str) -> tuple[Any, Any, Any, Any]:
    """(compiled intake, Python intake, their seen sets), each bound to its twin's state
    parts and with the host scope of the dense pages' site set."""
    from crawler.urls import fingerprint, seen  # noqa: PLC0415

    policy = _policy({})
    out = []
    for twin, seen_cls, fper_cls in (
        (IntakeC, seen.MemorySeenSetC, fingerprint.FingerprinterC),
        (IntakePy, seen.MemorySeenSetPy, fingerprint.FingerprinterPy),
    ):
        it, s = twin(policy), seen_cls()
        it.bind(s, fper_cls(b"k" * 16) if fper_kind == "keyed" else None)
        it.set_host_scope(policy.host_scope)
        out += [it, s]
    return out[0], out[1], out[2], out[3]


@needs_c
@pytest.mark.parametrize("fper_kind", ["hash", "keyed"])
def test_twins_keep_the_same_external_fingerprints(fper_kind: str) -> None:
    """On dense pages, any chunking: the same items and the same fingerprints (as multisets:
    the compiled extractor hands a chunk's rare links, IDNA hosts for one, to the intake after
    its others, so their fingerprints come later); each page's marked seen after it (what
    ``offer_seen`` does), so that a repeat on a later page is known, never kept twice."""
    rng = random.Random(5)
    c, c_seen, py, py_seen = _scoped_pair(fper_kind)
    marked: set[str] = set()
    kept = 0
    for k in range(30):
        url = f"http://site.example/d{k % 4}/p{k}.html"
        data = _dense_page(rng, rng.randrange(1, 200))
        want = _reference(data, url, py)
        got = _direct(data, url, [rng.randrange(1, 300) for _ in range(rng.randrange(0, 20))], c)
        _same_items(got, want, marked)
        fc, fpy = c.take_external(), py.take_external()
        assert fc.typecode == fpy.typecode == "Q"
        assert sorted(fc) == sorted(fpy)
        assert c.external_pending == py.external_pending == 0
        assert c_seen.update_fps(fc) == py_seen.update_fps(fpy) == len(set(fc))
        kept += len(fc)
        _mark_some(want, rng, marked, py, c)
    assert kept > 100 and c.external == py.external == kept
    assert not c.take_external() and not py.take_external()


@pytest.mark.parametrize("twin", TWINS)
def test_a_host_scope_splits_the_items_and_changes_nothing_else(twin: Any) -> None:
    """With a host scope, the items are those without it minus the URLs the host rule
    refuses, whose fingerprints are kept instead, in document order; include/exclude
    patterns do not count (a URL they refuse has a host the rule admits: an item)."""
    from crawler.urls.seen import MemorySeenSet  # noqa: PLC0415

    policy = UrlPolicy([SEED], exclude=[r"/ex/"])
    page = _dense_page(random.Random(9), 400) + (
        b'<a href="/ex/1">x</a><a href="http://other.example/ex/2">y</a><a href="http://[">z</a>'
    )
    ex = LinkExtractorPy(SEED + "d/p.html", None)
    links = ex.feed(page) + ex.close()
    plain, scoped = twin(policy), twin(policy)
    plain.bind(MemorySeenSet(), None)
    scoped.bind(MemorySeenSet(), None)
    scoped.set_host_scope(policy.host_scope)
    ref, items = plain.take(links), scoped.take(links)
    refused = [x for x in ref if isinstance(x, str) and policy.host_scope(x) is None]
    assert refused and "http://other.example/ex/2" in refused
    assert items == [x for x in ref if x not in refused]
    assert "http://site.example/ex/1" in items  # the exclude pattern is admission's to apply
    assert scoped.take_external().tolist() == [(hash(u) & (2**64 - 1)) or 1 for u in refused]
    assert scoped.found == plain.found and scoped.external == len(refused)


@pytest.mark.parametrize("twin", TWINS)
def test_a_host_scope_needs_a_bound_state_and_is_off_with_all_links(twin: Any) -> None:
    policy = _policy({})
    links = _links(["http://other.example/x", "http://site.example/y"], [False, False])
    it = twin(policy)
    it.set_host_scope(policy.host_scope)  # not bound: nothing to probe, so nothing kept
    assert it.take(links) == ["http://other.example/x", "http://site.example/y"]
    assert it.external_pending == 0
    every = twin(policy, all_links=True)
    from crawler.urls.seen import MemorySeenSet  # noqa: PLC0415

    every.bind(MemorySeenSet(), None)
    every.set_host_scope(policy.host_scope)  # admission lists every link: it needs the str
    assert every.take(links) == ["http://other.example/x", "http://site.example/y"]
    assert every.external_pending == 0


@pytest.mark.parametrize("twin", TWINS)
def test_a_widened_scope_is_seen_at_once(twin: Any) -> None:
    """The compiled twin reads the policy's own cache (``host_cache``), which a change of
    scope empties: a host added to the scope is in scope for the very next link."""
    from crawler.urls.seen import MemorySeenSet  # noqa: PLC0415

    policy = _policy({})
    it = twin(policy)
    it.bind(MemorySeenSet(), None)
    it.set_host_scope(policy.host_scope, policy.host_cache)
    one = _links(["http://other.example/a"], [False])
    assert it.take(one) == [] and len(it.take_external()) == 1
    assert policy.host_cache  # filled by the first decision
    policy.add_seed_host("http://other.example/")
    assert it.take(_links(["http://other.example/b"], [False])) == ["http://other.example/b"]
    assert it.take_external().tolist() == []
    with pytest.raises(TypeError):
        it.set_host_scope(policy.host_scope, [])  # type: ignore[arg-type]
