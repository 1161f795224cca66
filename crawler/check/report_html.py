"""``crawler check --format html``: one self-contained page a person reads instead of a log.

The summary (verdict and counters), a chart of the results by status (inline SVG; links whose
page answered 200 but lacks the fragment, and links behind a bot wall, are bars of their own,
not counted in their status's bar), the broken links grouped by target URL with every page,
line and column that links them (past `OPEN_GROUPS`, collapsed), the links blocked by a bot
wall and the warnings (collapsed), and a table of every occurrence that sorts (click a
heading), filters (a text box, a kind menu) and pages (`PAGE_ROWS` rows a page) with a few
lines of inline script. Without script the table shows every row. Nothing is loaded from
anywhere: no external script, style, font or image, so the file can be mailed, archived or
opened offline. URLs and raw values wrap at their ``/``, ``?``, ``#`` and ``&`` (``<wbr>``)
before they would break inside a name.

Every string from the site is HTML-escaped, and a Content-Security-Policy allows only this
page's own style and script (by their hashes): a hostile URL that escaped the escaping still
could not run. Only http(s) URLs become links; a ``javascript:`` value is shown, never linked.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections import Counter
from functools import lru_cache
from typing import TextIO
from urllib.parse import urlsplit

from crawler._version import __version__
from crawler.check.model import CheckReport, Occurrence, Problem
from crawler.check.report_common import (
    BLOCKED_HINT,
    NOT_CHECKED,
    describe,
    is_blocked,
    is_broken,
    kind_sentence,
    kind_title,
    occurrences,
    status_phrase,
    summary,
    visible,
)

__all__ = ["MAX_GROUP_REFS", "OPEN_GROUPS", "PAGE_ROWS", "bar_chart", "page", "url_html", "write"]

#: Pages listed under each target in the grouped sections (all of them are in the table).
MAX_GROUP_REFS = 50
#: Broken targets shown open; the rest are in one collapsed group below them.
OPEN_GROUPS = 10
#: Rows of the occurrence table a page (with script; without, every row shows).
PAGE_ROWS = 50

_STYLE = """
:root{--bg:#f6f7f9;--card:#fff;--fg:#1d232b;--muted:#5d6875;--line:#dde1e6;--bad:#c62828;
--warn:#b26a00;--ok:#2e7d32;--info:#1565c0;--code:#f0f2f5;--accent:#3949ab;--wall:#6a1b9a}
@media (prefers-color-scheme:dark){:root{--bg:#14171b;--card:#1d2127;--fg:#e6e9ed;
--muted:#9aa4af;--line:#323840;--bad:#ef5350;--warn:#ffb74d;--ok:#66bb6a;--info:#64b5f6;
--code:#262b32;--accent:#9fa8da;--wall:#ce93d8}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:19px;margin:0 0 12px}
h3{font-size:15px;margin:0;font-weight:600;display:flex;gap:10px;align-items:baseline}
code,.mono{font-family:ui-monospace,"SF Mono",Menlo,Consolas,monospace;font-size:13px}
code{background:var(--code);padding:1px 5px;border-radius:4px;word-break:break-all}
a{color:var(--accent)}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px 20px;
margin:0 0 18px;box-shadow:0 1px 2px rgba(0,0,0,.04)}
.verdict{display:inline-block;font-weight:700;border-radius:999px;padding:2px 12px;
font-size:15px;vertical-align:middle;color:#fff}
.verdict.bad{background:var(--bad)}.verdict.good{background:var(--ok)}
.seeds{color:var(--muted);margin:0 0 14px}
.stats{display:flex;flex-wrap:wrap;gap:10px;margin:0}
.kinds{display:flex;flex-wrap:wrap;gap:6px;margin:0 0 14px;padding:0;list-style:none}
.kinds li{border:1px solid var(--line);border-radius:999px;padding:1px 10px;font-size:13px}
.kinds b{color:var(--bad)}
.stats div{border:1px solid var(--line);border-radius:8px;padding:8px 12px;flex:1 1 0;
min-width:max-content}
.stats dt{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.stats dd{margin:0;font-size:22px;font-weight:650}
.stats .bad dd{color:var(--bad)}.stats .warn dd{color:var(--warn)}
svg text{fill:var(--fg);font-size:12px}svg .n{fill:var(--muted)}
.problem{border-top:1px solid var(--line);padding:12px 0}
.problem:first-of-type{border-top:0;padding-top:0}
.badge{flex:none;font-size:12px;font-weight:700;border-radius:4px;padding:1px 7px;color:#fff;
background:var(--bad)}.badge.warn{background:var(--warn)}.badge.blocked{background:var(--wall)}
.stats .blocked dd{color:var(--wall)}.hint{margin:0 0 10px}
.why{color:var(--muted);margin:4px 0 6px}
ol.chain{margin:4px 0 8px;padding-left:22px;color:var(--muted)}
ul.refs{margin:4px 0 0;padding-left:20px}ul.refs li{margin:2px 0}
.pos{color:var(--muted);font-size:12px;margin-left:6px}
details>summary{cursor:pointer;font-weight:600;margin-bottom:8px}
.tools{display:flex;gap:10px;flex-wrap:wrap;align-items:center;margin-bottom:10px}
.tools select{max-width:300px}
.tools input,.tools select{font:inherit;padding:5px 9px;border:1px solid var(--line);
border-radius:6px;background:var(--card);color:var(--fg)}.tools input{flex:1;min-width:220px}
#shown,#pageno{color:var(--muted);font-size:13px}
.pager{display:flex;gap:10px;align-items:center;margin-top:10px}
.pager button{font:inherit;padding:3px 12px;border:1px solid var(--line);border-radius:6px;
background:var(--card);color:var(--fg);cursor:pointer}.pager button:disabled{opacity:.45}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:13px;table-layout:fixed;min-width:900px}
#occ td{overflow-wrap:anywhere}#occ td:nth-child(4),#occ td:nth-child(n+7){font-family:
ui-monospace,"SF Mono",Menlo,Consolas,monospace;font-size:12px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{position:sticky;top:0;background:var(--card);cursor:pointer;user-select:none;white-space:nowrap}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
#occ td:nth-child(3),#occ td:nth-child(5),#occ td:nth-child(6){text-align:right;
font-variant-numeric:tabular-nums}
#occ td:nth-child(7){white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
tr.warning td:first-child{border-left:3px solid var(--warn)}
tr.blocked td:first-child{border-left:3px solid var(--wall)}
tr.broken td:first-child{border-left:3px solid var(--bad)}
.empty{color:var(--muted)}
footer{color:var(--muted);font-size:12px;text-align:center}
"""

# Sort on a heading's click (numbers as numbers), filter by text and kind, page the rows the
# filter keeps (PAGE_ROWS a page); says how many match. Without script every row shows.
_SCRIPT = """
(function(){
var table=document.getElementById('occ');if(!table)return;
var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows),hits=rows,page=0,
size=Number(table.getAttribute('data-page'))||100,$=function(i){return document.getElementById(i);},
q=$('q'),kind=$('kind'),shown=$('shown'),pager=$('pager'),prev=$('prev'),next=$('next'),
pageno=$('pageno');
function draw(){var n=hits.length,pages=Math.max(1,Math.ceil(n/size));
if(page>=pages)page=pages-1;if(page<0)page=0;var a=page*size,b=Math.min(n,a+size),i;
for(i=0;i<rows.length;i++)rows[i].hidden=true;for(i=a;i<b;i++)hits[i].hidden=false;
shown.textContent=n+' of '+rows.length+' shown';pager.hidden=pages<2;
pageno.textContent='rows '+(n?a+1:0)+'\u2013'+b+', page '+(page+1)+' of '+pages;
prev.disabled=page===0;next.disabled=page>=pages-1;}
function filter(){var t=q.value.trim().toLowerCase(),k=kind.value;
hits=rows.filter(function(r){return(!k||r.dataset.kind===k||r.className===k)&&
(!t||r.textContent.toLowerCase().indexOf(t)>=0);});page=0;draw();}
q.addEventListener('input',filter);kind.addEventListener('change',filter);
prev.addEventListener('click',function(){page--;draw();});
next.addEventListener('click',function(){page++;draw();});
Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){
th.addEventListener('click',function(){
var asc=th.getAttribute('aria-sort')!=='ascending',num=th.dataset.type==='num';
Array.prototype.forEach.call(table.tHead.rows[0].cells,function(h){h.removeAttribute('aria-sort');});
th.setAttribute('aria-sort',asc?'ascending':'descending');
rows.sort(function(a,b){var x=a.cells[i].dataset.v||a.cells[i].textContent,
y=b.cells[i].dataset.v||b.cells[i].textContent,c;
c=num?(Number(x)-Number(y)):x.localeCompare(y);return asc?c:-c;});
rows.forEach(function(r){body.appendChild(r);});filter();});});
filter();})();
"""


# Where a long URL or value may wrap: after a "/" (not inside "//"), before "?", "#", "&".
_BREAKS = re.compile(r"(?<=/)(?!/)|(?=[?#&])")
# Shorter than this, a value fits its column: no <wbr> (the table stays small).
_WRAP_FROM = 24


def _h(s: str) -> str:
    return html.escape(visible(s), quote=True)


def _hw(s: str) -> str:
    """``s`` escaped, with ``<wbr>`` where a URL wraps well (escaped piece by piece, so that
    no break falls inside an entity)."""
    s = visible(s)
    if len(s) < _WRAP_FROM:
        return html.escape(s, quote=True)
    return "<wbr>".join(html.escape(part, quote=True) for part in _BREAKS.split(s) if part)


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _origin(report: CheckReport) -> str:
    """The first seed's ``scheme://host:port``: pages under it are shown by their path."""
    try:
        parts = urlsplit(report.seeds[0]) if report.seeds else None
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.netloc}" if parts and parts.netloc else ""


