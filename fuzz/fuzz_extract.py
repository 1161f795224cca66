"""Fuzz target for the two link extractors (pure Python and compiled), with atheris.

    fuzz/run.sh 60                       # build the ASan module if needed, fuzz for 60 s
    python fuzz/fuzz_extract.py FILE...  # replay inputs (under run.sh's environment for ASan)
    python fuzz/fuzz_extract.py --check FILE...  # replay with the installed twins, no atheris

One input is a 4-byte header and the document. The header chooses what a crawler can vary:
the link set, the transport charset, the document URL, ``max_token`` and how the document is
cut into ``feed()`` calls (whole, one byte at a time, or random split points, empty feeds
included). `check` is the oracle, also run by tests/test_fuzz_target.py so that this file
cannot rot:

1. nothing raises (``_strict`` is set on every instance, so an internal error surfaces instead
   of being swallowed as it is in production);
2. every result is a list of `Link` with the documented field types (line and column >= 1);
3. the pure-Python and the compiled extractor give identical links, positions included (and
   the same final ``encoding``, ``base_url``, ``nofollow``, ``ids`` and ``ids_complete``);
4. the result does not depend on the chunking: whole equals chunked, for both; and nothing
   comes out of feed() or close() after close();
5. ``collect_ids`` changes no link: the chunked run collects ids, the whole run does on
   every other seed (then its ids must equal the chunked run's);
6. the link intake (``crawler.urls.intake``): the compiled extractor feeding the compiled intake
   from its buffers (``intake=``, chunked) gives the items the pure-Python intake gives for
   the pure-Python extractor's links, with the same ``found``; then, with every URL of those
   items marked in both, again (up to the recent table's evictions). One input in two binds
   both to a memory seen set with the host scope on: the same fingerprints of out-of-scope
   URLs too (as multisets), marked seen before the second pass. One in two keeps the page's
   compact record (``record=True``): the same items, and the record is the links (with its
   URL list, invalid values and JSON text as computed from them).

Run by run.sh, the compiled twins are the ones built with AddressSanitizer and libFuzzer's
coverage (fuzz/build_asan.sh; the extractor named by ``CRAWLER_FUZZ_ASAN_SO``, the intake
beside it); without them the target uses the installed ones (no sanitizer, the differential
checks still hold).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

HEADER = 4
ENCODINGS: tuple[str | None, ...] = (
    None,
    "utf-8",
    "windows-1252",
    "shift_jis",
    "utf-16le",
    "x-no-such-charset",
    "iso-2022-jp",
    "utf-16be",
)
BASES = (
    "https://example.org/dir/page.html",
    "http://127.0.0.1:8080/",
    "https://xn--mnchen-3ya.example/a/b/c?q=1#frag",
    "http://[::1]:8080",
    "file:///tmp/page.html",
    "https://user:pw@example.org:8443/d/",
    "http://example.org/%7Euser/a%20b.html?x=%C3%A9",
    "https://sub.example.co.uk/deep/er/than/this/",
)
LINK_SETS = ("links", "resources")
# None is the default (64 KiB); the small ones reach the "value too long" path cheaply.
MAX_TOKENS: tuple[int | None, ...] = (None, None, 1, 8, 33, 300, None, None)
# Inputs longer than this are not fed one byte at a time (they get random splits instead):
# the pure-Python twin costs a few microseconds a feed.
ONE_BYTE_LIMIT = 4096


@dataclass(frozen=True)
class Case:
    """One decoded fuzz input: the extractor's arguments, the document and its chunking."""

    link_set: str
    encoding: str | None
    base: str
    max_token: int | None
    body: bytes
    sizes: tuple[int, ...]  # feed() sizes; the rest of the body is fed last

    def describe(self) -> str:
        """A one-line summary for a finding's message."""
        return (
            f"link_set={self.link_set!r} encoding={self.encoding!r} base={self.base!r} "
            f"max_token={self.max_token!r} len={len(self.body)} feeds={len(self.sizes) + 1}"
        )


