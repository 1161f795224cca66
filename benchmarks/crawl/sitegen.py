"""Deterministic static news site for the crawl benchmark.

Every page is 30-60 KB (1 KB = 1000 bytes) of HTML built from the real corpus pages in
``../shared/corpus/pages``: the corpus bodies are cleaned once (scripts, styles, comments,
forms, media and every URL they hold are removed or pointed at an off-site host, so the
only same-host URLs on the site are the page links we put there), concatenated, and each
page takes a slice of that text as its article body. Into that markup go about a hundred
same-host links a page: a section nav, breadcrumbs, the corpus' own anchors re-pointed at
site pages, extra in-text links, a "related" list and a footer.

The link graph is a 40-ary tree (page i links to pages 40i+1 .. 40i+40) plus seeded random
links, so every page is reachable from ``/`` within ceil(log40 N) levels; nav and footer
links (pages 1..28) are on every page. Page i's HTML depends only on (seed, N, i), so the
same arguments give the same bytes.

Hrefs come in several forms a crawler must resolve: root-relative, ``../`` relative,
same-directory relative, ``./`` prefixed, with a ``#fragment``, and bare ``#top`` anchors.
No absolute same-host URL is used (the port is unknown when the site is built).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

GENERATOR_VERSION = 3
MIN_BYTES = 30_000
MAX_BYTES = 60_000
FANOUT = 40  # tree children per page: depth <= ceil(log_FANOUT(N))
NAV_PAGES = 16  # pages 1..16 in the top nav of every page
FOOTER_PAGES = 12  # pages 17..28 in the footer of every page
RELATED = 8
ARTICLE_LINKS = (56, 70)  # tree children + random pages, in the article text
SECTIONS = (
    "news",
    "world",
    "business",
    "tech",
    "science",
    "sport",
    "culture",
    "opinion",
    "travel",
    "health",
)
OFFSITE = "https://static.example-cdn.net"
MARKER = b"\x00"  # stands for the href of a corpus anchor, filled per page

# Elements dropped whole from the corpus bodies: raw-text/RCDATA elements (a slice cut inside
# one would swallow the links after it), foreign content, forms and embedded media.
_DROP_TAGS = (
    "script style noscript template textarea title xmp iframe noembed noframes plaintext "
    "svg math select object embed frame frameset base meta link form area map video audio "
    "canvas input button head"
).split()
# Attributes holding URLs: pointed at an off-site host so no crawler requests them here.
_URL_ATTRS = frozenset(
    "src srcset href action poster data background cite longdesc usemap formaction lowsrc "
    "data-src data-srcset data-href data-original data-lazy-src data-url".split()
)

_CSS = (
    "body{margin:0;font:16px/1.5 Georgia,serif;color:#222}"
    ".site-header{background:#111;color:#fff;padding:8px 16px}"
    ".site-header a{color:#fff;text-decoration:none}"
    "nav.primary ul{list-style:none;display:flex;flex-wrap:wrap;gap:12px;margin:0;padding:0}"
    ".breadcrumbs{font-size:13px;padding:6px 16px;color:#666}"
    "main{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,1fr);gap:24px;"
    "max-width:1200px;margin:0 auto;padding:16px}"
    "article.post h1{font-size:34px;line-height:1.15}"
    ".byline{color:#777;font-size:14px}"
    "aside.related ul{list-style:none;padding:0}aside.related li{margin:0 0 10px}"
    ".kicker{display:block;text-transform:uppercase;font-size:11px;color:#c00}"
    ".site-footer{background:#f3f3f3;padding:24px 16px;font-size:14px}"
    ".site-footer ul{columns:3;list-style:none;padding:0}"
    "img{max-width:100%;height:auto}table{border-collapse:collapse}"
)


@dataclass
class Filler:
    """The cleaned corpus text: one byte string and the offsets where a slice may start or end."""

    data: bytes
    cuts: list[int]  # offsets of every b"<" (lxml escapes "<" elsewhere), plus len(data)
    words: list[str]  # common corpus words, for titles, slugs and anchor text


def default_corpus_dir() -> Path:
    """``../shared/corpus/pages`` relative to the project root (two levels above this file)."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "pages"