def _linkable(url: str) -> bool:
    return url[:8].lower().startswith(("http://", "https://"))


@lru_cache(maxsize=65_536)  # a page that links many broken URLs is shown once per link
def _url(url: str, origin: str = "") -> str:
    """The URL shown in code (its path alone when under ``origin``, the whole URL in its
    title), and a link only when it is http(s)."""
    if origin and url.startswith(origin + "/"):
        shown = f'<code title="{_h(url)}">{_hw(url[len(origin) :])}</code>'
    else:
        shown = f"<code>{_hw(url)}</code>"
    if _linkable(url):
        return f'<a href="{_h(url)}">{shown}</a>'
    return shown


@lru_cache(maxsize=65_536)
def _cell_url(url: str, origin: str) -> str:
    """A URL in the table: as `_url` without the code element or title (the cell's style
    sets the font; the href holds the whole URL): the table is most of a large report."""
    shown = _hw(url[len(origin) :] if origin and url.startswith(origin + "/") else url)
    return f'<a href="{_h(url)}">{shown}</a>' if _linkable(url) else shown


@lru_cache(maxsize=65_536)
def _target(url: str, origin: str) -> str:
    """The problem's URL in the table: text only (its group above links it), by its path
    when under ``origin``."""
    return _hw(url[len(origin) :] if origin and url.startswith(origin + "/") else url)


