"""The fuzz target's oracle (fuzz/fuzz_extract.py) on its seeds, on random inputs, and on itself.

The default run keeps the target from rotting: the committed seeds, the saved reproducers of
fuzz findings and a few hundred random inputs go through the same `check` that atheris runs,
and fake extractors prove the oracle catches each kind of failure. The fuzzer itself (atheris,
AddressSanitizer) runs only with ``-m fuzz``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.extract import Link, LinkExtractorC, LinkExtractorPy
from fuzz.fuzz_extract import (
    BASES,
    ENCODINGS,
    HEADER,
    LINK_SETS,
    ONE_BYTE_LIMIT,
    Finding,
    check,
    decode,
    header,
    run,
)

ROOT = Path(__file__).resolve().parents[1]
SEEDS = sorted((ROOT / "fuzz" / "corpus").iterdir())
REGRESSIONS = sorted((ROOT / "fuzz" / "regressions").iterdir())
# Reproducers of findings not fixed yet (name: where it is tracked). Remove a name once fixed.
OPEN: dict[str, str] = {}


def _check(data: bytes) -> None:
    check(data, LinkExtractorPy, LinkExtractorC, Link)


def test_seed_corpus_is_there() -> None:
    names = {p.name for p in SEEDS}
    assert len(names) >= 60
    assert any(n.startswith("page-") for n in names)
    assert {"hostile-svg-deep-unmatched", "hostile-frameset", "hostile-svg-cdata"} <= names


@pytest.mark.parametrize("path", SEEDS, ids=[p.name for p in SEEDS])
def test_seed_passes_the_oracle(path: Path) -> None:
    _check(path.read_bytes())


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_finding_reproducer_passes_the_oracle(path: Path, request: Any) -> None:
    if path.name in OPEN:
        request.applymarker(pytest.mark.xfail(reason=OPEN[path.name], strict=False))
    _check(path.read_bytes())


# Random inputs: a header, then markup pieces mixed with arbitrary bytes.
PIECES = [
    *b"<a href= <area href= <img srcset= <base href= <iframe src= <frameset> <frame src= "
    b"<svg> </svg> <math> </math> <mi> <foreignObject> <g> </x> <![CDATA[ ]]> <!-- --> "
    b"<script> </script> <title> </title> <plaintext> <noscript> <p> <meta charset=utf-8> "
    b"<meta charset=shift_jis> <meta http-equiv=refresh content='0;url=/r'> rel=nofollow "
    b"&amp; &#13; &#x &notin; ' \" > /> / = ? # .. // http:// https://h:1/ ".split(b" "),
    b" ",
    b"\r\n",
    b"\x00",
    b"\xc3\xbc",
    b"\x83e",
    b"\x1b$B",
]
BODIES = st.lists(st.one_of(st.sampled_from(PIECES), st.binary(max_size=8)), max_size=60).map(
    b"".join
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(head=st.binary(min_size=HEADER, max_size=HEADER), body=BODIES)
def test_random_inputs_pass_the_oracle(head: bytes, body: bytes) -> None:
    _check(head + body)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=600))
def test_arbitrary_bytes_pass_the_oracle(data: bytes) -> None:
    _check(data)


# The decoder of the header --------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    ls=st.integers(0, 1),
    enc=st.integers(0, 7),
    base=st.integers(0, 7),
    mt=st.integers(0, 7),
    mode=st.integers(0, 3),
    exp=st.integers(0, 7),
    seed=st.integers(0, 0xFFFF),
    n=st.integers(0, 5000),
)
def test_header_round_trip_and_chunking_covers_the_body(
    ls: int, enc: int, base: int, mt: int, mode: int, exp: int, seed: int, n: int
) -> None:
    case = decode(header(ls, enc, base, mt, mode, exp, seed) + b"x" * n)
    assert (case.link_set, case.encoding, case.base) == (LINK_SETS[ls], ENCODINGS[enc], BASES[base])
    assert len(case.body) == n
    assert all(k >= 0 for k in case.sizes)
    assert sum(case.sizes) >= n or not case.sizes
    if mode == 0 and n <= ONE_BYTE_LIMIT:
        assert case.sizes == (1,) * n
    else:
        assert max(case.sizes, default=0) <= 1 << (exp + mode)


def test_short_input_is_a_valid_case() -> None:
    for data in (b"", b"\x01", b"\x01\x02\x03"):
        case = decode(data)
        assert case.body == b"" and case.link_set in LINK_SETS
        _check(data)


# The oracle catches what it promises to catch -------------------------------------------

# Links come out of feed() at once: utf-8 declared (no 1024-byte prescan hold), text first (a
# <frameset> can no longer take effect, so body links are not held back).
DOC = header(encoding=ENCODINGS.index("utf-8"), mode=1, exp=1) + b"x<a href=/a><p><a href=/b>"


class _DropsLinksWhenChunked(LinkExtractorPy):
    """Loses the links of tiny feeds: not chunk-invariant."""

    def feed(self, data: bytes) -> list[Link]:
        out: list[Link] = super().feed(data)
        return out if len(data) > 8 else []


class _OneMoreLink(LinkExtractorPy):
    """Chunk-invariant, but not the twin of the reference."""

    def close(self) -> list[Link]:
        first = not self._closed
        out: list[Link] = super().close()
        extra = Link("https://example.org/extra", "/extra", "a", "href", False, 1, 1)
        return [*out, extra] if first else out


class _OneMoreId(LinkExtractorPy):
    """The same links, one more fragment target."""

    def close(self) -> list[Link]:
        out: list[Link] = super().close()
        if self._ids is not None:
            self.ids.add("extra")
        return out


class _LinksDependOnIds(LinkExtractorPy):
    """Collecting ids loses the links."""

    def feed(self, data: bytes) -> list[Link]:
        out: list[Link] = super().feed(data)
        return [] if self._ids is not None else out


class _NoPositions(LinkExtractorPy):
    def feed(self, data: bytes) -> list[Link]:
        return [x._replace(line=0) for x in super().feed(data)]


class _Raises(LinkExtractorPy):
    def feed(self, data: bytes) -> list[Link]:
        if b"/b" in data:
            raise RuntimeError("internal error")
        out: list[Link] = super().feed(data)
        return out


class _PlainTuples(LinkExtractorPy):
    def feed(self, data: bytes) -> list[Any]:
        return [tuple(x) for x in super().feed(data)]


class _LinksAfterClose(LinkExtractorPy):
    def feed(self, data: bytes) -> list[Link]:
        out: list[Link] = super().feed(data)
        if self._closed:
            return [Link("https://example.org/late", "/late", "a", "href")]
        return out


class _OtherEncoding(LinkExtractorPy):
    def close(self) -> list[Link]:
        out: list[Link] = super().close()
        self.encoding = "utf-16be"
        return out


def test_oracle_passes_the_reference_against_itself() -> None:
    assert check(DOC, LinkExtractorPy, LinkExtractorPy, Link).body == DOC[HEADER:]
    links = run(LinkExtractorPy, decode(DOC), ())[0][0]
    assert [x.url for x in links] == ["https://example.org/a", "https://example.org/b"]


def test_oracle_catches_chunk_dependence() -> None:
    with pytest.raises(Finding, match=r"^py: chunked != whole: 0 links != 2 links"):
        check(DOC, _DropsLinksWhenChunked, None, Link)


def test_oracle_catches_twins_that_differ() -> None:
    with pytest.raises(Finding, match=r"^c != py: 3 links != 2 links .*extra"):
        check(DOC, LinkExtractorPy, _OneMoreLink, Link)


def test_oracle_catches_ids_that_differ() -> None:
    with pytest.raises(Finding, match=r"^c != py: ids .*extra"):
        check(DOC, LinkExtractorPy, _OneMoreId, Link)


def test_oracle_catches_links_that_depend_on_collect_ids() -> None:
    with pytest.raises(Finding, match=r"^py: chunked != whole: 0 links != 2 links"):
        check(DOC, _LinksDependOnIds, None, Link)


def test_oracle_catches_a_link_without_its_position() -> None:
    with pytest.raises(Finding, match=r"^py: bad line/column"):
        check(DOC, _NoPositions, None, Link)


def test_oracle_catches_a_different_end_state() -> None:
    with pytest.raises(Finding, match=r"^c != py: \(encoding, base_url, nofollow\)"):
        check(DOC, LinkExtractorPy, _OtherEncoding, Link)


def test_oracle_lets_an_internal_error_through_with_a_note() -> None:
    with pytest.raises(RuntimeError, match="internal error") as info:
        check(DOC, LinkExtractorPy, _Raises, Link)
    assert any("raised by the c extractor" in n for n in info.value.__notes__)


def test_oracle_catches_wrong_types_and_links_after_close() -> None:
    with pytest.raises(Finding, match="not a Link"):
        check(DOC, _PlainTuples, None, Link)
    with pytest.raises(Finding, match="links after close"):
        check(DOC, _LinksAfterClose, None, Link)


def _spy(cls: Any, seen: list[bool]) -> Any:
    class Spy(cls):  # type: ignore[misc]
        def feed(self, data: bytes) -> list[Link]:
            seen.append(self._strict)
            out: list[Link] = super().feed(data)
            return out

    return Spy


@pytest.mark.parametrize("cls", [c for c in (LinkExtractorPy, LinkExtractorC) if c is not None])
def test_oracle_sets_strict_so_internal_errors_surface(cls: Any) -> None:
    seen: list[bool] = []
    check(DOC, _spy(cls, seen), None, Link)
    assert seen and all(seen)


def test_replay_command_reports_a_failing_input(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.write_bytes(DOC)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "fuzz_extract.py"), "--check", str(good)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"{good}: ok [link_set='links'" in proc.stderr


# The fuzzer itself: opt-in (pytest -m fuzz), it needs atheris, and clang for ASan ----------


def _fuzz(secs: int, env: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "fuzz" / "run.sh"), str(secs), "-runs=3000"],
        capture_output=True,
        text=True,
        timeout=secs + 600,
        env={**os.environ, **env},
        cwd=tmp,
    )


@pytest.mark.fuzz
@pytest.mark.timeout(900)
@pytest.mark.parametrize("asan", [False, True], ids=["plain", "asan"])
def test_fuzz_run_sh_runs_clean(asan: bool, tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    if asan and shutil.which("clang") is None:
        pytest.skip("no clang: no AddressSanitizer build")
    proc = _fuzz(30, {} if asan else {"FUZZ_NO_ASAN": "1"}, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "stat::number_of_executed_units" in out
    if asan:
        assert "Using preloaded libfuzzer" in out


@pytest.mark.skipif(LinkExtractorC is None, reason="the compiled extractor is not built")
@pytest.mark.parametrize("flags", [0x10, 0x1A, 0x14])
def test_property_6_with_the_record_on_the_seeds(flags: int) -> None:
    """Property 6 (the direct intake path), the page's record kept, on every seed."""
    from crawler.urls.intake import IntakeC  # noqa: PLC0415

    for path in SEEDS:
        data = bytearray(path.read_bytes())
        if len(data) < HEADER:
            continue
        data[3] = flags
        check(bytes(data), LinkExtractorPy, LinkExtractorC, Link, IntakeC)


def test_oracle_catches_a_wrong_record() -> None:
    from fuzz.fuzz_extract import _check_record  # noqa: PLC0415

    case = decode(header() + b"<a href=/x>x</a><a href='http://[bad'>")
    links = [Link("http://a/x", "/x", "a", "href"), Link(None, "http://[bad", "a", "href")]

    class Rec(list):  # type: ignore[type-arg]
        def urls(self) -> list[str]:
            return [k.url for k in self if k.url is not None]

        def invalid(self) -> list[str]:
            return [k.raw for k in self if k.url is None]

        def json_urls(self) -> str:
            return json.dumps(self.urls(), separators=(",", ":"))

    class BadJson(Rec):
        def json_urls(self) -> str:
            return "[]"

    class NoInvalid(Rec):
        def invalid(self) -> list[str]:
            return []

    _check_record(Rec(links), links, case)
    for bad in (Rec(links[:1]), Rec(links[::-1]), BadJson(links), NoInvalid(links)):
        with pytest.raises(Finding, match="record"):
            _check_record(bad, links, case)