def _clean_page(raw: bytes) -> bytes:
    """A corpus page's body with only markup and text left; anchors become ``<a\\x00>``."""
    import lxml.html  # noqa: PLC0415 - only needed when a site is built

    try:
        doc = lxml.html.document_fromstring(raw)
    except Exception:  # noqa: BLE001 - an unparsable corpus page is skipped
        return b""
    for node in doc.xpath("//comment() | //processing-instruction()"):
        if node.getparent() is not None:
            node.drop_tree()  # keeps the tail text
    for el in doc.xpath("|".join("//" + t for t in _DROP_TAGS)):
        if el.getparent() is not None:
            el.drop_tree()
    body = doc.find("body")
    if body is None:
        return b""
    for el in body.iter():
        if not isinstance(el.tag, str):
            continue
        if el.tag == "a":
            el.attrib.clear()
            continue
        for name in list(el.attrib):
            low = name.lower()
            if low in _URL_ATTRS:
                digest = hashlib.blake2s(el.attrib[name].encode(), digest_size=6).hexdigest()
                el.attrib[name] = f"{OFFSITE}/a/{digest}.jpg"
            elif low == "style" and "url(" in el.attrib[name].lower():
                del el.attrib[name]
            elif low.startswith("on") or low in ("http-equiv",):
                del el.attrib[name]
    html = lxml.html.tostring(body, encoding="unicode")
    html = re.sub(r"^<body[^>]*>|</body>\s*$", "", html.strip())
    html = html.replace("\x00", "")
    return html.replace("<a>", "<a\x00>").encode("utf-8")


def load_filler(corpus_dir: Path | None = None) -> Filler:
    """Clean every corpus page (sorted by name) and join them into one filler text."""
    corpus_dir = corpus_dir or default_corpus_dir()
    files = sorted(corpus_dir.glob("*.html"))
    if not files:
        raise FileNotFoundError(f"no corpus pages in {corpus_dir}")
    parts = [_clean_page(f.read_bytes()) for f in files]
    data = b"\n".join(p for p in parts if p)
    cuts = [m.start() for m in re.finditer(b"<", data)]
    cuts.append(len(data))
    text = re.sub(rb"<[^>]*>", b" ", data).decode("utf-8", "replace").lower()
    common = Counter(re.findall(r"\b[a-z]{4,11}\b", text)).most_common(1200)
    words = [w for w, _ in common[200:1200]] or ["story", "report", "update", "market"]
    return Filler(data, cuts, words)