def decode(data: bytes) -> Case:
    """Split a fuzz input into a `Case` (any bytes are a valid input).

    Header byte 0: bit 0 link set, bits 1-3 encoding, bits 4-6 base URL; byte 1: bits 0-2
    max_token, bits 3-4 chunking mode m (0: one byte at a time, else random pieces of 0 to
    2**(e + m) bytes), bits 5-7 e; bytes 2-3 seed the split points.
    """
    head = data[:HEADER].ljust(HEADER, b"\0")
    body = data[HEADER:]
    b0, b1 = head[0], head[1]
    seed = int.from_bytes(head[2:4], "little")
    mode = (b1 >> 3) & 3
    if mode == 0 and len(body) <= ONE_BYTE_LIMIT:
        sizes: tuple[int, ...] = (1,) * len(body)
    else:
        sizes = tuple(_splits(len(body), 1 << (((b1 >> 5) & 7) + mode), seed))
    return Case(
        link_set=LINK_SETS[b0 & 1],
        encoding=ENCODINGS[(b0 >> 1) & 7],
        base=BASES[(b0 >> 4) & 7],
        max_token=MAX_TOKENS[b1 & 7],
        body=body,
        sizes=sizes,
    )


def header(
    link_set: int = 0,
    encoding: int = 0,
    base: int = 0,
    max_token: int = 0,
    mode: int = 0,
    exp: int = 0,
    seed: int = 0,
) -> bytes:
    """The 4 header bytes that `decode` reads back as these indexes (for seeds and tests)."""
    b0 = (link_set & 1) | (encoding & 7) << 1 | (base & 7) << 4
    b1 = (max_token & 7) | (mode & 3) << 3 | (exp & 7) << 5
    return bytes((b0, b1)) + (seed & 0xFFFF).to_bytes(2, "little")


def _splits(n: int, biggest: int, seed: int) -> Iterator[int]:
    rng = random.Random(seed)
    done = 0
    while done < n:
        # About one feed in eight is empty: feed(b"") must change nothing.
        k = 0 if rng.random() < 0.125 else rng.randint(1, biggest)
        done += k
        yield k


class Finding(AssertionError):
    """The oracle failed: the message says which property, which twin and the case."""


def _new(cls: Any, case: Case, ids: bool = False) -> Any:
    kw: dict[str, Any] = {"link_set": case.link_set}
    if case.max_token is not None:
        kw["max_token"] = case.max_token
    if ids:
        kw["collect_ids"] = True
    ex = cls(case.base, case.encoding, **kw)
    ex._strict = True  # an internal error raises instead of ending extraction quietly
    return ex


Result = tuple[list[Any], str, str, bool]


def run(cls: Any, case: Case, sizes: Sequence[int], ids: bool = False) -> tuple[Result, Any]:
    """Feed the case's body in ``sizes`` pieces (then the rest), close: links and end state,
    and (``ids``) the sorted ids and ids_complete (else None)."""
    ex = _new(cls, case, ids)
    body = case.body
    out: list[Any] = []
    i = 0
    for k in sizes:
        got = ex.feed(body[i : i + k])
        if type(got) is not list:
            raise Finding(f"feed() returned {type(got).__name__}, not list")
        out += got
        i += k
    out += ex.feed(body[i:])
    out += ex.close()
    if ex.feed(b"<a href=/after-close>") or ex.close():
        raise Finding("links after close()")
    found = (sorted(ex.ids), ex.ids_complete) if ids else None
    if not ids and (ex.ids or ex.ids_complete):
        raise Finding("ids without collect_ids")
    return (out, ex.encoding, ex.base_url, ex.nofollow), found


def _check_types(links: list[Any], link_type: Any) -> None:
    for link in links:
        if type(link) is not link_type:
            raise Finding(f"not a Link: {link!r}")
        fields: tuple[Any, ...] = tuple(link)
        if len(fields) != 7:
            raise Finding(f"not 7 fields: {link!r}")
        url, raw, tag, attr, nofollow, line, column = fields
        if not (url is None or type(url) is str) or type(raw) is not str:
            raise Finding(f"bad url/raw types: {link!r}")
        if type(tag) is not str or type(attr) is not str or type(nofollow) is not bool:
            raise Finding(f"bad tag/attr/nofollow types: {link!r}")
        if type(line) is not int or type(column) is not int or line < 1 or column < 1:
            raise Finding(f"bad line/column: {link!r}")


def _diff(a: Result, b: Result) -> str:
    la, lb = a[0], b[0]
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            return f"link {i}: {x!r} != {y!r}"
    if len(la) != len(lb):
        extra = la[len(lb)] if len(la) > len(lb) else lb[len(la)]
        return f"{len(la)} links != {len(lb)} links (first extra: {extra!r})"
    return f"(encoding, base_url, nofollow): {a[1:]!r} != {b[1:]!r}"