def _status_class(label: str) -> str:
    if label[:1] == "2":
        return "ok"
    if label[:1] == "3":
        return "info"
    if label[:1] == "4":
        return "warn"
    return "bad"


_COLORS = {
    "ok": "#43a047",
    "info": "#1e88e5",
    "warn": "#fb8c00",
    "bad": "#e53935",
    "fragment": "#c2185b",
    "blocked": "#8e24aa",
}


def _chart(report: CheckReport) -> str:
    """Horizontal bars: URLs by final HTTP status, then those whose page answered but lacks a
    linked fragment, then those behind a bot wall (both out of their status's bar), then
    broken URLs with no response by kind."""
    status = dict(report.stats.status)
    # a URL (without its fragment) counts once, in the first bar of its own that claims it
    frag_bases: dict[str, int | None] = {}
    frags: Counter[int] = Counter()
    for p in report.broken:
        if p.error == "fragment_missing":
            frags[p.status or 0] += 1
            frag_bases.setdefault(p.url.partition("#")[0], p.status)
    walled = {p.url: p.status for p in report.blocked}
    for code in [*frag_bases.values(), *walled.values()]:
        if code is not None and status.get(code, 0) > 0:
            status[code] -= 1
    bars: list[tuple[str, int, str, str]] = []
    for code, n in sorted(status.items()):
        if n > 0:
            bars.append((status_phrase(code), n, _status_class(str(code)), ""))
    if frag_bases:
        n = len(frag_bases)
        nf = sum(frags.values())
        bars.append(
            (
                "Fragment missing",
                n,
                "fragment",
                f"{n:,} URL{'s' if n != 1 else ''} answered but lack{'s' if n == 1 else ''} "
                f"{nf:,} linked fragment{'s' if nf != 1 else ''}",
            )
        )
    if walled:
        bars.append(("Blocked (bot wall)", len(walled), "blocked", ""))
    no_response = Counter(p.error for p in report.broken if p.status is None)
    for kind, n in sorted(no_response.items()):
        bars.append((kind_title(kind), n, "bad", ""))
    if not bars:
        return '<p class="empty">No URL was checked.</p>'
    return bar_chart(bars, "Results by status", "URL")


