"""Feed every corpus page to one extractor N times: a fixed workload for instruction counts.

Wall time on a shared machine moves by up to 2x between runs; callgrind's instruction count
does not. Compare two trees (e.g. a checkout of an older commit built in place) with

    valgrind --tool=callgrind python benchmarks/extract_instructions.py TREE c 2
    valgrind --tool=callgrind python benchmarks/extract_instructions.py TREE c 0

and take the difference (start-up excluded). Arguments: the project tree to import, ``c`` or
``py``, the number of passes over the corpus (``../shared/corpus/pages`` beside TREE), and
optionally ``ids`` to collect fragment targets too (``collect_ids=True``, issue 12).
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    tree, impl, passes = sys.argv[1], sys.argv[2], int(sys.argv[3])
    kw = {"collect_ids": True} if sys.argv[4:5] == ["ids"] else {}
    sys.path.insert(0, tree)
    from crawler.extract import LinkExtractorC, LinkExtractorPy  # noqa: PLC0415 (from TREE)

    cls = LinkExtractorC if impl == "c" else LinkExtractorPy
    if cls is None:
        sys.exit("the compiled extractor is not built in " + tree)
    corpus = Path(tree).resolve().parent / "shared" / "corpus" / "pages"
    pages = [b"<body>x" + p.read_bytes() for p in sorted(corpus.glob("*.html"))]
    for _ in range(passes):
        for data in pages:
            ex = cls("https://example.org/dir/page.html", "utf-8", **kw)
            ex.feed(data)
            ex.close()


if __name__ == "__main__":
    main()
