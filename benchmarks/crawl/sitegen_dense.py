"""Deterministic link-dense static site for the crawl benchmark (issue 9).

About 40 KB a page (36-44 KB; 1 KB = 1000 bytes) and about 175 ``<a href>``s a page
(165-200; 178 on average at 2,000 pages), in every spelling a crawler has to resolve and
canonicalise:

- same-host links to site pages: root-relative (``/docs/s1/12-x.html``), ``../``-relative,
  same-directory (``12-x.html``), ``./``-prefixed, protocol-relative
  (``//127.0.0.1:PORT/docs/...``), absolute (``http://127.0.0.1:PORT/...``), dot segments in
  the middle (``/docs/./s1/../s1/12-x.html``), percent escapes of ASCII (``/%7Estaff/...``,
  ``/%7estaff/...``, a letter of the file name as ``%65`` or ``%2D``), with a ``#fragment``;
- query-only links (``?page=4``) between the archive pages ``/archive/?page=K`` (nginx maps
  them to ``archive/page-K.html``, see nginx.conf.tmpl), which are site pages of their own;
- fragment-only links (``#s3``, ``#top``, ``#``) and a ``mailto:``;
- 40-50 absolute links a page to 300 other hosts (``http://host042.example/...``,
  ``https://``, ``//host042.example/...``, some in upper case): out of scope for every
  crawler, never fetched (``.example`` does not resolve), but each goes through the
  crawlers' link intake.

Every same-host URL resolves (RFC 3986 resolution, unreserved escapes decoded) to a page of
the site, so a crawler that deduplicates correctly fetches exactly N pages. The graph is a
30-ary tree (page i links to 30i+1 .. 30i+30) plus seeded random links, so every page is
reachable from ``/``. Page i's bytes depend only on (seed, N, host, i): the host (with the
port nginx serves on) is written into the protocol-relative and absolute same-host links,
so a site is built for one port (benchmarks/crawl.py reuses the port of the last build when
it is free, and rebuilds otherwise).

``dense_page(i, n, seed, host)`` returns one page (benchmarks/extract.py uses it for
link-dense extraction input); ``dense_url(i, n, seed, host)`` is that page's URL.
"""

from __future__ import annotations

import json
import posixpath
import random
import sys
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

if str(Path(__file__).resolve().parent) not in sys.path:  # imported by path, from elsewhere
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import textgen  # noqa: E402

GENERATOR_VERSION = 1
MIN_BYTES = 36_000
MAX_BYTES = 44_000
LINKS = (165, 200)  # <a href>s a page, every kind counted (archive pages: a pager too)
FANOUT = 30
NAV_PAGES = 8  # pages 1..8 in every page's header nav
FOOTER_PAGES = 12  # pages 9..20 in every page's footer
OFF_HOSTS = 300
OFF_LINKS = (40, 50)
ARCHIVE_EVERY = 25  # page i is an archive page when i % 25 == 5
SECTIONS = ("docs", "~staff", "blog", "api", "news", "wiki", "shop", "forum")
SUBDIRS = 6
DEFAULT_HOST = "127.0.0.1:8080"

_CSS = (
    "body{margin:0;font:15px/1.5 sans-serif;color:#222}header{background:#123;color:#fff}"
    "header a{color:#fff}nav ul{display:flex;flex-wrap:wrap;gap:10px;list-style:none}"
    ".toc{float:right;width:220px}main{max-width:960px;margin:0 auto}"
    "ul.links{columns:2}aside ul{columns:3;font-size:13px}footer{background:#eee}"
)


def off_host(k: int) -> str:
    return f"host{k:03d}.example"


