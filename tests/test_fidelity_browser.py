"""The fidelity oracle live: a real headless Chromium (``pytest -m browser``).

Needs ``/usr/bin/chromium`` (Debian: ``apt-get install chromium``); it is driven over the
DevTools protocol on 127.0.0.1 only (benchmarks/fidelity.py ``Chromium``). Five checks:

* the recorded answers of tests/data/fidelity/cases.json are still what this Chromium says
  (a sample), so the committed regression set stays a browser's answer;
* freshly generated documents (a seed the committed set does not use): every difference has a
  documented cause (``CAUSES``), none is new;
* the real pages of ../shared/corpus/pages: links and resources exactly as in the DOM, both
  parsed from the same text (DOMParser) and served as bytes from 127.0.0.1 (the browser's own
  encoding sniffing);
* documents spliced from slices of those pages: every difference has a documented cause.
"""

from __future__ import annotations

import asyncio
import random
import shutil

import pytest

from tests.extract_common import CORPUS, PAGES
from tests.test_fidelity import CASES, CASES_DOC, fidelity

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        shutil.which("chromium") is None, reason="needs chromium (apt-get install chromium)"
    ),
]


def test_recorded_answers_are_still_chromiums() -> None:
    sample = random.Random(1).sample(CASES, 500)

    async def run() -> tuple[list[object], str]:
        async with fidelity.Chromium() as ch:
            return await ch.parse([c["html"] for c in sample]), ch.version

    parsed, version = asyncio.run(run())
    changed = []
    for case, p in zip(sample, parsed, strict=True):
        expected, foreign = fidelity.chromium_expected(p, CASES_DOC["link_set"])
        if [list(t) for t in expected] != case["expected"] or foreign != case["foreign_a"]:
            changed.append((case["id"], case["html"], case["expected"], expected))
    assert not changed, f"{version} (recorded: {CASES_DOC['chromium']}) differs: {changed[:10]}"


def test_fresh_documents_differ_only_for_documented_causes() -> None:
    seed = 20261201
    inputs = [(f"fresh:{i}", d) for i, d in enumerate(fidelity.generate(1500, seed))]
    inputs += [(f"tok:{i}", d) for i, d in enumerate(fidelity.generate_tokens(1500, seed))]
    results, _ = asyncio.run(fidelity.chromium_results(inputs, "resources"))
    new = []
    for r in results:
        for impl in fidelity.IMPLS:
            if r.verdicts[impl].status == "fail":
                keys = {c.split(" | ")[1] for c in fidelity.causes(r, impl)}
                if not keys <= set(fidelity.CAUSES):
                    new.append((impl, r.data, r.expected, r.got[impl]))
    assert not new, f"{len(new)} differences without a documented cause: {new[:10]}"


@pytest.mark.skipif(not PAGES, reason=f"needs {CORPUS}")
def test_real_pages_match_the_dom() -> None:
    inputs = [(p.name, fidelity.page_text(p.read_bytes())) for p in PAGES]
    results, _ = asyncio.run(fidelity.chromium_results(inputs, "resources"))
    bad = [
        (r.name, impl, r.verdicts[impl].missing[:5], r.verdicts[impl].extra[:5])
        for r in results
        for impl in fidelity.IMPLS
        if r.verdicts[impl].status == "fail"
    ]
    assert sum(len(r.expected) for r in results) > 10_000
    assert not bad, bad


@pytest.mark.skipif(not PAGES, reason=f"needs {CORPUS}")
def test_real_pages_served_as_bytes_match_the_browser_document() -> None:
    # End to end: the browser's own encoding sniffing on the bytes, ours on the same bytes.
    lines, results = asyncio.run(fidelity.served_pages(PAGES, "resources"))
    bad = [
        (r.name, impl)
        for r in results
        for impl in fidelity.IMPLS
        if r.verdicts[impl].status == "fail"
    ]
    assert not bad, "\n".join(lines)


@pytest.mark.skipif(not PAGES, reason=f"needs {CORPUS}")
def test_documents_spliced_from_real_pages_differ_only_for_documented_causes() -> None:
    # real markup cut open in states no page had (a proxy for pages nobody has seen)
    inputs = fidelity.spliced_pages(PAGES, 1000, seed=20261201)
    results, _ = asyncio.run(fidelity.chromium_results(inputs, "resources"))
    new = [
        (r.name, impl, r.verdicts[impl].missing[:3], r.verdicts[impl].extra[:3])
        for r in results
        for impl in fidelity.IMPLS
        if r.verdicts[impl].status == "fail"
        and not {c.split(" | ")[1] for c in fidelity.causes(r, impl)} <= set(fidelity.CAUSES)
    ]
    assert not new, new[:10]
