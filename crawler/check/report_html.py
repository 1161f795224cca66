"""``crawler check --format html``: one self-contained page a person reads instead of a log.

The summary (verdict and counters), a chart of the results by status (inline SVG), the broken
links grouped by target URL with every page, line and column that links them, the warnings
(collapsed), and a table of every occurrence that sorts (click a heading) and filters (a text
box, a kind menu) with a few lines of inline script. Nothing is loaded from anywhere: no
external script, style, font or image, so the file can be mailed, archived or opened offline.

Every string from the site is HTML-escaped, and a Content-Security-Policy allows only this
page's own style and script (by their hashes): a hostile URL that escaped the escaping still
could not run. Only http(s) URLs become links; a ``javascript:`` value is shown, never linked.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections import Counter
from functools import lru_cache
from typing import TextIO
from urllib.parse import urlsplit

from crawler._version import __version__
from crawler.check.model import CheckReport, Occurrence, Problem
from crawler.check.report_common import (
    NOT_CHECKED,
    describe,
    is_broken,
    kind_sentence,
    kind_title,
    occurrences,
    status_phrase,
    summary,
    visible,
)

__all__ = ["MAX_GROUP_REFS", "write"]

#: Pages listed under each target in the grouped sections (all of them are in the table).
MAX_GROUP_REFS = 50

_STYLE = """
:root{--bg:#f6f7f9;--card:#fff;--fg:#1d232b;--muted:#5d6875;--line:#dde1e6;--bad:#c62828;
--warn:#b26a00;--ok:#2e7d32;--info:#1565c0;--code:#f0f2f5;--accent:#3949ab}
@media (prefers-color-scheme:dark){:root{--bg:#14171b;--card:#1d2127;--fg:#e6e9ed;
--muted:#9aa4af;--line:#323840;--bad:#ef5350;--warn:#ffb74d;--ok:#66bb6a;--info:#64b5f6;
--code:#262b32;--accent:#9fa8da}}
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
.stats{display:grid;grid-template-columns:repeat(auto-fill,minmax(112px,1fr));gap:10px;margin:0}
.kinds{display:flex;flex-wrap:wrap;gap:6px;margin:0 0 14px;padding:0;list-style:none}
.kinds li{border:1px solid var(--line);border-radius:999px;padding:1px 10px;font-size:13px}
.kinds b{color:var(--bad)}
.stats div{border:1px solid var(--line);border-radius:8px;padding:8px 12px}
.stats dt{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.stats dd{margin:0;font-size:22px;font-weight:650}
.stats .bad dd{color:var(--bad)}.stats .warn dd{color:var(--warn)}
svg text{fill:var(--fg);font-size:12px}svg .n{fill:var(--muted)}
.problem{border-top:1px solid var(--line);padding:12px 0}
.problem:first-of-type{border-top:0;padding-top:0}
.badge{flex:none;font-size:12px;font-weight:700;border-radius:4px;padding:1px 7px;color:#fff;
background:var(--bad)}.badge.warn{background:var(--warn)}
.why{color:var(--muted);margin:4px 0 6px}
ol.chain{margin:4px 0 8px;padding-left:22px;color:var(--muted)}
ul.refs{margin:4px 0 0;padding-left:20px}ul.refs li{margin:2px 0}
.pos{color:var(--muted);font-size:12px;margin-left:6px}
details>summary{cursor:pointer;font-weight:600;margin-bottom:8px}
.tools{display:flex;gap:10px;flex-wrap:wrap;align-items:center;margin-bottom:10px}
.tools select{max-width:300px}
.tools input,.tools select{font:inherit;padding:5px 9px;border:1px solid var(--line);
border-radius:6px;background:var(--card);color:var(--fg)}.tools input{flex:1;min-width:220px}
#shown{color:var(--muted);font-size:13px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:13px;table-layout:fixed;min-width:900px}
td code{word-break:normal;overflow-wrap:anywhere}
td.tag{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{position:sticky;top:0;background:var(--card);cursor:pointer;user-select:none;white-space:nowrap}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.warning td:first-child{border-left:3px solid var(--warn)}
tr.broken td:first-child{border-left:3px solid var(--bad)}
.empty{color:var(--muted)}
footer{color:var(--muted);font-size:12px;text-align:center}
"""

# Sort on a heading's click (numbers as numbers), filter by text and kind; counts what shows.
_SCRIPT = """
(function(){
var table=document.getElementById('occ');if(!table)return;
var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
var q=document.getElementById('q'),kind=document.getElementById('kind'),
shown=document.getElementById('shown');
function filter(){var t=q.value.trim().toLowerCase(),k=kind.value,n=0;
rows.forEach(function(r){var ok=(!k||r.dataset.kind===k||r.dataset.group===k)&&
(!t||r.textContent.toLowerCase().indexOf(t)>=0);r.hidden=!ok;if(ok)n++;});
shown.textContent=n+' of '+rows.length+' shown';}
q.addEventListener('input',filter);kind.addEventListener('change',filter);
Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){
th.addEventListener('click',function(){
var asc=th.getAttribute('aria-sort')!=='ascending',num=th.dataset.type==='num';
Array.prototype.forEach.call(table.tHead.rows[0].cells,function(h){h.removeAttribute('aria-sort');});
th.setAttribute('aria-sort',asc?'ascending':'descending');
rows.sort(function(a,b){var x=a.cells[i].dataset.v||a.cells[i].textContent,
y=b.cells[i].dataset.v||b.cells[i].textContent,c;
c=num?(Number(x)-Number(y)):x.localeCompare(y);return asc?c:-c;});
rows.forEach(function(r){body.appendChild(r);});});});
filter();})();
"""


def _h(s: str) -> str:
    return html.escape(visible(s), quote=True)


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _origin(report: CheckReport) -> str:
    """The first seed's ``scheme://host:port``: pages under it are shown by their path."""
    try:
        parts = urlsplit(report.seeds[0]) if report.seeds else None
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.netloc}" if parts and parts.netloc else ""


@lru_cache(maxsize=65_536)  # a page that links many broken URLs is shown once per link
def _url(url: str, origin: str = "") -> str:
    """The URL shown in code (its path alone when under ``origin``, the whole URL in its
    title), and a link only when it is http(s)."""
    if origin and url.startswith(origin + "/"):
        shown = f'<code title="{_h(url)}">{_h(url[len(origin) :])}</code>'
    else:
        shown = f"<code>{_h(url)}</code>"
    if url[:8].lower().startswith(("http://", "https://")):
        return f'<a href="{_h(url)}" rel="noopener noreferrer">{shown}</a>'
    return shown


def _status_class(label: str) -> str:
    if label[:1] == "2":
        return "ok"
    if label[:1] == "3":
        return "info"
    if label[:1] == "4":
        return "warn"
    return "bad"


_COLORS = {"ok": "#43a047", "info": "#1e88e5", "warn": "#fb8c00", "bad": "#e53935"}


def _chart(report: CheckReport) -> str:
    """Horizontal bars: URLs by final HTTP status, then broken URLs with no response by kind."""
    bars: list[tuple[str, int, str]] = []
    for status, n in sorted(report.stats.status.items()):
        bars.append((status_phrase(status), n, _status_class(str(status))))
    no_response = Counter(p.error for p in report.broken if p.status is None)
    for kind, n in sorted(no_response.items()):
        bars.append((kind_title(kind), n, "bad"))
    if not bars:
        return '<p class="empty">No URL was checked.</p>'
    top = max(n for _, n, _ in bars)
    label_w, bar_w, row_h = 230, 560, 26
    height = row_h * len(bars) + 8
    parts = [
        f'<svg role="img" aria-label="Results by status" width="100%" viewBox="0 0 '
        f'{label_w + bar_w + 90} {height}" preserveAspectRatio="xMinYMin meet">'
    ]
    for i, (label, n, cls) in enumerate(bars):
        y = 4 + i * row_h
        w = max(3.0, bar_w * n / top)
        title = f"{label}: {n:,} URL{'s' if n != 1 else ''}"
        parts.append(
            f'<g><title>{_h(title)}</title><text x="{label_w - 8}" y="{y + 16}" '
            f'text-anchor="end">{_h(label)}</text><rect x="{label_w}" y="{y + 3}" '
            f'width="{w:.1f}" height="{row_h - 8}" rx="3" fill="{_COLORS[cls]}"/>'
            f'<text class="n" x="{label_w + w + 6:.1f}" y="{y + 16}">{n:,}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _ref_item(occ: Occurrence, origin: str) -> str:
    return (
        f'<li>{_url(occ.page, origin)}<span class="pos">line {occ.line}, column {occ.column} · '
        f'&lt;{_h(occ.tag)} {_h(occ.attr)}=&quot;<span class="mono">{_h(occ.raw)}</span>'
        f"&quot;&gt;</span></li>"
    )


def _problem(p: Problem, origin: str) -> str:
    broken = is_broken(p)
    badge = str(p.status) if p.status is not None and p.error.startswith("http_") else p.error
    parts = [
        f'<div class="problem"><h3><span class="badge'
        f'{"" if broken else " warn"}" title="{_h(kind_sentence(p.error))}">{_h(badge)}</span>'
        f"{_url(p.url)}</h3>",
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


def _table(report: CheckReport, origin: str) -> str:
    rows = []
    kinds: Counter[str] = Counter()
    for p, occ in occurrences(report):
        group = "broken" if is_broken(p) else "warning"
        kinds[p.error] += 1
        status = "" if p.status is None else str(p.status)
        if occ is None:
            where = '<td class="empty">(a seed)</td><td></td><td></td><td></td><td></td>'
        else:
            where = (
                f"<td>{_url(occ.page, origin)}</td>"
                f'<td class="num" data-v="{occ.line}">{occ.line}</td>'
                f'<td class="num" data-v="{occ.column}">{occ.column}</td>'
                f'<td class="tag"><code>{_h(occ.tag)} {_h(occ.attr)}</code></td>'
                f"<td><code>{_h(occ.raw)}</code></td>"
            )
        rows.append(
            f'<tr class="{group}" data-kind="{_h(p.error)}" data-group="{group}">'
            f"<td>{_url(p.url)}</td><td>{_h(kind_title(p.error))}</td>"
            f'<td class="num" data-v="{status or -1}">{status}</td>{where}</tr>'
        )
    options = ['<option value="">All kinds</option>']
    if report.broken:
        options.append('<option value="broken">Broken</option>')
    if report.warnings:
        options.append('<option value="warning">Warnings</option>')
    options += [
        f'<option value="{_h(k)}">{_h(kind_title(k))} ({n:,})</option>'
        for k, n in sorted(kinds.items())
    ]
    heads = [
        ("URL", "", 25),
        ("Problem", "", 14),
        ("Status", "num", 5),
        ("Page", "", 26),
        ("Line", "num", 5),
        ("Col", "num", 4),
        ("Tag", "", 10),
        ("Raw value", "", 11),
    ]
    cols = "".join(f'<col width="{w}%">' for _, _, w in heads)
    head = "".join(f'<th scope="col" data-type="{t}">{h}</th>' for h, t, _ in heads)
    return (
        '<div class="tools"><input id="q" type="search" placeholder="Filter: URL, page, value'
        f'…" aria-label="Filter"><select id="kind" aria-label="Kind">{"".join(options)}'
        '</select><span id="shown"></span></div>'
        f'<div class="scroll"><table id="occ"><colgroup>{cols}</colgroup>'
        f"<thead><tr>{head}</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
    )


def _stat(label: str, value: str, cls: str = "") -> str:
    return f'<div class="{cls}"><dt>{label}</dt><dd>{value}</dd></div>'


def write(report: CheckReport, out: TextIO) -> None:
    """Write ``report`` as one self-contained HTML page to ``out``."""
    s = report.stats
    nb = len(report.broken)
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
            _stat("Warnings", f"{len(report.warnings):,}", "warn" if report.warnings else ""),
            _stat("Rechecked", f"{s.rechecked:,}"),
            _stat("Time", f"{s.duration:.1f} s"),
        ]
    )
    seeds = " ".join(_url(u) for u in report.seeds)
    origin = _origin(report)
    by_kind = Counter(kind_title(p.error) for p in report.broken)
    kinds = "".join(
        f"<li><b>{n:,}</b> {_h(k)}</li>" for k, n in sorted(by_kind.items(), key=lambda x: -x[1])
    )
    broken = (
        f'<ul class="kinds">{kinds}</ul>' + "".join(_problem(p, origin) for p in report.broken)
        if report.broken
        else '<p class="empty">None: every link checked works.</p>'
    )
    sections = [
        f'<section class="card"><h1>Link check {verdict}</h1><p class="seeds">{seeds}</p>'
        f'<dl class="stats">{stats}</dl></section>',
        f'<section class="card" id="chart"><h2>Results by status</h2>{_chart(report)}</section>',
        f'<section class="card" id="broken"><h2>Broken links ({nb:,})</h2>{broken}</section>',
    ]
    if report.warnings:
        unchecked = sum(p.error in NOT_CHECKED for p in report.warnings)
        nw = len(report.warnings)
        sections.append(
            f'<section class="card" id="warnings"><details><summary>Warnings ({nw:,}; '
            f"{unchecked:,} not checked)</summary>"
            + "".join(_problem(p, origin) for p in report.warnings)
            + "</details></section>"
        )
    if report.broken or report.warnings:
        sections.append(
            f'<section class="card" id="all"><h2>Every occurrence</h2>{_table(report, origin)}'
            "</section>"
        )
    csp = (
        f"default-src 'none'; style-src {_csp_hash(_STYLE)}; script-src {_csp_hash(_SCRIPT)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    title = f"crawler check: {summary(report)}"
    out.write(
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_h(title)}</title><style>{_STYLE}</style></head>\n<body><main>"
        + "\n".join(sections)
        + f"\n<footer>crawler {_h(__version__)} · {_h(summary(report))}</footer></main>"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