class Site:
    """The URL layout and link graph of an N-page site; ``page(i)`` renders page i."""

    def __init__(self, n: int, filler: Filler, seed: int = 1) -> None:
        if n < FOOTER_PAGES + NAV_PAGES + 2:
            raise ValueError(f"n must be at least {FOOTER_PAGES + NAV_PAGES + 2}")
        self.n = n
        self.seed = seed
        self.filler = filler
        self._paths = [self._make_path(i) for i in range(n)]

    def _rng(self, i: int, salt: int = 0) -> random.Random:
        return random.Random((self.seed * 1_000_003 + i) * 7 + salt)

    def _title_words(self, i: int) -> list[str]:
        rng = self._rng(i, 1)
        return [rng.choice(self.filler.words) for _ in range(rng.randint(4, 8))]

    def _make_path(self, i: int) -> str:
        if i == 0:
            return "/"
        slug = "-".join(self._title_words(i)[:4])
        return f"/{SECTIONS[i % len(SECTIONS)]}/{i}-{slug}.html"

    def path(self, i: int) -> str:
        """URL path of page i (``/`` for the root)."""
        return self._paths[i]

    def file_name(self, i: int) -> str:
        """File of page i relative to the site root."""
        return "index.html" if i == 0 else self._paths[i].lstrip("/")

    def children(self, i: int) -> range:
        return range(min(self.n, i * FANOUT + 1), min(self.n, i * FANOUT + FANOUT + 1))

    def depth(self, i: int) -> int:
        """Shortest link distance from the root (the tree depth; nav/footer pages are 1)."""
        if i == 0:
            return 0
        if i <= NAV_PAGES + FOOTER_PAGES:
            return 1
        return 1 + self.depth((i - 1) // FANOUT)

    def _href(self, src: int, dst: int, rng: random.Random) -> str:
        """One of several spellings of the link src -> dst, all resolving to path(dst)."""
        target = self._paths[dst]
        r = rng.random()
        if dst == 0:
            return "/" if src == 0 or r < 0.8 else "../"
        if r < 0.55:
            return target
        if r < 0.80:
            return target[1:] if src == 0 else ".." + target
        if r < 0.90 and src != 0 and SECTIONS[src % len(SECTIONS)] == SECTIONS[dst % len(SECTIONS)]:
            return target.rsplit("/", 1)[1]
        if r < 0.95:
            return "." + target if src == 0 else "./.." + target
        return target + "#comments"

    def _anchor_text(self, rng: random.Random, lo: int = 2, hi: int = 6) -> str:
        return " ".join(rng.choice(self.filler.words) for _ in range(rng.randint(lo, hi)))

    def _hub(self, i: int) -> int:
        """The nav page of page i's section (pages 1..10 are the section fronts)."""
        return i % len(SECTIONS) or len(SECTIONS)

    def links(self, i: int) -> list[int]:
        """Every page page i links to (with repeats; the ``#top`` anchors to itself left out)."""
        return self._plan(i)[3]

    def _plan(self, i: int) -> tuple[random.Random, list[int], list[int], list[int]]:
        rng = self._rng(i, 2)
        kids = list(self.children(i))
        n_article = rng.randint(*ARTICLE_LINKS)
        article = kids[:n_article] + [rng.randrange(self.n) for _ in range(n_article - len(kids))]
        rng.shuffle(article)
        related = [rng.randrange(self.n) for _ in range(RELATED)]
        nav = list(range(1, NAV_PAGES + 1))
        footer = list(range(NAV_PAGES + 1, NAV_PAGES + FOOTER_PAGES + 1))
        section_hub = self._hub(i)
        every = [0, *nav, 0, section_hub, *article, *related, *footer]
        return rng, article, related, every

    def page(self, i: int) -> bytes:
        """The HTML of page i: MIN_BYTES <= len <= MAX_BYTES."""
        rng, article, related, _ = self._plan(i)
        title = " ".join(self._title_words(i)).capitalize()
        sec = SECTIONS[i % len(SECTIONS)]
        h = self._href
        nav = "".join(
            f'<li class="nav-item"><a href="{h(i, j, rng)}">{SECTIONS[j % len(SECTIONS)].title()} '
            f"{self.filler.words[j]}</a></li>\n"
            for j in range(1, NAV_PAGES + 1)
        )
        footer = "".join(
            f'<li><a href="{h(i, j, rng)}">{self._anchor_text(rng, 1, 3).title()}</a></li>\n'
            for j in range(NAV_PAGES + 1, NAV_PAGES + FOOTER_PAGES + 1)
        )
        rel = "".join(
            f'<li><a href="{h(i, j, rng)}">'
            f'<span class="kicker">{SECTIONS[j % len(SECTIONS)]}</span>'
            f"{self._anchor_text(rng, 4, 9).capitalize()}</a></li>\n"
            for j in related
        )
        head = (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{title} | The Bench Gazette</title>\n"
            f'<meta name="description" content="{self._anchor_text(rng, 12, 20)}">\n'
            f"<style>{_CSS}</style>\n"
            "<script>window.dataLayer=window.dataLayer||[];"
            "function gtag(){dataLayer.push(arguments)}"
            f"gtag('js',new Date());gtag('config','page-{i}');</script>\n</head>\n"
            '<body class="article" id="top">\n<a class="skip" href="#content">Skip to content</a>\n'
            '<header class="site-header"><div class="logo"><a href="'
            + h(i, 0, rng)
            + '">The Bench Gazette</a></div>\n'
            f'<nav class="primary" aria-label="Sections"><ul>\n{nav}</ul></nav></header>\n'
            f'<div class="breadcrumbs"><a href="{h(i, 0, rng)}">Home</a> &rsaquo; '
            f'<a href="{h(i, self._hub(i), rng)}">{sec.title()}</a> &rsaquo; '
            f"<span>{title}</span></div>\n"
            f'<main id="content"><article class="post">\n<h1>{title}</h1>\n'
            f'<p class="byline">By {self._anchor_text(rng, 2, 2).title()} '
            f'<time datetime="2024-{1 + i % 12:02d}-{1 + i % 28:02d}">'
            f"{1 + i % 28} {('Jan', 'Feb', 'Mar', 'Apr')[i % 4]} 2024</time></p>\n"
        ).encode()
        tail = (
            '\n</article>\n<aside class="related"><h2>Related stories</h2><ul>\n'
            f"{rel}</ul></aside></main>\n"
            f'<footer class="site-footer"><div class="cols"><ul>\n{footer}</ul></div>\n'
            '<p><a href="#top">Back to top</a> &copy; 2024 The Bench Gazette</p></footer>\n'
            "</body>\n</html>\n"
        ).encode()
        hrefs = [h(i, j, rng) for j in article]
        extra = sum(len(x) + 40 for x in hrefs)  # rough size of the links put into the text
        target = rng.randint(MIN_BYTES + 3000, MAX_BYTES - 2000) - len(head) - len(tail) - extra
        body = self._article(rng, max(target, 1000), hrefs)
        page = head + body + tail
        for _ in range(20):  # a long text run can over/undershoot: nudge the slice
            if MIN_BYTES <= len(page) <= MAX_BYTES:
                return page
            target += (MIN_BYTES + MAX_BYTES) // 2 - len(page)
            body = self._article(rng, max(target, 1000), hrefs)
            page = head + body + tail
        raise RuntimeError(f"page {i}: could not fit {len(page)} bytes into the size range")

    def _article(self, rng: random.Random, size: int, hrefs: list[str]) -> bytes:
        """A filler slice of about ``size`` bytes with ``hrefs`` as its links."""
        f = self.filler
        cuts = f.cuts
        hi = bisect.bisect_left(cuts, len(f.data) - size - 1)
        start = cuts[rng.randrange(max(1, hi))]
        end_i = bisect.bisect_right(cuts, start + size) - 1
        end = max(cuts[end_i], cuts[min(len(cuts) - 1, bisect.bisect_right(cuts, start))])
        chunk = f.data[start:end]
        pieces = chunk.split(MARKER)
        k = len(pieces) - 1
        used = min(k, len(hrefs))
        out: list[bytes] = [pieces[0]]
        for j in range(1, len(pieces)):
            if j <= used:
                out.append(b' href="' + hrefs[j - 1].encode() + b'"')
            out.append(pieces[j])
        text = b"".join(out)
        rest = hrefs[used:]
        if not rest:
            return text
        # Remaining links go in front of random tags of the slice, in document order.
        tag_starts = [m.start() for m in re.finditer(b"<", text)] or [len(text)]
        spots = sorted(rng.choice(tag_starts) for _ in rest)
        res: list[bytes] = []
        prev = 0
        for pos, href in zip(spots, rest, strict=True):
            res.append(text[prev:pos])
            words = self._anchor_text(rng)
            res.append(f'<a href="{href}">{words}</a> '.encode())
            prev = pos
        res.append(text[prev:])
        return b"".join(res)


@dataclass
class SiteInfo:
    root: Path
    n: int
    seed: int
    total_bytes: int


def build_site(
    root: Path, n: int, seed: int = 1, corpus_dir: Path | None = None, *, force: bool = False
) -> SiteInfo:
    """Write the N-page site under ``root`` (reused when a matching build is already there)."""
    stamp = root / "site.json"
    want = {"n": n, "seed": seed, "version": GENERATOR_VERSION}
    if not force and stamp.exists():
        got = json.loads(stamp.read_text())
        if {k: got.get(k) for k in want} == want:
            return SiteInfo(root, n, seed, int(got["total_bytes"]))
    site = Site(n, load_filler(corpus_dir), seed)
    total = 0
    made: set[Path] = set()
    for i in range(n):
        dest = root / site.file_name(i)
        if dest.parent not in made:
            dest.parent.mkdir(parents=True, exist_ok=True)
            made.add(dest.parent)
        data = site.page(i)
        total += len(data)
        dest.write_bytes(data)
    stamp.write_text(json.dumps({**want, "total_bytes": total}))
    return SiteInfo(root, n, seed, total)


if __name__ == "__main__":  # pragma: no cover - manual use: python sitegen.py DIR N
    import sys
    import time

    t0 = time.perf_counter()
    info = build_site(Path(sys.argv[1]), int(sys.argv[2]), force=True)
    print(info, f"{time.perf_counter() - t0:.1f}s", file=sys.stderr)
    os._exit(0)