def check(
    data: bytes, py: Any, c: Any | None, link_type: type, intake_c: Any | None = None
) -> Case:
    """The oracle: raise `Finding` (or the extractor's own exception) if ``data`` breaks it.

    Args:
        data: one fuzz input (header and document).
        py: the pure-Python extractor class.
        c: the compiled extractor class, or None to check the Python one alone.
        link_type: the `Link` class both must return.
        intake_c: the compiled intake class (property 6), or None.

    Returns:
        The decoded case (for the caller's statistics).
    """
    case = decode(data)
    results = {}
    found = {}
    whole_ids = bool(data[2:3]) and data[2] & 1 == 1
    for name, cls in (("py", py), ("c", c)):
        if cls is None:
            continue
        try:
            whole, ids_whole = run(cls, case, (), whole_ids)
            chunked, ids = run(cls, case, case.sizes, True)
        except Finding as exc:
            raise Finding(f"{name}: {exc} [{case.describe()}]") from None
        except Exception as exc:
            # atheris prints the traceback without the note: say it on stderr too.
            note = f"fuzz_extract: raised by the {name} extractor [{case.describe()}]"
            print(note, file=sys.stderr)
            exc.add_note(note)
            raise
        try:
            _check_types(whole[0], link_type)
        except Finding as exc:
            raise Finding(f"{name}: {exc} [{case.describe()}]") from None
        if chunked != whole:
            raise Finding(f"{name}: chunked != whole: {_diff(chunked, whole)} [{case.describe()}]")
        if ids_whole is not None and ids_whole != ids:
            raise Finding(f"{name}: chunked ids != whole ids [{case.describe()}]")
        results[name] = whole
        found[name] = ids
    if "c" in results and results["c"] != results["py"]:
        raise Finding(f"c != py: {_diff(results['c'], results['py'])} [{case.describe()}]")
    if "c" in found and found["c"] != found["py"]:
        raise Finding(f"c != py: ids {found['c']!r} != {found['py']!r} [{case.describe()}]")
    if "c" in results and intake_c is not None:
        _check_intake(case, c, results["py"][0], intake_c, data)
    return case


def _check_intake(case: Case, c: Any, links: list[Any], intake_c: Any, data: bytes) -> None:
    """Property 6: the direct path's items are the pure-Python path's."""
    from crawler.urls.intake import IntakePy  # noqa: PLC0415 (after the twins are loaded)
    from crawler.urls.policy import UrlPolicy  # noqa: PLC0415

    policy = UrlPolicy([case.base])
    flags = data[3] if len(data) > 3 else 0
    kw: dict[str, Any] = {"respect_nofollow": bool(flags & 2), "all_links": bool(flags & 4)}
    ic, ip = intake_c(policy, **kw), IntakePy(policy, **kw)
    seen: list[Any] = []
    if flags & 8:  # a bound memory state and the host scope: out-of-scope URLs as fingerprints
        from crawler.urls.seen import MemorySeenSetPy  # noqa: PLC0415

        # (the compiled intake's own seen set type: under ASan, crawler.urls.seen may not load it)
        seen = [importlib.import_module("crawler.urls._hash_c").MemorySeenSet(), MemorySeenSetPy()]
        for it, s in zip((ic, ip), seen, strict=True):
            it.bind(s, None)
            it.set_host_scope(policy.host_scope, policy.host_cache)
    marked: set[str] = set()
    record = bool(flags & 16)
    for attempt in (1, 2):
        ex = c(case.base, case.encoding, link_set=case.link_set, intake=ic, record=record,
               **({} if case.max_token is None else {"max_token": case.max_token}))  # fmt: skip
        ex._strict = True
        got: list[Any] = []
        i = 0
        for k in case.sizes if attempt == 1 else ():
            got += ex.feed(case.body[i : i + k])
            i += k
        got += ex.feed(case.body[i:])
        got += ex.close()
        want = ip.take(links)
        if [x for x in got if x not in marked] != [x for x in want if x not in marked]:
            raise Finding(f"intake, pass {attempt}: c direct != py: {got!r} != {want!r}"
                          f" [{case.describe()}]")  # fmt: skip
        if ic.found != ip.found:
            raise Finding(f"intake: found {ic.found} != {ip.found} [{case.describe()}]")
        if record:
            _check_record(ex.record, links, case)
        ext_c, ext_py = ic.take_external(), ip.take_external()
        if sorted(ext_c) != sorted(ext_py):
            raise Finding(f"intake: external {list(ext_c)} != {list(ext_py)} [{case.describe()}]")
        for s in seen:
            s.update_fps(ext_py)
        new = [x for x in want if type(x) is str]
        ic.mark_many(new)
        ip.mark_many(new)
        marked.update(new)


