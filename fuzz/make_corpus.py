"""Write the seed corpus fuzz/corpus/: small hostile constructs and cuts of real pages.

    python fuzz/make_corpus.py [PAGES_DIR]    # default: ../shared/corpus/pages

Each seed is a fuzz input (`fuzz_extract.header` + document). The hostile seeds are made here,
one construct each, so that the fuzzer starts from every state the extractors have (foreign
content, frameset, script escapes, entities, srcset, <base>, <meta charset>, CDATA, long
attributes...). The page seeds are two 3 KB cuts of real pages: the head (charset, <base>,
<link>) and the window with the most ``<a`` tags. The output is deterministic, and committed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fuzz_extract import ENCODINGS, header

HERE = Path(__file__).resolve().parent
OUT = HERE / "corpus"
CUT = 3000
PAGES_PER_KIND = 8  # aeb-, rdb-, traf- pages: 8 of each, the first by name

UTF8 = ENCODINGS.index("utf-8")
CP1252 = ENCODINGS.index("windows-1252")
SJIS = ENCODINGS.index("shift_jis")
U16LE = ENCODINGS.index("utf-16le")
BOGUS = ENCODINGS.index("x-no-such-charset")
JIS = ENCODINGS.index("iso-2022-jp")

# name: (document, header); header defaults to links, no charset, first base, whole+1-byte.
HOSTILE: dict[str, tuple[bytes, bytes]] = {
    "svg-deep-unmatched": (
        b"<svg>" + b"<g>" * 1030 + b"</x>" * 400 + b"<a href=/deep></a></svg><a href=/after>",
        header(mode=1, exp=4),
    ),
    "math-integration": (
        b"<math><mi><a href=/mi></mi><annotation-xml encoding=text/html><a href=/ax>"
        b"</annotation-xml><mtext><svg><a href=/s></svg></mtext></math><a href=/m>",
        header(),
    ),
    "svg-breakout": (
        b"<svg><g><p><a href=/after-breakout><svg><font color=red><a href=/f></svg>"
        b"<svg><foreignObject><div><a href=/fo></div></foreignObject></svg>",
        header(link_set=1),
    ),
    "svg-long-names": (
        b"<svg><" + b"g" * 300 + b"><" + b"h" * 255 + b"></" + b"g" * 300 + b"><a href=/x>"
        b"</" + b"h" * 256 + b"></svg><a href=/y>",
        header(mode=2, exp=3, seed=7),
    ),
    "svg-cdata": (
        b"<svg><![CDATA[<a href=/no>]]><a href=/yes></svg><![CDATA[<a href=/html>]]>"
        b"<svg><![CDATA[ x ]<svg><![CDATA[]]",
        header(mode=1, exp=0),
    ),
    "frameset": (
        b"<html><head><title>t</title></head><frameset rows=*><frame src=/f1>"
        b"<a href=/no><noframes><a href=/nf></noframes><iframe src=/i></frameset>"
        b"<frame src=/f2>",
        header(),
    ),
    "frameset-ok": (
        b"<body>  <a href=/body><frameset><frame src=/f></frameset>"
        b"<p>text<frameset><frame src=/g></frameset><a href=/late>",
        header(link_set=1, mode=2, exp=1),
    ),
    "script-escapes": (
        b"<script><!--<script></script><a href=/in></script>--></script><a href=/out>"
        b"<script><!-- </script ><a href=/o2><script>-->--!><a href=/o3></script >",
        header(),
    ),
    "rawtext": (
        b"<title><a href=/no></title ><textarea></textarea x><a href=/yes>"
        b"<style><a href=/s></style><xmp><a href=/x></xmp><noembed><a href=/e></noembed>"
        b"<noscript><a href=/ns></noscript><noframes><a href=/nf></noframes>"
        b"<plaintext><a href=/never>",
        header(mode=1, exp=1),
    ),
    "comments": (
        b"<!--><a href=/1><!---><a href=/2><!-- --!><a href=/3><!----!-><a href=/no>-->"
        b"<!x><a href=/4><?php <a href=/5> ?><!DOCTYPE html><a href=/6></x y=<a href=/7>>",
        header(mode=1, exp=0),
    ),
    "entities": (
        b"<a href='/a?x=1&amp;y=2&copy=3&copy;&#13;&#x0;&#1114112;&#xD800;&notin&notit;"
        b"&#128;&#x9F;&amp'>e</a><a href=&#x2F;&#47;host&#x2e;example/>h</a>",
        header(encoding=UTF8),
    ),
    "srcset": (
        # 4000 digits: under int()'s 4300-digit limit (issue 13's 5000 is in fuzz/regressions).
        b'<img srcset="a.png 1x, b.png 2x,c.png 100w ,, d.png ' + b"9" * 4000 + b'w, e.png 1.5x">'
        b"<img srcset='data:image/png;base64,AAA= 1x, f.png'><source srcset=g.png>",
        header(link_set=1, mode=3, exp=5, seed=3),
    ),
    "base": (
        b"<a href=x0><base href=/b/><a href=x><base href=//other/><a href=y>"
        b"<base href='http://a b/'><a href=z>",
        header(base=2),
    ),
    "base-invalid-first": (
        b"<base href='https://:99999/'><a href=q><base href=/c/><a href=r>",
        header(base=5),
    ),
    "invalid-hrefs": (
        b"<a href='http://a b/'><a href='https://:99999/'><a href='//'><a href=''>"
        b"<a href='http://[::1'><a href='javascript:void(0)'><a href='mailto:x@y'><a href>",
        header(),
    ),
    "meta-charset-sjis": (
        b"<meta charset=shift_jis><a href='/\x83e\x83X\x83g?q=\x83e\x83X\x83g'>",
        header(),
    ),
    "meta-charset-late": (
        b"<p>" + b"x" * 1100 + b"<meta charset=utf-8><a href='/m\xc3\xbcnchen'>",
        header(mode=2, exp=6),
    ),
    "meta-http-equiv": (
        b"<meta http-equiv=content-type content='text/html; charset=hex'>"
        b"<a href='/\xe9'><meta http-equiv=refresh content='0; url=\"/r\"'>",
        header(),
    ),
    "meta-utf16-label": (b"<meta charset=utf-16le><a href='/\xe9'>", header()),
    "undeclared-utf8": (
        b"<a href='https://m\xc3\xbcnchen.example/'><a href='/\xe2\x82\xac?q=\xc3\xa9'>",
        header(),
    ),
    "undeclared-utf8-late": (
        b"<p>" + b"y" * 1100 + b"<a href='https://m\xc3\xbcnchen.example/'>",
        header(mode=1, exp=7),
    ),
    "bom-utf8": (b"\xef\xbb\xbf<a href='/\xc3\xbc'>", header(encoding=CP1252)),
    "bom-utf16le": ("\ufeff<a href='/ü'>".encode("utf-16le"), header()),
    "utf16le-transport": (
        "<a href='/é?q=é'><base href=/x/>".encode("utf-16le"),
        header(encoding=U16LE),
    ),
    "sjis-transport": (b"<a href='/\x83e?q=\x83e'>", header(encoding=SJIS)),
    "bogus-transport": (b"<a href='/\xe9'>", header(encoding=BOGUS)),
    "iso2022jp": (b"<a href='/\x1b$B%F%9%H\x1b(B?q=\x1b$B%F\x1b(B'>", header(encoding=JIS)),
    "huge-attribute": (
        b'<a title="' + b"t" * 3000 + b'" href="/' + b"h" * 4000 + b'">x</a><a href=/next>',
        header(max_token=6, mode=2, exp=7),
    ),
    "many-attributes": (
        b"<a " + b" ".join(b"a%d=1" % i for i in range(600)) + b" href=/x href=/dup rel=nofollow>",
        header(mode=3, exp=2),
    ),
    "nofollow": (
        b"<meta name=robots content='noindex, NoFollow'><a rel='noopener nofollow' href=/n>"
        b"<area rel=nofollow href=/a><form action=/f rel=nofollow>",
        header(link_set=1),
    ),
    "null-cr": (b"<a\0href=/x><a href=/y\r\nz><a h\0ref=/q><a href='\r'>", header()),
    "unclosed-at-eof": (b"<a href='/x", header(mode=1, exp=0)),
    "resources": (
        b"<link rel=stylesheet href=s.css><script src=j.js></script><img src=i.png>"
        b"<video src=v poster=p><track src=t><embed src=e><object data=o><input src=in>"
        b"<button formaction=b><form action=f><iframe src=if><frame src=fr>",
        header(link_set=1, base=4),
    ),
    # Positions and ids (issue 12): every kind of line break, split by the chunking; multi-byte
    # and invalid characters before tags; ids in HTML, svg and template content.
    "where-breaks": (
        b"x\r\n\r<a href=/1 id=a>\n\t\xc3\xa9\xe6\x97\xa5<a name=n href=/2>\xe6\x97<a href=/3>"
        b"\r\r\n<img srcset='/4 1x,\r\n/5 2x'><svg id=s><a href=/6></svg>"
        b"<template id=t><p id=in></template>\r",
        header(link_set=1, encoding=UTF8, mode=1, exp=1, seed=3),
    ),
    "where-sjis": (
        "日本\r\n語<a href=/j id=日>\r語<meta http-equiv=refresh content='0;url=/r'>".encode(
            "shift_jis"
        ),
        header(encoding=SJIS, mode=2, exp=0, seed=5),
    ),
    "template-select": (
        b"<template><a href=/t></template><select><a href=/s></select><table><a href=/tb>",
        header(),
    ),
    # seed bit 11 (byte 3, bit 3): the intake bound to a seen set with the host scope on
    "intake-external": (
        b"<a href=//other.example/a><a href=http://site2.example/b?q#f><a href=/in>"
        b"<a href=//other.example/a><a href='HTTP://OTHER.example:80/a#x'><a href=//[::1]/v6>"
        b"<a href='http://xn--mnchen-3ya.example/'><a href='//m\xc3\xbcnchen.example/u'>",
        header(mode=1, exp=2, seed=0x0801),
    ),
}


def _page_seeds(pages: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    files = sorted(pages.glob("*.html"))
    for kind in ("aeb-", "rdb-", "traf-"):
        for i, path in enumerate([p for p in files if p.name.startswith(kind)][:PAGES_PER_KIND]):
            data = path.read_bytes()
            stem = path.stem
            # Encodings: mostly none (the page's own meta decides), some declared.
            enc = (0, 0, UTF8, CP1252)[i % 4]
            out[f"page-{stem}-head"] = (
                header(encoding=enc, base=i % 8, mode=i % 4, exp=i % 8) + (data[:CUT])
            )
            best, at = -1, 0
            for start in range(0, max(1, len(data) - CUT), 512):
                n = data.count(b"<a ", start, start + CUT)
                if n > best:
                    best, at = n, start
            out[f"page-{stem}-links"] = (
                header(link_set=i % 2, encoding=enc, mode=(i + 1) % 4, exp=(i + 3) % 8, seed=i)
                + data[at : at + CUT]
            )
    return out


def main(argv: list[str]) -> None:
    pages = Path(argv[1]) if len(argv) > 1 else HERE.parents[1] / "shared" / "corpus" / "pages"
    OUT.mkdir(exist_ok=True)
    seeds = {f"hostile-{k}": h + doc for k, (doc, h) in HOSTILE.items()}
    seeds.update(_page_seeds(pages))
    for name, data in seeds.items():
        (OUT / name).write_bytes(data)
    print(f"make_corpus: {len(seeds)} seeds in {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