class DenseSite:
    """URL layout and link plan of an N-page link-dense site; ``page(i)`` renders page i."""

    def __init__(self, n: int, seed: int = 1, host: str = DEFAULT_HOST) -> None:
        if n < NAV_PAGES + FOOTER_PAGES + 2:
            raise ValueError(f"n must be at least {NAV_PAGES + FOOTER_PAGES + 2}")
        self.n = n
        self.seed = seed
        self.host = host
        self._urls = [self._make_url(i) for i in range(n)]
        self.archive = [i for i in range(n) if self.is_archive(i)]

    def _rng(self, i: int, salt: int) -> random.Random:
        return random.Random((self.seed * 1_000_003 + i) * 11 + salt)

    @staticmethod
    def is_archive(i: int) -> bool:
        return i % ARCHIVE_EVERY == 5

    def _make_url(self, i: int) -> str:
        if i == 0:
            return "/"
        if self.is_archive(i):
            return f"/archive/?page={i // ARCHIVE_EVERY + 1}"
        slug = "-".join(textgen.words(self._rng(i, 1), 3))
        sec = SECTIONS[i % len(SECTIONS)]
        return f"/{sec}/s{(i // len(SECTIONS)) % SUBDIRS}/{i}-{slug}.html"

    def url(self, i: int) -> str:
        """Path (and query, for archive pages) of page i."""
        return self._urls[i]

    def file_name(self, i: int) -> str:
        if i == 0:
            return "index.html"
        if self.is_archive(i):
            return f"archive/page-{i // ARCHIVE_EVERY + 1}.html"
        return self._urls[i].lstrip("/")

    def children(self, i: int) -> range:
        return range(min(self.n, i * FANOUT + 1), min(self.n, i * FANOUT + FANOUT + 1))

    # -- spellings

    def _dir(self, i: int) -> str:
        u = self._urls[i]
        return u[: u.rindex("/") + 1]

    def _relative(self, src: int, dst_path: str) -> str:
        """dst_path (a path ending in a file name or "/") relative to page src's directory."""
        d, f = dst_path.rsplit("/", 1)
        rel = posixpath.relpath(d or "/", self._dir(src))
        if rel == ".":
            return f or "./"
        return f"{rel}/{f}"

    def _escape(self, path: str, rng: random.Random) -> str:
        """``path`` with one ASCII character percent-escaped (upper- or lower-case hex)."""
        if "~" in path:
            return path.replace("~", "%7E" if rng.random() < 0.5 else "%7e")
        cut = path.rindex("/") + 1
        spots = [k for k in range(cut, len(path)) if path[k].isalpha() or path[k] == "-"]
        if not spots:
            return path
        k = rng.choice(spots)
        esc = f"%{ord(path[k]):02X}"
        if rng.random() < 0.5:
            esc = esc.lower()
        return path[:k] + esc + path[k + 1 :]

    def href(self, src: int, dst: int, rng: random.Random) -> str:
        """One spelling of the link src -> dst; every spelling resolves to url(dst)."""
        target = self._urls[dst]
        r = rng.random()
        host = self.host
        if self.is_archive(dst):
            if self.is_archive(src):
                query = target[target.index("?") :]
                return query if r < 0.6 else ("./" + query if r < 0.8 else target)
            if r < 0.5:
                return target
            if r < 0.75:
                return self._relative(src, "/archive/") + target[target.index("?") :]
            return f"//{host}{target}"
        if dst == 0:
            if r < 0.4:
                return "/"
            if r < 0.55:
                return f"//{host}/"
            if r < 0.65:
                return f"http://{host}/"
            rel = self._relative(src, "/")
            return rel if rel != "./" or r < 0.85 else "."
        if r < 0.20:
            return target
        if r < 0.38:
            return self._relative(src, target)
        if r < 0.44:
            rel = self._relative(src, target)
            return rel if rel.startswith("../") and r < 0.41 else "./" + rel
        if r < 0.52:
            return f"//{host}{target}"
        if r < 0.57:
            return f"http://{host}{target}"
        if r < 0.65:
            sec, sub, f = target[1:].split("/")
            other = f"s{(int(sub[1:]) + 1) % SUBDIRS}"
            if r < 0.61:
                return f"/{sec}/./{sub}/../{sub}/{f}"
            return f"/{sec}/{other}/../{sub}/./{f}"
        if r < 0.74:
            return self._escape(target, rng)
        if r < 0.79:
            return f"{target}#c{rng.randrange(9)}"
        if r < 0.84:
            return f"{self._relative(src, target)}#c{rng.randrange(9)}"
        if r < 0.90 and src != 0:
            sec, sub, f = target[1:].split("/")
            return (
                "../" * 2 + f"{sec}/{sub}/{f}"
                if not self.is_archive(src)
                else f"../{sec}/{sub}/{f}"
            )
        return target

    def _off(self, rng: random.Random) -> str:
        h = off_host(rng.randrange(OFF_HOSTS))
        r = rng.random()
        tail = "/".join(textgen.words(rng, rng.randint(1, 3)))
        if r < 0.35:
            return f"http://{h}/{tail}/"
        if r < 0.65:
            return f"https://{h}/{tail}/{rng.randrange(10_000)}.html"
        if r < 0.85:
            return f"//{h}/{tail}"
        if r < 0.93:
            return f"https://{h}/?ref=bench&id={rng.randrange(1000)}"
        return f"HTTP://{h.upper()}/{tail.upper()}"

    # -- the plan

    def _plan(self, i: int) -> tuple[random.Random, list[int], list[int], int]:
        rng = self._rng(i, 2)
        kids = list(self.children(i))
        n_body = rng.randint(88, 104)
        body = kids + [rng.randrange(self.n) for _ in range(max(0, n_body - len(kids)))]
        rng.shuffle(body)
        archive = [rng.choice(self.archive) for _ in range(3)]
        n_off = rng.randint(*OFF_LINKS)
        return rng, body, archive, n_off

    def links(self, i: int) -> set[int]:
        """The pages page i links to (itself too, through its fragment-only links)."""
        _, body, archive, _ = self._plan(i)
        out = {0, i, *range(1, NAV_PAGES + 1), *body, *archive}
        out |= set(range(NAV_PAGES + 1, NAV_PAGES + FOOTER_PAGES + 1))
        out.add(self._hub(i))
        if self.is_archive(i):
            out |= set(self._pager(i))
        return out

    def _hub(self, i: int) -> int:
        return i % len(SECTIONS) or len(SECTIONS)

    def _pager(self, i: int) -> list[int]:
        at = self.archive.index(i)
        want = {0, at - 2, at - 1, at + 1, at + 2, len(self.archive) - 1}
        return [self.archive[k] for k in sorted(want) if 0 <= k < len(self.archive) and k != at]

    def page(self, i: int) -> bytes:
        rng, body, archive, n_off = self._plan(i)
        h = self.href
        title = textgen.phrase(rng, 4, 7).capitalize()

        def a(href: str, text: str) -> str:
            return f'<a href="{href}">{text}</a>'

        nav = "".join(
            f"<li>{a(h(i, j, rng), textgen.phrase(rng, 1, 2).title())}</li>"
            for j in range(1, NAV_PAGES + 1)
        )
        toc = "".join(
            f'<li><a href="#s{k}">{textgen.phrase(rng, 2, 4)}</a></li>' for k in range(1, 9)
        )
        # the body links, spread over eight sections: in the text and in a list after it
        per = (len(body) + 7) // 8
        groups = [body[k * per : (k + 1) * per] for k in range(8)]
        offs = [self._off(rng) for _ in range(n_off)]
        parts: list[list[str]] = []
        for k, group in enumerate(groups, start=1):
            cut = len(group) * 2 // 3
            inline = "".join(
                f"{textgen.sentence(rng)} {a(h(i, j, rng), textgen.phrase(rng, 2, 5))} "
                for j in group[:cut]
            )
            listed = "".join(
                f"<li>{a(h(i, j, rng), textgen.phrase(rng, 3, 7).capitalize())}</li>"
                for j in group[cut:]
            )
            parts.append(
                [
                    f'<h2 id="s{k}">{textgen.phrase(rng, 2, 5).capitalize()}</h2>\n<p>{inline}',
                    "",  # filler text goes here
                    f'</p>\n<ul class="links">{listed}</ul>\n',
                ]
            )
        pager = ""
        if self.is_archive(i):
            pager = (
                '<nav class="pager">'
                + " ".join(a(h(i, j, rng), str(j // ARCHIVE_EVERY + 1)) for j in self._pager(i))
                + "</nav>\n"
            )
        head = (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n"
            f'<body id="top">\n<header>{a(h(i, 0, rng), "Dense Bench")}\n'
            f"<nav><ul>{nav}</ul></nav></header>\n"
            f'<div class="crumbs">{a(h(i, 0, rng), "Home")} / '
            f"{a(h(i, self._hub(i), rng), SECTIONS[i % len(SECTIONS)])} / <span>{title}</span>"
            f' <a href="#">permalink</a></div>\n'
            f'<div class="toc"><ul>{toc}</ul></div>\n<main>\n<h1>{title}</h1>\n{pager}'
        )
        archive_links = " ".join(
            a(h(i, j, rng), f"archive page {j // ARCHIVE_EVERY + 1}") for j in archive
        )
        aside = "".join(f"<li>{a(u, textgen.phrase(rng, 1, 3))}</li>" for u in offs)
        footer = "".join(
            f"<li>{a(h(i, j, rng), textgen.phrase(rng, 1, 3).title())}</li>"
            for j in range(NAV_PAGES + 1, NAV_PAGES + FOOTER_PAGES + 1)
        )
        tail = (
            f"<p>{archive_links}</p>\n</main>\n"
            f"<aside><h2>Elsewhere</h2><ul>{aside}</ul></aside>\n"
            f"<footer><ul>{footer}</ul>\n<p>"
            f"{a('mailto:editor@' + off_host(i % OFF_HOSTS), 'Write to us')} "
            f"{a('#top', 'Back to top')}</p></footer>\n</body>\n</html>\n"
        )
        size = len(head) + len(tail) + sum(len(x) for p in parts for x in p)
        target = rng.randint(MIN_BYTES + 500, MAX_BYTES - 500)
        k = 0
        while size < target:  # filler paragraphs, round robin over the sections
            para = textgen.paragraph(rng, min(700, target - size))
            parts[k % 8][1] += f"</p>\n<p>{para}"
            size += len(para) + 8
            k += 1
        return (head + "".join("".join(p) for p in parts) + tail).encode()


@lru_cache(maxsize=4)
def _site(n: int, seed: int, host: str) -> DenseSite:
    return DenseSite(n, seed, host)


def dense_page(i: int, n: int = 2000, seed: int = 1, host: str = DEFAULT_HOST) -> bytes:
    """Page i of the N-page link-dense site (36-44 KB, 165-200 links; see the module doc)."""
    return _site(n, seed, host).page(i)


def dense_url(i: int, n: int = 2000, seed: int = 1, host: str = DEFAULT_HOST) -> str:
    """The absolute URL of page i (its base URL for link resolution)."""
    return f"http://{host}{_site(n, seed, host).url(i)}"


class SiteInfo(NamedTuple):
    root: Path
    n: int
    seed: int
    total_bytes: int
    host: str = DEFAULT_HOST


def build_site(
    root: Path, n: int, seed: int = 1, host: str = DEFAULT_HOST, *, force: bool = False
) -> SiteInfo:
    """Write the N-page site under ``root`` (reused when a matching build is already there)."""
    stamp = root / "site.json"
    want = {"kind": "dense", "n": n, "seed": seed, "host": host, "version": GENERATOR_VERSION}
    if not force and stamp.exists():
        got = json.loads(stamp.read_text())
        if {k: got.get(k) for k in want} == want:
            return SiteInfo(root, n, seed, int(got["total_bytes"]), host)
    site = DenseSite(n, seed, host)
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
    return SiteInfo(root, n, seed, total, host)


def stamped_host(root: Path) -> str | None:
    """The host (with port) the site under ``root`` was last built for, if any."""
    try:
        got = json.loads((root / "site.json").read_text())
    except (OSError, ValueError):
        return None
    host = got.get("host")
    return host if isinstance(host, str) else None


if __name__ == "__main__":  # pragma: no cover - manual use: python sitegen_dense.py DIR N
    import time

    t0 = time.perf_counter()
    info = build_site(Path(sys.argv[1]), int(sys.argv[2]), force=True)
    print(info, f"{time.perf_counter() - t0:.1f}s", file=sys.stderr)