def _check_record(rec: Any, links: list[Any], case: Case) -> None:
    """The compact record is the page's Links, and what outputs read from it is theirs."""
    if len(rec) != len(links) or list(rec) != links:
        raise Finding(f"record != links: {_diff(list(rec), links)} [{case.describe()}]")
    urls = [k.url for k in links if k.url is not None]
    if rec.urls() != urls or rec.invalid() != [k.raw for k in links if k.url is None]:
        raise Finding(f"record: urls/invalid differ [{case.describe()}]")
    if rec.json_urls() != json.dumps(urls, separators=(",", ":")):
        raise Finding(f"record: json_urls != json.dumps [{case.describe()}]")


def _load_asan_twin(path: str) -> tuple[Any, Any]:
    """Load the ASan-instrumented compiled intake and extractor from fuzz/build (the intake's
    base class first: both import it), not the installed ones."""
    suffix = path[path.rindex("_extract_c") + len("_extract_c") :]
    here = os.path.dirname(path)
    loaded = []
    for name, file in (
        ("crawler.extract._intake_base_c", os.path.join(here, "_intake_base_c" + suffix)),
        ("crawler.urls._intake_c", os.path.join(here, "_intake_c" + suffix)),
        ("crawler.extract._extract_c", path),
    ):
        spec = importlib.util.spec_from_file_location(name, file)
        if spec is None or spec.loader is None:
            raise SystemExit(f"fuzz_extract: cannot load {file}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        loaded.append(module)
    return loaded[2].LinkExtractor, loaded[1].Intake


def _installed_intake() -> Any:
    """The installed compiled intake class, or None."""
    try:
        return importlib.import_module("crawler.urls._intake_c").Intake
    except ImportError:
        return None


def replay(paths: list[str]) -> int:
    """``--check FILE...``: run the oracle on saved inputs with the installed twins (no atheris).

    Returns:
        The number of inputs that failed (each is reported on stderr).
    """
    extract = importlib.import_module("crawler.extract")
    failed = 0
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        try:
            case = check(
                data,
                extract.LinkExtractorPy,
                extract.LinkExtractorC,
                extract.Link,
                _installed_intake() if extract.LinkExtractorC is not None else None,
            )
        except Exception as exc:
            failed += 1
            print(f"{path}: FAIL: {type(exc).__name__}: {exc}", file=sys.stderr)
        else:
            print(f"{path}: ok [{case.describe()}]", file=sys.stderr)
    return failed


def main(argv: list[str]) -> None:
    """Set up atheris: instrument the crawler's Python code, load the twins, fuzz."""
    if argv[1:2] == ["--check"]:
        raise SystemExit(1 if replay(argv[2:]) else 0)
    atheris = importlib.import_module("atheris")
    asan_so = os.environ.get("CRAWLER_FUZZ_ASAN_SO")
    if asan_so:
        # The installed (uninstrumented) .so must not be the one crawler.extract picks.
        os.environ["CRAWLER_NO_EXTENSIONS"] = "1"
    if os.environ.get("FUZZ_PY_COVERAGE", "1") == "1":
        # Coverage of the Python twin's bytecode too (costly: every compare is traced).
        with atheris.instrument_imports(include=["crawler"]):
            extract = importlib.import_module("crawler.extract")
    else:
        extract = importlib.import_module("crawler.extract")
    py = extract.LinkExtractorPy
    if asan_so:
        c, intake_c = _load_asan_twin(asan_so)
    else:
        c = extract.LinkExtractorC
        intake_c = _installed_intake() if c is not None else None
    if c is None:
        print("fuzz_extract: no compiled extractor; fuzzing the Python one alone", file=sys.stderr)
    link_type = extract.Link

    def one_input(data: bytes) -> None:
        check(data, py, c, link_type, intake_c)

    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
