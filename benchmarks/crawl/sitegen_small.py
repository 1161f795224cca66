"""Deterministic small-page static site for the crawl benchmark (issue 9): a chunked manual.

Modelled on DocBook's chunked HTML output: one flat directory of pages in document order,
``/`` (the book's title page and table of contents), chapters ``ch01.html`` and their
sections ``ch01s01.html`` .. ``ch01s30.html``. Every page is 12-18 KB (1 KB = 1000 bytes) and
a section page has about 20 ``<a href>``s (14-26): the header and footer navigation
(Prev / Up / Next, Home), an "on this page" list of fragment-only links, cross-references
to other sections (some with a ``#fragment``), a short "see also" list and now and then a
link to another host (``https://host042.example/...``, never fetched). A chapter page lists
its sections; the title page lists the chapters. The head carries DocBook's
``<link rel="home|up|prev|next">`` (site pages too; no stylesheet or image URLs).

Every same-host link is a page of the site (home is spelled ``./``, never ``index.html``,
which would be a second URL for ``/``), every page is reachable from ``/`` (through the
tables of contents in two steps, and through the Next chain), and page i's bytes depend
only on (seed, N, i).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import NamedTuple

if str(Path(__file__).resolve().parent) not in sys.path:  # imported by path, from elsewhere
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import textgen  # noqa: E402

GENERATOR_VERSION = 1
MIN_BYTES = 12_000
MAX_BYTES = 18_000
SECTIONS_PER_CHAPTER = 30
XREFS = (5, 9)
SEE_ALSO = (2, 3)
OFF_HOSTS = 300

_HEAD_STYLE = (
    "body{font:15px/1.45 serif;max-width:52em;margin:0 auto}.navheader,.navfooter{width:100%}"
    "pre.programlisting{background:#f4f4f4;padding:6px}div.note{border-left:3px solid #999}"
)


class SmallSite:
    """Layout and link plan of an N-page manual; ``page(i)`` renders page i."""

    def __init__(self, n: int, seed: int = 1) -> None:
        if n < 3:
            raise ValueError("n must be at least 3")
        self.n = n
        self.seed = seed
        # document order: 0 = title page, then each chapter followed by its sections
        self.kind: list[tuple[int, int]] = [(0, 0)]  # (chapter, section); section 0 = chapter
        c = 0
        while len(self.kind) < n:
            c += 1
            self.kind.append((c, 0))
            for s in range(1, SECTIONS_PER_CHAPTER + 1):
                if len(self.kind) == n:
                    break
                self.kind.append((c, s))
        self.chapter_page = {ch: i for i, (ch, s) in enumerate(self.kind) if s == 0 and i}
        self.sections = {ch: [] for ch in self.chapter_page}  # type: dict[int, list[int]]
        for i, (ch, s) in enumerate(self.kind):
            if s:
                self.sections[ch].append(i)
        self._titles = [textgen.phrase(self._rng(i, 1), 2, 6).capitalize() for i in range(n)]

    def _rng(self, i: int, salt: int) -> random.Random:
        return random.Random((self.seed * 1_000_003 + i) * 13 + salt)

    def file_name(self, i: int) -> str:
        ch, s = self.kind[i]
        if i == 0:
            return "index.html"
        return f"ch{ch:02d}.html" if s == 0 else f"ch{ch:02d}s{s:02d}.html"

    def url(self, i: int) -> str:
        return "/" if i == 0 else "/" + self.file_name(i)

    def _href(self, i: int) -> str:
        """How every page of the (flat) manual spells a link to page i."""
        return "./" if i == 0 else self.file_name(i)

    def up(self, i: int) -> int:
        ch, s = self.kind[i]
        return self.chapter_page[ch] if s else 0

    def _number(self, i: int) -> str:
        ch, s = self.kind[i]
        return f"{ch}.{s}" if s else f"Chapter {ch}"

    def _plan(self, i: int) -> tuple[random.Random, list[int], list[int], int]:
        rng = self._rng(i, 2)
        xrefs = [rng.randrange(1, self.n) for _ in range(rng.randint(*XREFS))]
        ch, _ = self.kind[i]
        near = self.sections.get(ch) or [1]
        see = [rng.choice(near) for _ in range(rng.randint(*SEE_ALSO))]
        n_off = rng.choice((0, 0, 1, 1, 2))
        return rng, xrefs, see, n_off

    def links(self, i: int) -> set[int]:
        """The pages page i links to with ``<a href>`` (itself included, for ``#`` links)."""
        _, xrefs, see, _ = self._plan(i)
        out = {0, i, self.up(i), *xrefs, *see}
        if i > 0:
            out.add(i - 1)
        if i + 1 < self.n:
            out.add(i + 1)
        out |= set(self._toc(i))
        return out

    def _toc(self, i: int) -> list[int]:
        ch, s = self.kind[i]
        if i == 0:
            return list(self.chapter_page.values())
        return list(self.sections[ch]) if s == 0 else []

    def _nav(self, i: int, where: str) -> str:
        prev = f'<a accesskey="p" href="{self._href(i - 1)}">Prev</a>' if i > 0 else "&nbsp;"
        nxt = (
            f'<a accesskey="n" href="{self._href(i + 1)}">Next</a>' if i + 1 < self.n else "&nbsp;"
        )
        up = f'<a accesskey="u" href="{self._href(self.up(i))}">Up</a>' if i else "&nbsp;"
        if where == "header":
            title = self._titles[self.up(i)] if i else ""
            return (
                '<div class="navheader"><table width="100%" summary="Navigation header">'
                f'<tr><th colspan="3" align="center">{self._number(i) if i else ""} '
                f"{self._titles[i]}</th></tr>"
                f'<tr><td width="20%" align="left">{prev}&nbsp;</td>'
                f'<th width="60%" align="center">{title} {up}</th>'
                f'<td width="20%" align="right">&nbsp;{nxt}</td></tr></table><hr></div>\n'
            )
        home = '<a accesskey="h" href="./">Home</a>' if i else "&nbsp;"
        return (
            '<div class="navfooter"><hr><table width="100%" summary="Navigation footer">'
            f'<tr><td width="40%" align="left">{prev}&nbsp;</td>'
            f'<td width="20%" align="center">{up}</td>'
            f'<td width="40%" align="right">&nbsp;{nxt}</td></tr>'
            f'<tr><td width="40%" align="left" valign="top">'
            f"{self._titles[i - 1] if i else ''}&nbsp;</td>"
            f'<td width="20%" align="center">{home}</td>'
            f'<td width="40%" align="right" valign="top">&nbsp;'
            f"{self._titles[i + 1] if i + 1 < self.n else ''}</td></tr></table></div>\n"
        )

    def _block(self, rng: random.Random, size: int) -> str:
        """One text block of about ``size`` characters: a paragraph, a listing or a note."""
        r = rng.random()
        if r < 0.15:
            lines = "\n".join(
                f"  {textgen.phrase(rng, 1, 1)}({textgen.phrase(rng, 1, 1)}, {rng.randrange(100)});"
                for _ in range(max(2, size // 40))
            )
            return f'<pre class="programlisting">\n{lines}\n</pre>\n'
        if r < 0.22:
            return (
                '<div class="note"><h3 class="title">Note</h3>'
                f"<p>{textgen.paragraph(rng, size)}</p></div>\n"
            )
        text = textgen.paragraph(rng, size)
        w = text.split(" ")
        for _ in range(len(w) // 30):
            k = rng.randrange(len(w))
            w[k] = f'<code class="literal">{w[k]}</code>'
        return "<p>" + " ".join(w) + "</p>\n"

    def page(self, i: int) -> bytes:
        rng, xrefs, see, n_off = self._plan(i)
        title = self._titles[i]
        ch, s = self.kind[i]
        anchors = [f"id{i}x{k}" for k in range(rng.randint(2, 4))]
        head = [
            '<html><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8">',
            f"<title>{self._number(i) if i else ''} {title}</title>",
            f"<style>{_HEAD_STYLE}</style>",
            '<meta name="generator" content="DocBook XSL Stylesheets V1.79.2">',
            '<link rel="home" href="./" title="The Bench Manual">',
        ]
        if i:
            head.append(f'<link rel="up" href="{self._href(self.up(i))}" title="up">')
            head.append(f'<link rel="prev" href="{self._href(i - 1)}" title="prev">')
        if i + 1 < self.n:
            head.append(f'<link rel="next" href="{self._href(i + 1)}" title="next">')
        head.append('</head><body bgcolor="white" text="black" link="#0000FF" vlink="#840084">')
        top = "\n".join(head) + "\n" + self._nav(i, "header")
        cls = "book" if i == 0 else ("chapter" if s == 0 else "section")
        body = [
            f'<div class="{cls}"><div class="titlepage"><div><div><h2 class="title">'
            f'<a name="{cls}{i}"></a>{self._number(i) if i else ""} {title}</h2>'
            "</div></div></div>\n"
        ]
        toc = self._toc(i)
        if toc:
            body.append('<div class="toc"><p><b>Table of Contents</b></p><dl class="toc">')
            body += [
                f'<dt><span class="{"chapter" if i == 0 else "section"}">'
                f'<a href="{self._href(j)}">{self._number(j)} {self._titles[j]}</a></span></dt>'
                for j in toc
            ]
            body.append("</dl></div>\n")
        body.append(
            '<div class="toc"><p><b>On this page</b></p><ul>'
            + "".join(f'<li><a href="#{a}">{textgen.phrase(rng, 2, 4)}</a></li>' for a in anchors)
            + "</ul></div>\n"
        )
        # cross-references go inside the text blocks, after the size is settled
        refs = [
            f'<a class="xref" href="{self._href(j)}'
            + (f"#{'section' if self.kind[j][1] else 'chapter'}{j}" if rng.random() < 0.4 else "")
            + f'" title="{self._titles[j]}">{self._number(j)}, “{self._titles[j]}”</a>'
            for j in xrefs
        ]
        offs = [
            f'<a class="ulink" href="https://host{rng.randrange(OFF_HOSTS):03d}.example/'
            f'{textgen.phrase(rng, 1, 2).replace(" ", "/")}" target="_top">'
            f"{textgen.phrase(rng, 1, 3)}</a>"
            for _ in range(n_off)
        ]
        see_also = (
            '<div class="itemizedlist"><p>See also:</p><ul class="itemizedlist">'
            + "".join(
                f'<li class="listitem"><a class="xref" href="{self._href(j)}">'
                f"{self._titles[j]}</a></li>"
                for j in see
            )
            + "</ul></div>\n"
        )
        bottom = "</div>\n" + self._nav(i, "footer") + "</body></html>\n"
        fixed = len(top) + sum(len(b) for b in body) + len(see_also) + len(bottom)
        fixed += sum(len(r) + 1 for r in refs + offs) + 60 * len(anchors)
        target = rng.randint(MIN_BYTES + 800, MAX_BYTES - 800)
        blocks: list[str] = []
        size = fixed
        while size < target or len(blocks) < len(anchors):
            blk = self._block(rng, min(900, max(200, target - size)))
            blocks.append(blk)
            size += len(blk.encode())
        # headings with the page's anchors, spread over the blocks
        for k, a in enumerate(anchors):
            at = k * len(blocks) // len(anchors)
            blocks[at] = (
                f'<h3 class="title"><a name="{a}"></a>{textgen.phrase(rng, 2, 4)}</h3>\n'
                + blocks[at]
            )
        # links into paragraphs (at a paragraph's end), spread in document order
        paras = [k for k, b in enumerate(blocks) if b.startswith("<p>") or "</h3>\n<p>" in b]
        paras = paras or [len(blocks) - 1]
        for k, link in enumerate(refs + offs):
            at = paras[k * len(paras) // max(1, len(refs + offs))]
            if blocks[at].endswith("</p>\n"):
                blocks[at] = blocks[at][: -len("</p>\n")] + f" {link}</p>\n"
            else:
                blocks[at] += f"<p>{link}</p>\n"
        return (top + "".join(body) + "".join(blocks) + see_also + bottom).encode()


class SiteInfo(NamedTuple):
    root: Path
    n: int
    seed: int
    total_bytes: int


def build_site(root: Path, n: int, seed: int = 1, *, force: bool = False) -> SiteInfo:
    """Write the N-page manual under ``root`` (reused when a matching build is there)."""
    stamp = root / "site.json"
    want = {"kind": "small", "n": n, "seed": seed, "version": GENERATOR_VERSION}
    if not force and stamp.exists():
        got = json.loads(stamp.read_text())
        if {k: got.get(k) for k in want} == want:
            return SiteInfo(root, n, seed, int(got["total_bytes"]))
    root.mkdir(parents=True, exist_ok=True)
    site = SmallSite(n, seed)
    total = 0
    for i in range(n):
        data = site.page(i)
        total += len(data)
        (root / site.file_name(i)).write_bytes(data)
    stamp.write_text(json.dumps({**want, "total_bytes": total}))
    return SiteInfo(root, n, seed, total)


if __name__ == "__main__":  # pragma: no cover - manual use: python sitegen_small.py DIR N
    import time

    t0 = time.perf_counter()
    info = build_site(Path(sys.argv[1]), int(sys.argv[2]), force=True)
    print(info, f"{time.perf_counter() - t0:.1f}s", file=sys.stderr)