def bar_chart(bars: list[tuple[str, int, str, str]], aria: str, unit: str) -> str:
    """Inline SVG of horizontal bars: (label, count, colour class, title or "") each; an
    empty title says "label: N unit(s)"."""
    top = max(n for _, n, _, _ in bars)
    label_w, bar_w, row_h = 230, 560, 26
    height = row_h * len(bars) + 8
    parts = [
        f'<svg role="img" aria-label="{_h(aria)}" width="100%" viewBox="0 0 '
        f'{label_w + bar_w + 90} {height}" preserveAspectRatio="xMinYMin meet">'
    ]
    for i, (label, n, cls, title) in enumerate(bars):
        y = 4 + i * row_h
        w = max(3.0, bar_w * n / top)
        title = title or f"{label}: {n:,} {unit}{'s' if n != 1 else ''}"
        parts.append(
            f'<g class="bar {cls}"><title>{_h(title)}</title><text x="{label_w - 8}" '
            f'y="{y + 16}" text-anchor="end">{_h(label)}</text><rect x="{label_w}" '
            f'y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" rx="3" fill="{_COLORS[cls]}"/>'
            f'<text class="n" x="{label_w + w + 6:.1f}" y="{y + 16}">{n:,}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _ref_item(occ: Occurrence, origin: str) -> str:
    return (
        f'<li>{_url(occ.page, origin)}<span class="pos">line {occ.line}, column {occ.column} · '
        f'&lt;{_h(occ.tag)} {_h(occ.attr)}=&quot;<span class="mono">{_hw(occ.raw)}</span>'
        f"&quot;&gt;</span></li>"
    )


def _problem(p: Problem, origin: str) -> str:
    cls = "" if is_broken(p) else " blocked" if is_blocked(p) else " warn"
    badge = str(p.status) if p.status is not None and p.error.startswith("http_") else p.error
    if is_blocked(p) and p.status is not None:
        badge = f"blocked {p.status}"
    parts = [
        f'<div class="problem"><h3><span class="badge{cls}" '
        f'title="{_h(kind_sentence(p.error))}">{_h(badge)}</span>{_url(p.url)}</h3>',
        f'<p class="why">{_h(describe(p))}{" · external" if p.external else ""}</p>',
    ]
    if p.redirects:
        chain = "".join(f"<li>{_url(u)}</li>" for u in p.redirects)
        if p.final_url:
            chain += f"<li>{_url(p.final_url)} (final)</li>"
        parts.append(f'<ol class="chain">{chain}</ol>')
    if p.referrers:
        items = "".join(_ref_item(o, origin) for o in p.referrers[:MAX_GROUP_REFS])
        more = len(p.referrers) - MAX_GROUP_REFS
        if more > 0:
            items += f'<li class="empty">and {more:,} more (in the table below)</li>'
        n = len(p.referrers)
        parts.append(f"<div>Linked from {n:,} place{'s' if n != 1 else ''}:</div>")
        parts.append(f'<ul class="refs">{items}</ul>')
    else:
        parts.append('<div class="empty">Linked from no page (a seed).</div>')
    parts.append("</div>")
    return "".join(parts)


def _group(p: Problem) -> str:
    return "broken" if is_broken(p) else "blocked" if is_blocked(p) else "warning"


def _table(report: CheckReport, origin: str) -> str:
    rows = []
    kinds: Counter[str] = Counter()
    for p, occ in occurrences(report):
        kinds[p.error] += 1
        status = "" if p.status is None else str(p.status)
        if occ is None:
            where = '<td class="empty">(a seed)</td><td></td><td></td><td></td><td></td>'
        else:
            where = (
                f"<td>{_cell_url(occ.page, origin)}</td><td>{occ.line}</td><td>{occ.column}"
                f"</td><td>{_h(occ.tag)} {_h(occ.attr)}</td><td>{_hw(occ.raw)}</td>"
            )
        rows.append(
            f'<tr class="{_group(p)}" data-kind="{_h(p.error)}"><td>{_target(p.url, origin)}'
            f"</td><td>{_h(kind_title(p.error))}</td>"
            f"<td{'' if status else ' data-v=-1'}>{status}</td>{where}</tr>"
        )
    options = ['<option value="">All kinds</option>']
    if report.broken:
        options.append('<option value="broken">Broken</option>')
    if report.blocked:
        options.append('<option value="blocked">Blocked by bot walls</option>')
    if report.warnings:
        options.append('<option value="warning">Warnings</option>')
    options += [
        f'<option value="{_h(k)}">{_h(kind_title(k))} ({n:,})</option>'
        for k, n in sorted(kinds.items())
    ]
    heads = [
        ("URL", "", 24),
        ("Problem", "", 12),
        ("Status", "num", 5),
        ("Page", "", 21),
        ("Line", "num", 5),
        ("Col", "num", 4),
        ("Tag", "", 9),
        ("Raw value", "", 20),
    ]
    cols = "".join(f'<col width="{w}%">' for _, _, w in heads)
    head = "".join(f'<th scope="col" data-type="{t}">{h}</th>' for h, t, _ in heads)
    return (
        '<div class="tools"><input id="q" type="search" placeholder="Filter: URL, page, value'
        f'…" aria-label="Filter"><select id="kind" aria-label="Kind">{"".join(options)}'
        '</select><span id="shown"></span></div>'
        f'<div class="scroll"><table id="occ" data-page="{PAGE_ROWS}"><colgroup>{cols}'
        f"</colgroup><thead><tr>{head}</tr></thead><tbody>"
        + "\n".join(rows)
        + '</tbody></table></div><div class="pager" id="pager" hidden>'
        '<button type="button" id="prev">Previous</button><span id="pageno"></span>'
        '<button type="button" id="next">Next</button></div>'
    )


def _stat(label: str, value: str, cls: str = "") -> str:
    return f'<div class="{cls}"><dt>{label}</dt><dd>{value}</dd></div>'


def _broken_section(report: CheckReport, origin: str) -> str:
    nb = len(report.broken)
    if not nb:
        return '<p class="empty">None: every link checked works.</p>'
    by_kind = Counter(kind_title(p.error) for p in report.broken)
    kinds = "".join(
        f"<li><b>{n:,}</b> {_h(k)}</li>" for k, n in sorted(by_kind.items(), key=lambda x: -x[1])
    )
    shown = "".join(_problem(p, origin) for p in report.broken[:OPEN_GROUPS])
    rest = report.broken[OPEN_GROUPS:]
    if rest:  # one line each: their places are in the table below (filter by the URL)
        items = "".join(
            f'<li>{_url(p.url)} <span class="pos">{_h(describe(p))} · linked from '
            f"{max(1, len(p.referrers)):,}</span></li>"
            for p in rest
        )
        shown += (
            f"<details><summary>{len(rest):,} more broken link{'s' if len(rest) != 1 else ''}"
            f' (their places are in the table below)</summary><ul class="refs">{items}</ul>'
            "</details>"
        )
    return f'<ul class="kinds">{kinds}</ul>{shown}'


def write(report: CheckReport, out: TextIO) -> None:
    """Write ``report`` as one self-contained HTML page to ``out``."""
    s = report.stats
    nb = len(report.broken)
    nk = len(report.blocked)
    verdict = (
        f'<span class="verdict bad">{nb:,} broken link{"s" if nb != 1 else ""}</span>'
        if nb
        else '<span class="verdict good">No broken links</span>'
    )
    occ = sum(max(1, len(p.referrers)) for p in report.broken)
    stats = "".join(
        [
            _stat("Pages", f"{s.pages:,}"),
            _stat("Links", f"{s.links:,}"),
            _stat("URLs", f"{s.urls:,}"),
            _stat("External", f"{s.external:,}"),
            _stat("Broken", f"{nb:,}", "bad" if nb else ""),
            _stat("Occurrences", f"{occ:,}", "bad" if nb else ""),
            _stat("Blocked", f"{nk:,}", "blocked" if nk else ""),
            _stat("Warnings", f"{len(report.warnings):,}", "warn" if report.warnings else ""),
            _stat("Rechecked", f"{s.rechecked:,}"),
            _stat("Time", f"{s.duration:.1f} s"),
        ]
    )
    seeds = " ".join(_url(u) for u in report.seeds)
    origin = _origin(report)
    sections = [
        f'<section class="card"><h1>Link check {verdict}</h1><p class="seeds">{seeds}</p>'
        f'<dl class="stats">{stats}</dl></section>',
        f'<section class="card" id="chart"><h2>Results by status</h2>{_chart(report)}</section>',
        f'<section class="card" id="broken"><h2>Broken links ({nb:,})</h2>'
        f"{_broken_section(report, origin)}</section>",
    ]
    if report.blocked:
        sections.append(
            f'<section class="card" id="blocked"><details><summary>Blocked by bot walls '
            f'({nk:,}; not broken)</summary><p class="hint">{_h(BLOCKED_HINT)}</p>'
            + "".join(_problem(p, origin) for p in report.blocked)
            + "</details></section>"
        )
    if report.warnings:
        unchecked = sum(p.error in NOT_CHECKED for p in report.warnings)
        nw = len(report.warnings)
        sections.append(
            f'<section class="card" id="warnings"><details><summary>Warnings ({nw:,}; '
            f"{unchecked:,} not checked)</summary>"
            + "".join(_problem(p, origin) for p in report.warnings)
            + "</details></section>"
        )
    if report.broken or report.blocked or report.warnings:
        sections.append(
            f'<section class="card" id="all"><h2>Every occurrence</h2>{_table(report, origin)}'
            "</section>"
        )
    out.write(page(f"crawler check: {summary(report)}", sections, summary(report)))


def page(title: str, sections: list[str], footer: str) -> str:
    """The self-contained page around ``sections`` (HTML): this module's style and script,
    allowed by hash in its Content-Security-Policy, nothing loaded from anywhere."""
    csp = (
        f"default-src 'none'; style-src {_csp_hash(_STYLE)}; script-src {_csp_hash(_SCRIPT)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_h(title)}</title><style>{_STYLE}</style></head>\n<body><main>"
        + "\n".join(sections)
        + f"\n<footer>crawler {_h(__version__)} · {_h(footer)}</footer></main>"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )


def url_html(url: str, origin: str = "") -> str:
    """A URL as the report shows it: in code, by its path under ``origin``, linked if
    http(s)."""
    return _url(url, origin)
