"""Fidelity of the link extractor against a DOM: html5lib-tests trees and headless Chromium.

The extractor does not build a tree; the question is whether the links it reports are the
links a spec-compliant tree holds. Each measurement compares, per case, the multiset of
``(tag, attr, raw)`` that each implementation reports with the one read from a DOM
(method and figures: benchmarks/FIDELITY.md):

* ``--html5lib-tests DIR``: the expected trees of html5lib-tests' tree-construction ``.dat``
  files (``#document-fragment`` and ``#script-on`` cases are skipped: the extractor parses
  whole documents with scripting off). Get DIR (and the tokenizer tests) with
  ``git -C CLONE archive HEAD tree-construction tokenizer | tar -x -C /tmp/h5t`` from a
  clone of html5lib/html5lib-tests; nothing of it is committed here.
* ``--chromium``: documents parsed by a real headless Chromium (``/usr/bin/chromium``,
  DevTools protocol, 127.0.0.1 only) with ``new DOMParser().parseFromString(html,
  "text/html")`` (scripting off, as our ``noscript`` handling assumes): the html5lib-tests
  tree-construction inputs with probe links at token boundaries (with ``--html5lib-tests``),
  the tokenizer inputs as ``<a href>`` values and with probes (``--html5lib-tokenizer DIR``),
  and ``--generate N`` documents of each of our own families.
* ``--pages DIR``: real pages (``*.html``), the same text on both sides; ``--served`` also loads
  their bytes from a local server, so the browser's encoding sniffing is part of it.
* ``--urls``: ``Link.url`` against Chromium's ``new URL(raw, document base)``, with the URL
  standard's answer (Ada) telling Chromium's departures from ours.
* ``--try HTML...``: one input, Chromium's links and ours.

What counts as the DOM's links: HTML-namespace elements of the link set (``a``/``area`` href,
``frame``/``iframe`` src, meta refresh ``content`` with ``http-equiv=refresh``; for
``resources`` also img/script/link/source/... as ``crawler.extract._html.LINK_SETS`` says),
template contents included (we report them). ``srcset`` and the refresh ``content`` are split
with our own ``parse_srcset``/``refresh_url``: this measures the tree, not those parsers. An
``<a href>`` in SVG/MathML that we report is ``forgiven``; the same multiset in another order
(foster parenting) is ``order``; more copies of an ``<a>`` in the DOM than the source has
values (the adoption agency clones it) is ``clone``: none of them is a failure.

Usage::

    python benchmarks/fidelity.py --html5lib-tests /tmp/h5t/tree-construction
    python benchmarks/fidelity.py --chromium --generate 2500 --html5lib-tests DIR \
        --html5lib-tokenizer DIR2 --urls --findings FILE
    python benchmarks/fidelity.py --pages ../shared/corpus/pages --served --urls
    python benchmarks/fidelity.py --chromium --generate 2500 \
        --write-cases tests/data/fidelity/cases.json \
        --write-deviations tests/data/fidelity/deviations.json

``--findings FILE`` writes the failing cases grouped by cause (`CAUSES`, with the shortest
input of each group) as Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ada_url
import aiohttp

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from crawler.extract import LinkExtractorC, LinkExtractorPy  # noqa: E402
from crawler.extract import charset as _charset  # noqa: E402
from crawler.extract._html import LINK_SETS, parse_srcset, refresh_url  # noqa: E402

BASE = "https://example.org/dir/page.html"
IMPLS: dict[str, Any] = {
    name: cls for name, cls in (("py", LinkExtractorPy), ("c", LinkExtractorC)) if cls
}
Entry = tuple[str, str, str]  # (tag, attr, raw)

# --- the DOM side ---------------------------------------------------------------------------


def dom_links(
    elements: Iterable[tuple[str, dict[str, str]]], link_set: str = "links"
) -> list[Entry]:
    """The links of HTML-namespace elements (tree order) as the extractor should report them."""
    spec = LINK_SETS[link_set]
    out: list[Entry] = []
    for tag, attrs in elements:
        if tag == "meta":
            equiv = attrs.get("http-equiv")
            content = attrs.get("content")
            if equiv is not None and content is not None and equiv.lower() == "refresh":
                raw = refresh_url(content)
                if raw is not None:
                    out.append(("meta", "content", raw))
            continue
        for a in spec.get(tag, ()):
            v = attrs.get(a)
            if v is None:
                continue
            if a == "srcset":
                out.extend((tag, a, u) for u in parse_srcset(v))
            else:
                out.append((tag, a, v))
    return out


def extracted(cls: Any, data: bytes, link_set: str = "links", chunk: int = 0) -> list[Entry]:
    """What one implementation reports for a whole document (optionally fed in chunks)."""
    ex = cls(BASE, "utf-8", link_set=link_set)
    links = []
    if chunk:
        for i in range(0, len(data), chunk):
            links += ex.feed(data[i : i + chunk])
    else:
        links += ex.feed(data)
    links += ex.close()
    return [(lk.tag, lk.attr, lk.raw) for lk in links]


def _occurrences(source: str, value: str, attr: str = "") -> int:
    """How often ``value`` stands in ``source`` as the value of ``attr`` (else as a whole
    word), an upper bound of the tags that can carry it."""
    v = re.escape(value)
    if attr:
        pat = rf"(?i:(?<![\w-]){re.escape(attr)})[\t\n\f\r ]*=[\t\n\f\r ]*"
        if value:
            pat += rf"[\"']?{v}(?=[\"'\t\n\f\r />]|$)"
        else:
            pat += r"(?:\"\"|'')"
        n = len(re.findall(pat, source))
        if n:
            return n
    if not value:
        return source.count('=""') + source.count("=''")
    tail = v + r"(?![A-Za-z0-9])"
    n = len(re.findall(r"=[\t\n\f\r ]*[\"']?" + tail, source))
    return n or len(re.findall(r"(?<![A-Za-z0-9])" + tail, source))


@dataclass
class Verdict:
    status: str  # "pass", "order", "forgiven", "clone", "fail"
    missing: list[Entry] = field(default_factory=list)
    extra: list[Entry] = field(default_factory=list)


def compare(
    got: Sequence[Entry],
    expected: Sequence[Entry],
    foreign: Sequence[str],
    source: str = "",
    a_sources: dict[str, int] | None = None,
) -> Verdict:
    """Multiset comparison; extra ``a href`` values of SVG/MathML ``<a>`` are forgiven.

    A DOM entry missing from ``got`` that ``got`` has as often as the value occurs in the
    source is a clone made by the tree builder (the adoption agency and the reconstruction of
    active formatting elements copy ``<a>``): status ``clone``, not a failure. ``a_sources``
    (value -> number of source ``<a>`` tags, from `_settle_clones`) replaces the count of the
    value in the source where it is known.
    """
    g, e = Counter(got), Counter(expected)
    missing = list((e - g).elements())
    occ = {
        t: a_sources[t[2]]
        if a_sources is not None and t[0] == "a" and t[2] in a_sources
        else _occurrences(source, t[2], t[1])
        for t in set(missing)
        if g[t]
    }
    cloned = [t for t in missing if g[t] and g[t] >= occ[t]]
    missing = [t for t in missing if not (g[t] and g[t] >= occ[t])]
    extra = list((g - e).elements())
    fc = Counter(foreign)
    left: list[Entry] = []
    dropped: Counter[Entry] = Counter()
    for t in extra:
        if t[0] == "a" and t[1] == "href" and fc[t[2]] > 0:
            fc[t[2]] -= 1
            dropped[t] += 1
        else:
            left.append(t)
    if missing or left:
        return Verdict("fail", missing, left)
    if cloned:
        return Verdict("clone")
    rest = []
    for t in got:
        if dropped[t] > 0:
            dropped[t] -= 1
        else:
            rest.append(t)
    if rest != list(expected):
        return Verdict("order")
    return Verdict("forgiven" if len(rest) != len(got) else "pass")


# --- html5lib-tests -------------------------------------------------------------------------


@dataclass
class H5Case:
    file: str
    index: int
    data: str
    document: list[str]
    fragment: str | None = None
    script: str | None = None  # "on", "off" or None (either)


def parse_dat(path: Path) -> list[H5Case]:
    """The cases of one tree-construction ``.dat`` file."""
    text = path.read_bytes().decode("utf-8", "surrogateescape")
    cases: list[H5Case] = []
    heading_re = re.compile(
        r"#(data|errors|new-errors|document|document-fragment|script-on|script-off)$"
    )
    sections: dict[str, list[str]] | None = None
    cur = ""
    lines = text.split("\n")

    def finish() -> None:
        if sections is None:
            return
        data = "\n".join(sections.get("data", []))
        doc = sections.get("document", [])
        while doc and doc[-1] == "":
            doc.pop()
        frag = sections.get("document-fragment")
        script = "on" if "script-on" in sections else "off" if "script-off" in sections else None
        cases.append(H5Case(path.name, len(cases), data, doc, frag[0] if frag else None, script))

    for line in lines:
        m = heading_re.match(line)
        if m and (m.group(1) != "data" or sections is None or cur in ("document", "errors")):
            if m.group(1) == "data":
                finish()
                sections = {}
            cur = m.group(1)
            assert sections is not None
            sections.setdefault(cur, [])
            continue
        if sections is not None:
            sections[cur].append(line)
    finish()
    return cases


_ELEM = re.compile(r"<(?:(svg|math) )?([^ >]+)>$")
_ATTR = re.compile(r"(?:(xlink|xml|xmlns) )?([^ ]+?)=\"(.*)\"$", re.S)


def tree_elements(document: list[str]) -> tuple[list[tuple[str, dict[str, str]]], list[str]]:
    """HTML elements with their attributes in tree order, and the hrefs of foreign ``<a>``."""
    nodes: list[tuple[int, str]] = []
    for line in document:
        if line.startswith("| "):
            body = line[2:]
            depth = (len(body) - len(body.lstrip(" "))) // 2
            nodes.append((depth, body.lstrip(" ")))
        elif nodes:
            d, b = nodes[-1]
            nodes[-1] = (d, b + "\n" + line)
    elements: list[tuple[str, dict[str, str]]] = []
    foreign: list[str] = []
    cur: tuple[int, str | None, str, dict[str, str]] | None = None  # depth, ns, name, attrs

    def flush() -> None:
        if cur is None:
            return
        _, ns, name, attrs = cur
        if ns is None:
            elements.append((name, attrs))
        elif name == "a":
            for k in ("href", "xlink:href"):
                if k in attrs:
                    foreign.append(attrs[k])

    for depth, body in nodes:
        if cur is not None and depth == cur[0] + 1 and not body.startswith(('"', "<")):
            m = _ATTR.match(body)
            if m:
                name = f"{m.group(1)}:{m.group(2)}" if m.group(1) else m.group(2)
                cur[3].setdefault(name, m.group(3))
                continue
        m = _ELEM.match(body) if body.startswith("<") and not body.startswith("<!") else None
        if m:
            flush()
            cur = (depth, m.group(1), m.group(2), {})
        elif cur is not None and depth <= cur[0] + 1:
            # any other child (text, comment, content) ends the attribute block
            flush()
            cur = None
    flush()
    return elements, foreign


# --- Chromium over the DevTools protocol ----------------------------------------------------

_JS = r"""
(() => {
  const cases = JSON.parse(%s);
  const HTML = "http://www.w3.org/1999/xhtml";
  const parser = new DOMParser();
  const out = [];
  for (const html of cases) {
    const doc = parser.parseFromString(html, "text/html");
    const els = [], foreign = [];
    let baseHref = null;
    const walk = (node, inTemplate) => {
      for (let c = node.firstChild; c; c = c.nextSibling) {
        if (c.nodeType !== 1) continue;
        if (c.namespaceURI === HTML) {
          const attrs = {};
          for (const a of c.attributes) if (!a.namespaceURI) attrs[a.name] = a.value;
          els.push([c.localName, attrs]);
          if (c.localName === "base" && baseHref === null && !inTemplate && "href" in attrs) {
            baseHref = attrs.href;
          }
          if (c.localName === "template") walk(c.content, true);
        } else if (c.localName === "a") {
          for (const a of c.attributes) {
            if (a.localName === "href") foreign.push(a.value);
          }
        }
        walk(c, inTemplate);
      }
    };
    walk(doc, false);
    out.push([els, foreign, baseHref]);
  }
  return JSON.stringify(out);
})()
"""


class Chromium:
    """A headless Chromium reached over its DevTools websocket on 127.0.0.1."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or shutil.which("chromium") or "/usr/bin/chromium"
        self.version = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._ws: Any = None
        self._session: Any = None
        self._sid = ""
        self._id = 0
        self._tmp = ""
        self._nav_ready = False

    async def __aenter__(self) -> Chromium:
        self._tmp = tempfile.mkdtemp(prefix="fidelity-chromium-")
        args = [
            self.binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--no-default-browser-check",
            # No traffic but 127.0.0.1: no name is resolved, and every request that is not to
            # the loopback goes to a closed local port (a page's images, scripts, prefetches).
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--proxy-server=http://127.0.0.1:9",
            f"--user-data-dir={self._tmp}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
        ]
        # stderr to a file: a pipe nobody reads would fill and stall the browser
        self._err = open(Path(self._tmp) / "stderr.log", "w+b")  # noqa: SIM115
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._err)
        port_file = Path(self._tmp) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or len(port_file.read_text().split("\n")) < 2:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self._err.seek(0)
                err = self._err.read().decode(errors="replace")
                raise RuntimeError(f"chromium did not start: {err[-2000:]}")
            await asyncio.sleep(0.05)
        port, path = port_file.read_text().split("\n")[:2]
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        self.version = (await self._call("Browser.getVersion"))["product"]
        target = await self._call("Target.createTarget", url="about:blank")
        att = await self._call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        self._sid = att["sessionId"]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._err.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    async def _call(self, method: str, sid: str | None = None, **params: Any) -> Any:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if sid:
            msg["sessionId"] = sid
        await self._ws.send_str(json.dumps(msg))
        while True:
            reply = await self._ws.receive_json()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    async def navigate_dom(self, url: str, timeout: float = 30.0) -> Any:
        """Load ``url`` (scripts off) and return ``[characterSet, elements, foreign_hrefs]``.

        The document is the browser's own parse of the bytes the server sent: its encoding
        sniffing included, which DOMParser (a string in) cannot show.
        """
        if not self._nav_ready:
            await self._call("Page.enable", self._sid)
            await self._call("Emulation.setScriptExecutionDisabled", self._sid, value=True)
            self._nav_ready = True
        await self._call("Page.navigate", self._sid, url=url)
        deadline = time.monotonic() + timeout
        while True:
            res = await self._call(
                "Runtime.evaluate",
                self._sid,
                expression="[document.readyState, location.href]",
                returnByValue=True,
            )
            state, href = res["result"].get("value") or ["", ""]
            if state == "complete" and href == url:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url}: not loaded in {timeout}s ({state}, {href})")
            await asyncio.sleep(0.05)
        return await self._evaluate_json(_NAV_JS)

    async def _evaluate_json(self, expr: str) -> Any:
        """Run ``expr`` (which returns a JSON string) in the page; its value, decoded."""
        res = await self._call("Runtime.evaluate", self._sid, expression=expr, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(str(res["exceptionDetails"])[:2000])
        return json.loads(res["result"]["value"])

    async def _batched(self, template: str, items: Sequence[Any], batch: int) -> list[Any]:
        """``template % <items as a JSON string literal>``, ``batch`` items a call, results
        concatenated in order."""
        out: list[Any] = []
        for i in range(0, len(items), batch):
            chunk = list(items[i : i + batch])
            out.extend(await self._evaluate_json(template % json.dumps(json.dumps(chunk))))
        return out

    async def resolve(self, pairs: Sequence[tuple[str, str]], batch: int = 20000) -> list[Any]:
        """``new URL(raw, base)`` without its fragment (None when it throws), per pair."""
        return await self._batched(_RESOLVE_JS, pairs, batch)

    async def parse(self, htmls: Sequence[str], batch: int = 2000) -> list[Any]:
        """``[elements, foreign_hrefs]`` per document, as DOMParser builds it."""
        return await self._batched(_JS, htmls, batch)


# The walker of _JS over the loaded document itself, with its character set.
_NAV_JS = (
    _JS.replace("const cases = JSON.parse(%s);", "const cases = [null];")
    .replace('const doc = parser.parseFromString(html, "text/html");', "const doc = document;")
    .replace("out.push([els, foreign, baseHref]);", "out.push([doc.characterSet, els, foreign]);")
    .replace("return JSON.stringify(out);", "return JSON.stringify(out[0]);")
)

_RESOLVE_JS = r"""
(() => {
  const pairs = JSON.parse(%s);
  return JSON.stringify(pairs.map(([raw, base]) => {
    try { const u = new URL(raw, base); u.hash = ""; return u.href; } catch (e) { return null; }
  }));
})()
"""


def chromium_expected(parsed: Any, link_set: str) -> tuple[list[Entry], list[str]]:
    elements = [(tag, attrs) for tag, attrs in parsed[0]]
    return dom_links(elements, link_set), list(parsed[1])


# --- generated inputs -----------------------------------------------------------------------

_TOKEN = re.compile(r"<[^>]*>?|[^<]+", re.S)
PROBES = (
    "<a href=P{n}>",
    "<area href=P{n}>",
    "<iframe src=P{n}></iframe>",
    "<frame src=P{n}>",
    "<img src=P{n}>",
    '<meta http-equiv=refresh content="0;url=P{n}">',
    "<a href=P{n}>x</a>",
    "<form action=P{n}>",
    "<link href=P{n}>",
)


def probe_variants(html: str, rng: random.Random, per_case: int = 6) -> list[str]:
    """Copies of ``html`` with probe links inserted at token boundaries."""
    toks = _TOKEN.findall(html)
    bounds = list(range(len(toks) + 1))
    rng.shuffle(bounds)
    out = []
    for k, b in enumerate(sorted(bounds[:per_case])):
        probe = PROBES[(b + k + rng.randrange(len(PROBES))) % len(PROBES)].format(n=k)
        out.append("".join(toks[:b]) + probe + "".join(toks[b:]))
    # and one with a probe at every boundary (distinct values)
    if len(toks) < 40:
        parts = []
        for i, t in enumerate(toks):
            parts.append(PROBES[i % len(PROBES)].format(n=100 + i))
            parts.append(t)
        parts.append(PROBES[len(toks) % len(PROBES)].format(n=100 + len(toks)))
        out.append("".join(parts))
    return out


# Our own constructs (inspired by the kinds tree construction exercises; not copied).
# fmt: off
_FRAGS = [
    "<table>", "</table>", "<tr>", "<td>", "</td>", "<th>", "<tbody>", "<caption>", "<colgroup>",
    "<col>", "<select>", "</select>", "<option>", "<optgroup>", "<template>", "</template>",
    "<svg>", "</svg>", "<math>", "</math>", "<foreignObject>", "</foreignObject>", "<desc>",
    "<mi>", "<mtext>", "<annotation-xml encoding=text/html>", "<annotation-xml>", "<g>", "</g>",
    "<frameset>", "</frameset>", "<noframes>", "</noframes>", "<body>", "</body>", "<head>",
    "</head>", "<html>", "</html>", "<noscript>", "</noscript>", "<script>", "</script>",
    "<style>", "</style>", "<title>", "</title>", "<textarea>", "</textarea>", "<xmp>",
    "</xmp>", "<noembed>", "</noembed>", "<plaintext>", "<iframe>", "</iframe>", "<p>", "</p>",
    "<div>", "</div>", "<b>", "</b>", "<i>", "</i>", "<nobr>", "<font color=red>", "<font>",
    "</font>", "<ul><li>", "<dl><dt>", "<button>", "</button>", "<form>", "</form>", "<!--",
    "-->", "<!-- c -->", "<!--->", "<!>", "<![CDATA[", "]]>", "<?pi>", "<!DOCTYPE html>",
    "text", " ", "\n", "&amp;", "&", "<", ">", "</", "<br>", "</br>", "<hr>", "<img>", "<image>",
    "<input type=hidden>", "<input>", "<keygen>", "<object>", "</object>", "<marquee>",
    "<applet>", "<ruby><rb>", "<rt>", "<h1>", "</h1>", "<pre>", "\n\n", "<listing>", "<a>",
    "</a>", "<base href=/b/>", "<meta charset=utf-8>", "<svg><a href=S1>", "<math><a href=M1>",
    "<script><!--", "<script><!--<script>", "</script -->", "<desc><a href=D1>", "<mglyph>",
    "<malignmark>", "<frame>", "<hgroup>", "<search>", "<main>", "<menu>", "<details>",
    "<summary>", "<dialog>", "<center>", "<address>", "<article>", "<table><tr><td>",
    "<table><a href=T1>", "</td></tr></table>", "<select><a href=S2>", "<frameset><frame>",
    "<template><a href=TP>", "<noscript><a href=N1>", "<svg><foreignObject><a href=F1>",
    "<math><mtext><a href=MT>", "<svg><title><a href=ST>", "<isindex>", "<sarcasm>", "&lt;",
    "&#x26;", "<a href='q'>", "<a href=\"dq\">", "<a href=u v>", "<a href=x/>", "<a/href=sl>",
    "<a href = sp>", "<A HREF=UP>", "<a href=1 href=2>", "<a\nhref=nl>", "<a href=&amp;e>",
    "<image src=IM>", "<svg><image src=SI>", "<IMAGE SRC=IU>",
]
# fmt: on


_VALUE = re.compile(r"((?:href|src|action)\s*=\s*['\"]?)([A-Za-z0-9]+)", re.I)


def generate(n: int, seed: int = 13) -> list[str]:
    """``n`` random documents built from `_FRAGS`, each with probes inserted."""
    rng = random.Random(seed)
    docs: list[str] = []
    counter = 0

    def unique(m: re.Match[str]) -> str:
        nonlocal counter
        counter += 1
        return f"{m.group(1)}{m.group(2)}_{counter}"

    while len(docs) < n:
        k = rng.randint(2, 9)
        base = _VALUE.sub(unique, "".join(rng.choice(_FRAGS) for _ in range(k)))
        for v in probe_variants(base, rng, per_case=2)[:2]:
            docs.append(v)
    return docs[:n]


# Tokenizer-level family: odd markup around links, and attribute values whose DOM form
# depends on character references, NUL, CR and quoting.
# fmt: off
_VALUES = [
    "v", "&amp;", "&amp", "&ampx", "&amp=", "&amp;x", "&notin;", "&notit;", "&noti", "&not",
    "&lt", "&lt=", "&ltx", "&#0;", "&#x80;", "&#x9f;", "&#xD800;", "&#1114112;", "&#13;",
    "&#x0d;", "&#10;", "&#9;", "&#x20;", "&#65", "&#x41", "&#", "&#x", "&#xZ", "&;", "&Aacute",
    "&Aacute;", "&aacute", "&AMP;", "&AMP", "&nbsp", "&NotEqualTilde;", "\x00", "\r", "\r\n",
    "\n", "\t", " ", "\u00e9", "\u20ac", "\U0001f600", "'", '"', "=", "<", ">", "`", "/",
    "&#x110000;", "&#128512;", "&#x1F600;", "&#xFFFE;", "&#x0;", "&#127;", "&#x81;",
]
_SHAPES = [
    "<a href={q}{v}{q}>", "<a href = {q}{v}{q}>", "<a\nhref={q}{v}{q}>", "<a/href={q}{v}{q}>",
    "<a x href={q}{v}{q}>", "<a href={q}{v}{q} href=dup>", "<A HREF={q}{v}{q}>",
    "<a hReF={q}{v}{q}/>", "<area href={q}{v}{q}>", "<img src={q}{v}{q}>",
    "<img srcset={q}{v} 1x, {v}2 2x{q}>", "<iframe src={q}{v}{q}></iframe>",
    "<link rel=x href={q}{v}{q}>", "<script src={q}{v}{q}></script>",
    "<meta http-equiv=refresh content={q}0; url={v}{q}>",
    "<meta http-equiv=Refresh content={q}5;URL='{v}'{q}>", "<form action={q}{v}{q}>",
    "<embed src={q}{v}{q}>", "<object data={q}{v}{q}></object>", "<video poster={q}{v}{q}>",
    "<input type=image src={q}{v}{q}>", "<button formaction={q}{v}{q}>",
    "<source srcset={q}{v}{q}>", "<a href{q}={v}{q}>", "<a =href={q}{v}{q}>",
    "<a href={q}{v}{q}\x00>", "<a\x00href={q}{v}{q}>", "<a href={q}{v}",
]
_AROUND = [
    "", "", "", "<!--x-->", "<!-->", "<!--->", "<!-- --!>", "<!--!-->", "<!--<!-->", "<?xml x>",
    "<!DOCTYPE html>", "<!DOCTYPE html [<!-- >]>", "<![CDATA[x]]>", "</a href=end>", "</ x>",
    "<script><!--<script></script>", "<script><!--</script>", "<script>a<!--b-->c</script>",
    "<style></stylex></style>", "</style >", "<title>&lt;</title>", "<textarea>x</textarea>",
    "<noembed>x</noembed>", "<noframes>x</noframes>", "<xmp>x</xmp>", "<noscript>",
    "</noscript>", "<head><noscript>", "<svg>", "</svg>", "<math>", "<math><mtext>",
    "<svg><desc>", "<svg><foreignObject>", "<math><annotation-xml encoding='TEXT/HTML'>",
    "<svg><![CDATA[", "]]>", "<table>", "<select>", "<template>", "</template>", "<p>", "<b>",
    "<a>", "</a>", "\x00", "\r\n", "&", "<", "</", "<a", "<a ", "<a href", "<a href=",
    "<base href=/b/>", "<body>", "</body>", "</html>", "<plaintext>", "<iframe>", "</iframe>",
]
# fmt: on


def generate_tokens(n: int, seed: int = 13) -> list[str]:
    """``n`` documents: a link of some shape and value between odd constructs."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        parts = []
        for k in range(rng.randint(1, 4)):
            parts.append(rng.choice(_AROUND))
            v = f"V{i}_{k}" + "".join(rng.choice(_VALUES) for _ in range(rng.randint(0, 3)))
            shape = rng.choice(_SHAPES)
            q = rng.choice(["", '"', "'"])
            if q:
                v = v.replace(q, "")
            elif any(ch in v for ch in " \t\n\r>"):
                q = '"'
                v = v.replace('"', "")
            parts.append(shape.format(q=q, v=v))
        parts.append(rng.choice(_AROUND))
        docs.append("".join(parts))
    return docs


# URL family: values whose resolution is the question (host parsing, ports, IDNA, IPv4,
# percent-encoding sets, backslashes, schemes, whitespace), resolved against the base.
# fmt: off
_URLS = [
    "http://a b/", "https://:99999/", "//", "///x", "\\\\host\\p", "/\\x", "HTTP://EXAMPLE.COM/%7e",
    "http://m\u00fcnchen.example/", "http://xn--mnchen-3ya.example/", "http://[::1]/",
    "http://[::ffff:1.2.3.4]/", "http://0x7f.1/", "http://127.1/", "http://1.2.3.4.5/",
    "http://256.0.0.1/", "http://999999999/", "http://a..b/", "http://xn--/", "http://%41.com/",
    "http://a%2eb/", "http://a.com:/", "http://a:80/", "https://a:443/", "https://a:080/",
    "ftp://a:21/", "javascript:x", "mailto:x@y", "data:,x", "file:///x", "file://h/x", "  /lead  ",
    "\t/tab\n/x", "http://a/b/../c/./d", "/a/%2e%2E/b", "?q=\u00e9", "?q=%zz", "#frag", "",
    " ", "x y", "a<b>c", 'a"b', "a`b", "a{b}", "a|b", "a^b", "http://a/\u00e9?\u00e9#\u00e9",
    "http://user:pa ss@a/", "http://@a/", "http://a@b@c/", "http://a:b@c:1/", "https://EXAMPLE.org",
    "http://a/%", "http://a/%2", "http://ex ample/", "http://a\u3002b/", "http://\uff21.com/",
    "http://a.b./", "http://.a/", "sc://\u00e9/", "sc:/x/../y", "urn:x:y", "blob:http://a/u",
    "http:/a", "http:a", "https:a/b", "HTTPS:\\\\a", "../../../../x", "./", ".", "..", "?",
    "http://a/?x=\u00a0", "http://a/\x00b", "http://[1::2::3]/", "http://[::1]:65536/",
    "http://a/\U0001f600", "http://\u2603.com/", "http://\u00df.de/", "http://faß.de/",
    "http://a.com/x?y#z#w", "ws://a/", "wss://a:443/", "http://0/", "http://0x100000000/",
    "http://4294967295/", "http://4294967296/", "http://1.2.3.09/", "http://a/\\b",
]
# fmt: on


# The minimal inputs of every cause this harness found (benchmarks/FIDELITY.md), fixed or
# not: a fixed one stays fixed, an open one stays listed in deviations.json.
# fmt: off
MINIMAL = [
    "<frame src=F0><textarea><p></textarea>", "<p><frame src=F1>", "<frameset><frame src=F2>",
    "<a href=A0><frameset><div>", "<frameset><link href=L0>",
    '<frameset></div><meta http-equiv=refresh content="0;url=M0">',
    "<frameset><title><frame src=F3>", "<frameset><textarea><frame src=F4>",
    "<frameset><script><frame src=F5>", "<frameset><plaintext><frame src=F6>",
    "<frameset><noframes><frame src=X></noframes><frame src=F7>",
    "<frameset></frameset><frame src=F8>",
    "<frameset><frameset></frameset><frame src=F9></frameset><frame src=F10>",
    "<frameset><frame src=F11></frameset></html><frame src=F12>",
    "<svg></svg><frameset><frame src=F13>", "<p>x<frameset><frame src=F14>",
    "<form><table><form action=FA0>", "<form><b><form action=FA1>",
    "<form></form><form action=FA2>", "<form><div></form><form action=FA3>",
    "<table><form><tr><td><form action=FA4>", "<form><template><form action=FA5>",
    "<template><form><form action=FA6></template>", "<form><template></template><form action=FA7>",
    "<div><svg></div><iframe src=I0></iframe>", "<div><svg><path></div>a<link href=L1>",
    "text<object><svg>]]></object><area href=R0>",
    "<a href=A1><svg><a href='A2'/></a><script src=S0></script>",
    "<math><mi><a href=A3>x</mi><area href=R1>",
    "<svg><title><a href=A4><body></title><area href=R2>",
    "<svg><foreignObject><a href=A5><![CDATA[<img><div><a href=A6>",
    "<math><mtext><a href=A7><object><malignmark><style><svg><a href=A8>",
    "<div><svg></div><link href=/>", "<div><svg></div><script><a href=A9>",
    "<template><col><a href=A10>", "<template><template><col><link href=L2>",
    "<body><template><col></div><iframe src=I1></iframe>", "<image src=IM0>",
    "<IMAGE SRC=IM1>", "<svg><image src=IM2></svg>", "<a href=A11&#13;>",
    "<a href='A12&#x0d;\r\n'>",
    "<select><button><selectedcontent><area href=R3></button><option>X",
    ']]><a href="A13&lt=&notin;">', '<a href="A14&lt=&notin;">',
    "<svg></p><a href=A15>", "<math><mi></p><a href=A16>", "<p><svg></p><iframe src=I2></iframe>",
    "<table><tr><td><svg><desc><a href=A17></td><a href=A18>",
    "<head><noscript><link href=L3><a href=A19></noscript>",
    "<select><option><a href=A20>x</a><img src=IM3></select>",
]
# fmt: on


def generate_urls(n: int, seed: int = 13) -> list[str]:
    """``n`` documents with one to three links of `_URLS` values (sometimes after a base)."""
    rng = random.Random(seed)
    docs = []
    shapes = [
        '<a href="{v}">',
        "<img src='{v}'>",
        '<iframe src="{v}"></iframe>',
        '<img srcset="{v} 1x">',
        '<meta http-equiv=refresh content="0; url={v}">',
    ]
    for _ in range(n):
        parts = []
        if rng.random() < 0.3:
            base = rng.choice(
                ["/b/", "http://base.example/x/y", "//o.example/", "https://a b/", "data:,x"]
            )
            parts.append(f'<base href="{base}">')
        for _ in range(rng.randint(1, 3)):
            v = rng.choice(_URLS)
            q = "'" if "'" not in v else '"'
            shape = rng.choice(shapes)
            if "'" in v:
                shape = shape.replace("'", '"')
            if '"' in v:
                shape = shape.replace('"', "'")
            if q and v.count('"') and v.count("'"):
                continue
            parts.append(shape.format(v=v.replace("&", "&amp;")))
        docs.append("".join(parts))
    return docs


# --- running --------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    data: str
    expected: list[Entry]
    foreign: list[str]
    got: dict[str, list[Entry]]
    verdicts: dict[str, Verdict]
    a_sources: dict[str, int] | None = None


CHUNK = 0  # feed the extractor in chunks of this many bytes (0: whole); --chunk sets it


def run_case(
    name: str, data: str, expected: list[Entry], foreign: list[str], link_set: str
) -> Result:
    raw = data.encode("utf-8", "surrogateescape")
    got, verdicts = {}, {}
    for impl, cls in IMPLS.items():
        try:
            g = extracted(cls, raw, link_set, CHUNK)
        except Exception as e:  # a raise is a failure of its own kind
            g = [("!raise", type(e).__name__, str(e)[:80])]
        got[impl] = g
        verdicts[impl] = compare(g, expected, foreign, data)
    return Result(name, data, expected, foreign, got, verdicts)


_MARKERS = [
    ("plaintext", r"<plaintext"),
    ("template", r"<template"),
    ("select", r"<select"),
    ("svg/math", r"<(?:svg|math)"),
    ("table", r"<(?:table|tr|td|th|tbody|caption|col)"),
    ("noscript", r"<noscript"),
    ("script", r"<script"),
    ("rawtext", r"<(?:style|xmp|iframe|noembed|noframes|title|textarea)"),
    ("comment", r"<!--"),
    ("cdata", r"<!\[cdata\["),
    ("nul", "\x00"),
    ("charref", r"&"),
]


# The cause keys of `causes`, as the findings and tests/test_fidelity.py name them.
CAUSES = {
    "chromium-value": "Chromium's attribute value differs from html5lib's and Lexbor's, which "
    "agree with ours (e.g. ']]><a href=\"V&lt=&notin;\">' gives V<=∉ in Chromium 156, "
    "V&lt=∉ elsewhere, as the standard's legacy rule for attributes says)",
    "image-tag": 'an <image> start tag in HTML content: the tree builder renames it "img"',
    "selectedcontent": "<selectedcontent> in a customizable <select>: the browser replaces "
    "its children with a clone of the selected <option>'s (a DOM mutation after parsing)",
    "charref-cr": "&#13; (or &#x0d;) in an attribute value: the DOM keeps U+000D (newlines are "
    "normalised in the input stream, before character references); we turn it into U+000A",
    "frameset": "a frameset document: after a <frameset> takes effect the tree builder drops "
    "everything but frameset/frame/noframes, and a frameset-ok <frameset> removes the body",
    "frame-outside-frameset": "<frame> outside a frameset: every insertion mode but "
    '"in frameset" ignores the start tag',
    "nested-form": "nested <form>: a form start tag while the form element pointer is set "
    "is ignored, unless a <template> is open (then it is inserted, and sets no pointer)",
    "template-col": "<template> whose first element (after head elements) is <col>: "
    '"in column group" mode ignores everything else until </template>',
    "foreign": "svg/math: an HTML end tag that closes the foreign subtree (or an integration "
    "point's end tag ignored while an HTML element is open in it); the extractor tracks no "
    "HTML elements",
}


# A template whose first element that is not a head element is <col>.
_TEMPLATE_COL = (
    r"<template[^>]*>(?:[\s]|<!--.*?-->|</[^>]*>|"
    r"<(?:link|meta|base|basefont|bgsound)[^>]*>)*<col"
)


def _before(low: str, value: str, pattern: str) -> bool:
    """Whether ``pattern`` occurs in the source before the (first) tag carrying ``value``."""
    m = re.search(r"(?<![a-z0-9])" + re.escape(value.lower()) + r"(?![a-z0-9])", low)
    end = m.start() if m else len(low)
    return re.search(pattern, low[:end]) is not None


def _others_agree(data: str, tag: str, attr: str, raw: str) -> bool:
    """Whether html5lib and Lexbor both give some ``tag`` the attribute value ``raw``."""
    import html5lib  # noqa: PLC0415 - a tie-breaker, only for differing values
    from selectolax.lexbor import LexborHTMLParser  # noqa: PLC0415

    doc = html5lib.parse(data, namespaceHTMLElements=False)
    h5 = {el.get(attr) for el in doc.iter(tag)}
    lex = {n.attributes.get(attr) for n in LexborHTMLParser(data).css(tag)}
    return raw in h5 and raw in lex


def causes(r: Result, impl: str) -> list[str]:
    """Coarse causes, one a differing entry: what differs, and the likely construct."""
    v = r.verdicts[impl]
    if any(t[0] == "!raise" for t in r.got[impl]):
        return ["raises"]
    low = r.data.lower()
    out = []

    # a value that differs only by U+000D kept from &#13; (the DOM) vs turned into U+000A
    def lf(x: str) -> str:
        return x.replace("\r", "").replace("\n", "")

    cr = {(t, a, lf(raw)) for t, a, raw in v.missing if "\r" in raw}
    cr_pairs = {(t, a, raw) for t, a, raw in v.extra if (t, a, lf(raw)) in cr}
    matched = {(t, a, lf(raw)) for t, a, raw in cr_pairs}
    cr_pairs |= {(t, a, raw) for t, a, raw in v.missing if (t, a, lf(raw)) in matched}
    # a value Chromium gives otherwise than two other parsers (html5lib, Lexbor), which agree
    # with ours: Chromium's to explain, not ours
    value_pairs = {(t, a) for t, a, _ in v.missing} & {(t, a) for t, a, _ in v.extra}
    odd = {
        e
        for e in v.extra
        if (e[0], e[1]) in value_pairs and _others_agree(r.data, e[0], e[1], e[2])
    }
    odd |= {m for m in v.missing if (m[0], m[1]) in {(t, a) for t, a, _ in odd}}
    for kind, items in (("missing", v.missing), ("extra", v.extra)):
        for tag, attr, raw in items:
            what = f"{kind} {tag}[{attr}]"
            if (tag, attr, raw) in odd:
                why = "chromium-value"
            elif (tag, attr, raw) in cr_pairs:
                why = "charref-cr"
            elif kind == "missing" and tag == "img" and re.search(r"<image[\s/>]", low):
                why = "image-tag"
            elif "<frameset" in low:
                why = "frameset"
            elif kind == "extra" and tag == "frame":
                why = "frame-outside-frameset"
            elif tag == "form" and _before(low, raw, r"<form[\s\S]*<form"):
                why = "nested-form"
            elif _before(low, raw, r"<selectedcontent"):
                why = "selectedcontent"
            elif _before(low, raw, _TEMPLATE_COL):
                why = "template-col"
            elif _before(low, raw, r"<(?:svg|math)"):
                why = "foreign"
            else:
                why = next((m for m, pat in _MARKERS if re.search(pat, low)), "other")
            out.append(f"{what} | {why}")
    return sorted(set(out))


def summarize(title: str, results: list[Result], per_file: bool = False) -> list[str]:
    lines = [f"### {title}", ""]
    for impl in IMPLS:
        c = Counter(r.verdicts[impl].status for r in results)
        n = len(results)
        ok = n - c["fail"]
        with_links = sum(1 for r in results if r.expected)
        lines.append(
            f"- `{impl}`: {ok}/{n} = {100 * ok / max(n, 1):.2f}% "
            f"(pass {c['pass']}, order {c['order']}, forgiven {c['forgiven']}, "
            f"clone {c['clone']}, fail {c['fail']}; {with_links} with links)"
        )
    if per_file:
        files: dict[str, list[Result]] = defaultdict(list)
        for r in results:
            files[r.name.split(":")[0]].append(r)
        lines.append("")
        lines.append("| file | cases | " + " | ".join(f"{i} fail" for i in IMPLS) + " |")
        lines.append("|---|---|" + "---|" * len(IMPLS))
        for f, rs in sorted(files.items()):
            fails = [sum(r.verdicts[i].status == "fail" for r in rs) for i in IMPLS]
            if any(fails):
                lines.append(f"| {f} | {len(rs)} | " + " | ".join(map(str, fails)) + " |")
    lines.append("")
    return lines


def findings(title: str, results: list[Result], limit: int = 80) -> list[str]:
    groups: dict[str, list[tuple[str, Result]]] = defaultdict(list)
    for r in results:
        for impl in IMPLS:
            if r.verdicts[impl].status == "fail":
                for c in causes(r, impl):
                    groups[c].append((impl, r))
    lines = [f"#### Failures: {title} ({len(groups)} groups)", ""]
    for key, items in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:limit]:
        impls = sorted({i for i, _ in items})
        ncases = len({id(r) for _, r in items})
        impl, r = min(items, key=lambda it: len(it[1].data))
        v = r.verdicts[impl]
        what, _, why = key.partition(" | ")
        if why in CAUSES:
            key = f"{what} | {why}: {CAUSES[why]}"
        lines.append(f"- **{key}** — {ncases} cases (impl {','.join(impls)}), e.g. `{r.name}`:")
        lines.append(f"  - input: `{json.dumps(r.data, ensure_ascii=False)[1:-1][:300]}`")
        lines.append(f"  - DOM: `{r.expected}`; missing `{v.missing}`; extra `{v.extra}`")
    lines.append("")
    return lines


def h5_results(directory: Path, link_set: str) -> tuple[list[Result], Counter[str], list[H5Case]]:
    results: list[Result] = []
    skipped: Counter[str] = Counter()
    used: list[H5Case] = []
    for path in sorted(directory.glob("*.dat")):
        for case in parse_dat(path):
            if case.fragment is not None:
                skipped["document-fragment"] += 1
                continue
            if case.script == "on":
                skipped["script-on"] += 1
                continue
            elements, foreign = tree_elements(case.document)
            expected = dom_links(elements, link_set)
            used.append(case)
            results.append(
                run_case(f"{case.file}:{case.index}", case.data, expected, foreign, link_set)
            )
    return results, skipped, used


def tokenizer_inputs(directory: Path, rng: random.Random) -> list[tuple[str, str]]:
    """Documents made from html5lib-tests tokenizer inputs (Data-state tests only): each input
    as the value of an ``<a href>`` (unquoted, double- and single-quoted), which exercises
    character references in attributes, and the input itself with probe links inserted."""
    out: list[tuple[str, str]] = []
    for path in sorted(directory.glob("*.test")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for i, t in enumerate(doc.get("tests", [])):
            states = t.get("initialStates", ["Data state"])
            if "Data state" not in states or "lastStartTag" in t:
                continue
            text = t["input"]
            if t.get("doubleEscaped"):
                text = text.encode("utf-8", "surrogatepass").decode("unicode_escape")
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                continue  # lone surrogates: no UTF-8 document carries them
            name = f"{path.name}:{i}"
            out.append((f"{name}/u", f"<a href={text}>"))
            out.append((f"{name}/d", f'<a href="{text}">'))
            out.append((f"{name}/s", f"<a href='{text}'>"))
            out += [(f"{name}/p{k}", v) for k, v in enumerate(probe_variants(text, rng, 3))]
    return out


async def minimize(ch: Chromium, html: str, impl: str, link_set: str) -> str:
    """A smaller input that still fails the same way (same causes), by removing chunks
    (halves, then smaller, down to single characters) while Chromium and ``impl`` disagree
    as before; each round is one batch for the browser."""

    async def keys(docs: list[str]) -> list[set[str]]:
        parsed = await ch.parse(docs)
        out = []
        for d, p in zip(docs, parsed, strict=True):
            expected, foreign = chromium_expected(p, link_set)
            r = run_case("m", d, expected, foreign, link_set)
            out.append(set(causes(r, impl)) if r.verdicts[impl].status == "fail" else set())
        return out

    want = (await keys([html]))[0]
    if not want:
        return html
    n = 2
    while len(html) > 1:
        size = max(1, len(html) // n)
        cands = [html[:i] + html[i + size :] for i in range(0, len(html), size)]
        got = await keys(cands)
        for c, k in zip(cands, got, strict=True):
            if k and k & want:
                html, want = c, k & want
                n = max(n - 1, 2)
                break
        else:
            if size == 1:
                break
            n = min(len(html), n * 2)
    return html


def spliced_pages(pages: list[Path], n: int, seed: int = 13) -> list[tuple[str, str]]:
    """``n`` documents spliced from slices of real pages: real markup in states no page had
    (a script, comment, table, svg or form cut open and continued by another page)."""
    rng = random.Random(seed)
    texts = [page_text(p.read_bytes()) for p in pages]
    out = []
    for i in range(n):
        parts = []
        for _ in range(rng.randint(2, 4)):
            t = rng.choice(texts)
            a = rng.randrange(len(t))
            parts.append(t[a : a + rng.randint(200, 8000)])
        out.append((f"splice:{i}", "".join(parts)))
    return out


async def chromium_results(
    inputs: list[tuple[str, str]], link_set: str
) -> tuple[list[Result], str]:
    async with Chromium() as ch:
        parsed = await ch.parse([d for _, d in inputs])
        version = ch.version
        results = []
        for (name, data), p in zip(inputs, parsed, strict=True):
            expected, foreign = chromium_expected(p, link_set)
            results.append(run_case(name, data, expected, foreign, link_set))
        await _settle_clones(ch, results)
    return results, version


_A_TAG = re.compile(r"<a(?=[\t\n\f\r />])", re.I)
_MARK = "data-fidelity-id"


async def _settle_clones(ch: Chromium, results: list[Result]) -> None:
    """Tell clones from misses where counting values could not: each source ``<a`` gets a
    numbered attribute and the document is parsed again; DOM ``<a>`` elements that share a
    number are one source tag cloned by the adoption agency. A case whose only failure is
    ``a href`` entries we report once per source tag becomes ``clone`` (the counts are kept
    in ``Result.a_sources`` and written with the case)."""
    todo = [
        (r, impl)
        for r in results
        for impl in IMPLS
        if r.verdicts[impl].status == "fail"
        and not r.verdicts[impl].extra
        and all(t[0] == "a" and t in r.got[impl] for t in r.verdicts[impl].missing)
    ]
    if not todo:
        return
    docs = sorted({id(r): r for r, _ in todo}.values(), key=lambda r: r.name)
    counter = iter(range(10**9))
    marked = [_A_TAG.sub(lambda m: f"{m.group(0)} {_MARK}={next(counter)}", r.data) for r in docs]
    parsed = dict(zip((id(r) for r in docs), await ch.parse(marked), strict=True))
    for r, impl in todo:
        tags: dict[str, set[str]] = defaultdict(set)
        for tag, attrs in parsed[id(r)][0]:
            if tag == "a" and "href" in attrs and _MARK in attrs:
                tags[attrs["href"]].add(attrs[_MARK])
        r.a_sources = {href: len(ids) for href, ids in tags.items()}
        r.verdicts[impl] = compare(r.got[impl], r.expected, r.foreign, r.data, r.a_sources)


def _ada(raw: str, base: str) -> str | None:
    """The URL standard's answer (Ada), fragment dropped; None when it does not parse."""
    try:
        u = ada_url.URL(raw, base)
    except ValueError:
        return None
    u.hash = ""
    return str(u.href)


async def url_check(inputs: list[tuple[str, str]], link_set: str) -> tuple[list[str], str]:
    """Our ``Link.url`` against Chromium's ``new URL(raw, document base)`` (fragment dropped).

    Only links that both sides have (same tag, attr, raw) are compared, so tree differences
    are not counted twice. The document base is Chromium's first ``<base href>`` in tree order
    (not in template contents), resolved against the document URL (data: and javascript:
    refused, as we refuse them). A link of ours resolved against the document URL although the
    document has a base is the documented "links before <base>" deviation (``before-base``).
    """
    async with Chromium() as ch:
        parsed = await ch.parse([d for _, d in inputs])
        version = ch.version
        hrefs = [p[2] for p in parsed]
        resolved = iter(await ch.resolve([(h, BASE) for h in hrefs if h is not None]))
        bases = []
        for h in hrefs:
            b = next(resolved) if h is not None else None
            ok = b is not None and not b.startswith(("data:", "javascript:"))
            bases.append(b if ok else BASE)
        expected = [chromium_expected(p, link_set)[0] for p in parsed]
        pairs = []
        for e, b in zip(expected, bases, strict=True):
            pairs += [(raw, b) for _, _, raw in e] + [(raw, BASE) for _, _, raw in e]
        urls = iter(await ch.resolve(pairs))
    mismatches: dict[str, list[tuple[str, str, Any, Any]]] = defaultdict(list)
    compared = Counter[str]()
    for (name, data), e, href in zip(inputs, expected, hrefs, strict=True):
        std_base = BASE if href is None else (_ada(href, BASE) or BASE)
        if std_base.startswith(("data:", "javascript:")):
            std_base = BASE
        want: dict[Entry, list[Any]] = defaultdict(list)
        at_doc: dict[Entry, Any] = {}
        ours_b = [next(urls) for _ in e]
        ours_doc = [next(urls) for _ in e]
        for t, u, d in zip(e, ours_b, ours_doc, strict=True):
            want[t].append(u)
            at_doc[t] = d
        raw_bytes = data.encode("utf-8", "surrogateescape")
        for impl, cls in IMPLS.items():
            ex = cls(BASE, "utf-8", link_set=link_set)
            got: dict[Entry, list[Any]] = defaultdict(list)
            for lk in ex.feed(raw_bytes) + ex.close():
                got[(lk.tag, lk.attr, lk.raw)].append(lk.url)
            for t in want.keys() & got.keys():
                w, g = Counter(want[t]), Counter(got[t])
                compared[impl] += min(len(want[t]), len(got[t]))
                for u in (g - w).elements():
                    if u == _ada(t[2], std_base):
                        kind = "Chromium differs from the URL standard (Ada agrees with us)"
                    elif std_base != BASE and u == _ada(t[2], BASE):
                        kind = "before-base"
                    elif u is None:
                        kind = "we give None, the browser a URL"
                    elif not w - g or next(iter((w - g).elements())) is None:
                        kind = "we give a URL, the browser fails"
                    else:
                        kind = "different URL"
                    exp = next(iter((w - g).elements()), None)
                    mismatches[f"{impl}: {kind}"].append((name, t[2], exp, u))
    lines = [f"### Link.url vs Chromium {version} new URL() ({len(inputs)} documents)", ""]
    for impl in IMPLS:
        bad = sum(len(v) for k, v in mismatches.items() if k.startswith(impl + ":"))
        lines.append(f"- `{impl}`: {compared[impl]} URLs compared, {bad} differ")
    lines.append("")
    for kind, items in sorted(mismatches.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"- **{kind}** — {len(items)}, e.g.:")
        for name, raw, exp, u in sorted(items, key=lambda it: len(it[1]))[:6]:
            lines.append(f"  - `{name}` raw {raw!r}: browser {exp!r}, we {u!r}")
    lines.append("")
    return lines, version


async def served_pages(pages: list[Path], link_set: str) -> tuple[list[str], list[Result]]:
    """Real pages end to end: bytes served from 127.0.0.1 as ``text/html`` (no charset), the
    browser's document (its encoding sniffing included) vs our extractor on the same bytes
    (``encoding=None``: BOM, <meta> prescan, then our default)."""
    from aiohttp import web  # noqa: PLC0415 - only this measurement serves pages

    blobs = {p.name: p.read_bytes() for p in pages}

    async def handler(request: web.Request) -> web.Response:
        body = blobs.get(request.match_info["name"])
        if body is None:
            return web.Response(status=404)
        return web.Response(body=body, headers={"Content-Type": "text/html"})

    app = web.Application()
    app.router.add_get("/p/{name}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    results: list[Result] = []
    charsets: Counter[str] = Counter()
    lines: list[str] = []
    try:
        async with Chromium() as ch:
            version = ch.version
            for name, data in blobs.items():
                url = f"http://127.0.0.1:{port}/p/{name}"
                cs, els, foreign = await ch.navigate_dom(url)
                expected = dom_links([(t, a) for t, a in els], link_set)
                got, verdicts, encs = {}, {}, set()
                for impl, cls in IMPLS.items():
                    ex = cls(url, None, link_set=link_set)
                    links = ex.feed(data) + ex.close()
                    encs.add(ex.encoding)
                    got[impl] = [(lk.tag, lk.attr, lk.raw) for lk in links]
                    verdicts[impl] = compare(got[impl], expected, foreign, "")
                ours = "/".join(sorted(encs))
                charsets[f"browser {cs.lower()} / ours {ours}"] += 1
                results.append(Result(name, "", expected, foreign, got, verdicts))
    finally:
        await runner.cleanup()
    lines += summarize(f"real pages served as bytes, vs {version} ({len(results)})", results)
    for impl in IMPLS:
        n = sum(len(r.expected) for r in results)
        bad = sum(len(r.verdicts[impl].missing) + len(r.verdicts[impl].extra) for r in results)
        lines.append(f"- `{impl}` links: {n} in the DOMs, {bad} differences (missing + extra)")
    lines.append("- encodings (pages): " + ", ".join(f"{k}: {v}" for k, v in charsets.items()))
    lines.append("")
    for r in results:
        for impl in IMPLS:
            v = r.verdicts[impl]
            if v.status == "fail":
                lines.append(
                    f"  - `{r.name}` {impl}: missing {v.missing[:3]} extra {v.extra[:3]}"
                    f" ({len(v.missing)} missing, {len(v.extra)} extra)"
                )
    lines.append("")
    return lines, results


def page_text(data: bytes) -> str:
    """A page's text, decoded as our extractor decides (BOM, <meta> prescan, default).

    Both sides then get the same text (ours as UTF-8 with that transport charset), so the
    comparison measures the tree, not the encoding sniffing.
    """
    ex = LinkExtractorPy(BASE, None)
    ex.feed(data)
    ex.close()
    codec = _charset.python_codec(ex.encoding)[0] if ex.encoding else "cp1252"
    try:
        return data.decode(codec, "replace")
    except LookupError:
        return data.decode("cp1252", "replace")


def write_cases(path: Path, results: list[Result], version: str, link_set: str) -> None:
    cases = [
        {
            "id": r.name,
            "html": r.data,
            "expected": [list(t) for t in r.expected],
            "foreign_a": r.foreign,
            **({"a_sources": r.a_sources} if r.a_sources else {}),
        }
        for r in results
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {
        "about": "Generated inputs (benchmarks/fidelity.py generate, our own constructs); "
        "expected links read from the DOM of headless Chromium's DOMParser (scripting off), "
        "srcset and meta refresh split by our parse_srcset/refresh_url. Regenerate with "
        "python benchmarks/fidelity.py --chromium --generate N --write-cases PATH.",
        "chromium": version,
        "link_set": link_set,
        "base": BASE,
    }
    lines = [json.dumps(head, ensure_ascii=False)[:-1] + ', "cases": [']
    lines += [json.dumps(c, ensure_ascii=False) + "," for c in cases]
    lines[-1] = lines[-1][:-1]
    lines.append("]}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_deviations(path: Path, results: list[Result]) -> None:
    """The failing cases with their exact differences and cause, for tests/test_fidelity.py."""
    devs: dict[str, Any] = {}
    for r in results:
        for impl in IMPLS:
            v = r.verdicts[impl]
            if v.status != "fail":
                continue
            keys = sorted({c.split(" | ")[1] for c in causes(r, impl)})
            d = {
                "cause": ",".join(keys),
                "missing": sorted(map(list, v.missing)),
                "extra": sorted(map(list, v.extra)),
            }
            devs.setdefault(r.name, {})[impl] = d
    for name, per in devs.items():
        if len(per) == len(IMPLS) and all(d == next(iter(per.values())) for d in per.values()):
            devs[name] = next(iter(per.values()))
    lines = ["{"]
    lines += [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in devs.items()]
    if len(lines) > 1:
        lines[-1] = lines[-1][:-1]
    lines.append("}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--html5lib-tests", type=Path, metavar="DIR")
    ap.add_argument(
        "--html5lib-tokenizer",
        type=Path,
        metavar="DIR",
        help="with --chromium: html5lib-tests tokenizer inputs as hrefs and with probes",
    )
    ap.add_argument("--chromium", action="store_true", help="generated probes vs Chromium")
    ap.add_argument("--generate", type=int, default=0, metavar="N")
    ap.add_argument("--pages", type=Path, metavar="DIR")
    ap.add_argument("--link-set", default="resources", choices=sorted(LINK_SETS))
    ap.add_argument("--write-cases", type=Path, metavar="FILE")
    ap.add_argument("--findings", type=Path, metavar="FILE")
    ap.add_argument(
        "--write-deviations",
        type=Path,
        metavar="FILE",
        help="with --write-cases: the failing generated cases and their differences",
    )
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument(
        "--urls", action="store_true", help="also compare Link.url with Chromium's new URL()"
    )
    ap.add_argument(
        "--try",
        dest="try_",
        nargs="+",
        metavar="HTML",
        help="print Chromium's links and ours for these inputs, then exit",
    )
    ap.add_argument(
        "--served",
        action="store_true",
        help="with --pages: also serve the bytes from 127.0.0.1 (the browser's own encoding "
        "sniffing) and compare end to end",
    )
    ap.add_argument(
        "--splice",
        type=int,
        default=0,
        metavar="N",
        help="with --pages: also N documents spliced from slices of the real pages",
    )
    ap.add_argument(
        "--minimize",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="shrink each failing input (a file of HTML) to a small one that fails alike",
    )
    ap.add_argument("--chunk", type=int, default=0, metavar="N", help="feed N-byte chunks")
    args = ap.parse_args(argv)
    global CHUNK
    CHUNK = args.chunk
    if args.minimize:

        async def _min() -> None:
            async with Chromium() as ch:
                for path in args.minimize:
                    small = await minimize(ch, path.read_text(), "py", args.link_set)
                    print(f"{path}: {small!r}")

        asyncio.run(_min())
        return 0
    if args.try_:
        results, version = asyncio.run(
            chromium_results([(f"arg{i}", h) for i, h in enumerate(args.try_)], args.link_set)
        )
        for r in results:
            print(f"{r.data!r}\n  {version}: {r.expected}  foreign a: {r.foreign}")
            for impl in IMPLS:
                print(f"  {impl}: {r.got[impl]}  -> {r.verdicts[impl].status}")
        return 0
    out: list[str] = [f"## Fidelity run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", ""]
    out.append(f"implementations: {', '.join(IMPLS)}; link set: {args.link_set}")
    out.append("")
    fails: list[str] = []
    h5cases: list[H5Case] = []
    if args.html5lib_tests:
        results, skipped, h5cases = h5_results(args.html5lib_tests, args.link_set)
        out += summarize(
            f"html5lib-tests tree construction ({len(results)} cases; skipped {dict(skipped)})",
            results,
            per_file=True,
        )
        fails += findings("html5lib-tests", results)
    if args.chromium:
        rng = random.Random(args.seed)
        inputs: list[tuple[str, str]] = []
        for c in h5cases:
            for k, v in enumerate(probe_variants(c.data, rng)):
                inputs.append((f"{c.file}:{c.index}/p{k}", v))
        if args.html5lib_tokenizer:
            inputs += tokenizer_inputs(args.html5lib_tokenizer, rng)
        gen = [(f"gen:{i}", d) for i, d in enumerate(generate(args.generate, args.seed))]
        gen += [(f"tok:{i}", d) for i, d in enumerate(generate_tokens(args.generate, args.seed))]
        gen += [(f"min:{i}", d) for i, d in enumerate(MINIMAL)]
        if args.urls:
            gen += [(f"url:{i}", d) for i, d in enumerate(generate_urls(args.generate, args.seed))]
        t0 = time.monotonic()
        results, version = asyncio.run(chromium_results(inputs + gen, args.link_set))
        out.append(
            f"Chromium: {version} ({len(results)} documents in {time.monotonic() - t0:.1f}s)"
        )
        out.append("")
        if inputs:
            hr = results[: len(inputs)]
            out += summarize(f"html5lib-tests inputs + probes vs Chromium ({len(hr)})", hr)
            fails += findings("html5lib-tests inputs + probes vs Chromium", hr)
            tk = [r for r in hr if ".test:" in r.name]
            if tk:
                out += summarize(f"of which tokenizer inputs ({len(tk)})", tk)
        gr = results[len(inputs) :]
        if gr:
            out += summarize(f"generated documents vs Chromium ({len(gr)})", gr)
            fails += findings("generated vs Chromium", gr)
            if args.write_cases:
                write_cases(args.write_cases, gr, version, args.link_set)
                out.append(f"wrote {len(gr)} cases to {args.write_cases}")
                out.append("")
            if args.write_deviations:
                write_deviations(args.write_deviations, gr)
        if args.urls:
            ulines, _ = asyncio.run(url_check(inputs + gen, args.link_set))
            out += ulines
    if args.pages:
        inputs = [(p.name, page_text(p.read_bytes())) for p in sorted(args.pages.glob("*.html"))]
        results, version = asyncio.run(chromium_results(inputs, args.link_set))
        out += summarize(f"real pages vs Chromium {version} ({len(results)})", results)
        for impl in IMPLS:
            n = sum(len(r.expected) for r in results)
            bad = sum(len(r.verdicts[impl].missing) + len(r.verdicts[impl].extra) for r in results)
            out.append(f"- `{impl}` links: {n} in the DOMs, {bad} differences (missing + extra)")
        out.append("")
        fails += findings("real pages", results)
        if args.urls:
            ulines, _ = asyncio.run(url_check(inputs, args.link_set))
            out += ulines
        if args.splice:
            sp = spliced_pages(sorted(args.pages.glob("*.html")), args.splice, args.seed)
            results, version = asyncio.run(chromium_results(sp, args.link_set))
            out += summarize(f"spliced real pages vs Chromium {version} ({len(results)})", results)
            fails += findings("spliced real pages", results)
        if args.served:
            slines, _ = asyncio.run(served_pages(sorted(args.pages.glob("*.html")), args.link_set))
            out += slines
    report = "\n".join(out + fails)
    print("\n".join(out))
    if args.findings:
        args.findings.write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
