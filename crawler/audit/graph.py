"""The link graph as files: GraphML, GEXF (Gephi's) or a CSV pair (``NAME.nodes.csv``,
``NAME.edges.csv`` for ``--graph NAME.csv``).

Nodes are the URLs linked (http(s), as linked: a redirect is a node of its own, with its
first status) and the pages crawled, each with its status, click depth (-1: not a page, or
unreached), inlinks (distinct pages linking it), outlinks (distinct URLs it links) and its
canonical ("" when none). Edges are (page, URL linked) pairs with the first link's tag,
whether every link of the pair is nofollow, and how many links there are. Written after the
crawl in two passes over the checker's occurrence columns (a page's links together): the
counts first, then nodes and edges are streamed to the file; what is held besides the
columns is a few integers a URL and one page's links at a time.
"""

from __future__ import annotations

import csv
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO
from xml.sax.saxutils import quoteattr

from crawler.check.report_common import clean

if TYPE_CHECKING:
    from crawler.audit.analysis import _Analysis

__all__ = ["GRAPH_FORMATS", "graph_format", "write_graph"]

GRAPH_FORMATS = (".graphml", ".gexf", ".csv")
_NODE_FIELDS = ("url", "status", "depth", "inlinks", "outlinks", "canonical")
_EDGE_FIELDS = ("source", "target", "tag", "nofollow", "count")


def graph_format(path: str) -> str | None:
    """The format a ``--graph`` file name asks for (None: not one of GRAPH_FORMATS)."""
    lower = path.lower()
    return next((ext for ext in GRAPH_FORMATS if lower.endswith(ext)), None)


class _Graph:
    """Nodes and edges of the run, read from the occurrence columns."""

    def __init__(self, run: _Analysis) -> None:
        self.run = run
        a = run.a
        store, targets = a.store, a.targets
        # node ids: a target's own id (http(s) ones: the others are no node), then the pages
        # that are not targets; no dict of the URLs besides the targets' own
        known = len(targets)
        self._targets = targets
        self.node_of_target = array("i", range(known))
        for tid in range(known):
            if targets[tid].startswith("\0"):
                self.node_of_target[tid] = -1
        self._pages: list[str] = []  # the pages that are not targets, from node id ``known``
        self.node_of_page = array("i", [-1]) * len(store.pages)
        for pid in range(len(store.pages)):
            url = store.pages[pid]
            node = targets.get(url)
            if node is None:
                node = known + len(self._pages)
                self._pages.append(url)
            self.node_of_page[pid] = node
        self.inlinks = array("I", [0]) * (known + len(self._pages))
        self.outlinks = array("I", [0]) * (known + len(self._pages))
        for source, pairs in self._blocks():
            self.outlinks[source] += len(pairs)
            for target in pairs:
                if target != source:
                    self.inlinks[target] += 1

    def url(self, node: int) -> str:
        """The URL of a node id."""
        known = len(self.node_of_target)
        return self._targets[node] if node < known else self._pages[node - known]

    def _nodes(self) -> Iterator[int]:
        """The node ids in order: the http(s) targets, then the other pages."""
        known = len(self.node_of_target)
        for tid in range(known):
            if self.node_of_target[tid] >= 0:
                yield tid
        yield from range(known, known + len(self._pages))

    def _blocks(self) -> Iterator[tuple[int, dict[int, list[object]]]]:
        """Per page (its links together): source node -> {target node: [tag, nofollow, n]}."""
        store = self.run.a.store
        current = -1
        pairs: dict[int, list[object]] = {}
        for pid, tid, tag_id, nofollow in store.edges():
            if pid != current:
                if current >= 0:
                    yield self.node_of_page[current], pairs
                current, pairs = pid, {}
            target = self.node_of_target[tid]
            if target < 0:
                continue
            pair = pairs.get(target)
            if pair is None:
                pairs[target] = [tag_id, nofollow, 1]
            else:
                pair[1] = pair[1] and nofollow
                pair[2] += 1  # type: ignore[operator]
        if current >= 0:
            yield self.node_of_page[current], pairs

    def nodes(self) -> Iterator[tuple[str, int, int, int, int, str]]:
        run = self.run
        a = run.a
        for node in self._nodes():
            url = self.url(node)
            verdict = a.verdicts.get(url)
            status = -1
            if verdict is not None and verdict.status is not None:
                status = verdict.hop_statuses[0] if verdict.hop_statuses else verdict.status
            facts = a.facts.get(url)
            canonical = facts.canonical if facts is not None and facts.canonical else ""
            depth = run.depth_of(url)
            yield url, status, depth, self.inlinks[node], self.outlinks[node], canonical

    def edges(self) -> Iterator[tuple[str, str, str, bool, int]]:
        store = self.run.a.store
        url = self.url
        for source, pairs in self._blocks():
            source_url = url(source)
            for target, (tag_id, nofollow, count) in pairs.items():
                tag = store.tag_attr(tag_id)[0]  # type: ignore[arg-type]
                yield source_url, url(target), tag, bool(nofollow), count  # type: ignore[misc]


def _q(text: str) -> str:
    return quoteattr(clean(text))


def _graphml(graph: _Graph, out: TextIO) -> None:
    out.write(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
        '<key id="url" for="node" attr.name="url" attr.type="string"/>\n'
        '<key id="status" for="node" attr.name="status" attr.type="int"/>\n'
        '<key id="depth" for="node" attr.name="depth" attr.type="int"/>\n'
        '<key id="inlinks" for="node" attr.name="inlinks" attr.type="int"/>\n'
        '<key id="outlinks" for="node" attr.name="outlinks" attr.type="int"/>\n'
        '<key id="canonical" for="node" attr.name="canonical" attr.type="string"/>\n'
        '<key id="tag" for="edge" attr.name="tag" attr.type="string"/>\n'
        '<key id="nofollow" for="edge" attr.name="nofollow" attr.type="boolean"/>\n'
        '<key id="count" for="edge" attr.name="count" attr.type="int"/>\n'
        '<graph edgedefault="directed">\n'
    )
    for url, status, depth, inlinks, outlinks, canonical in graph.nodes():
        out.write(
            f'<node id={_q(url)}><data key="url">{_q(url)[1:-1]}</data>'
            f'<data key="status">{status}</data><data key="depth">{depth}</data>'
            f'<data key="inlinks">{inlinks}</data><data key="outlinks">{outlinks}</data>'
            f'<data key="canonical">{_q(canonical)[1:-1]}</data></node>\n'
        )
    for source, target, tag, nofollow, count in graph.edges():
        out.write(
            f"<edge source={_q(source)} target={_q(target)}>"
            f'<data key="tag">{_q(tag)[1:-1]}</data>'
            f'<data key="nofollow">{"true" if nofollow else "false"}</data>'
            f'<data key="count">{count}</data></edge>\n'
        )
    out.write("</graph>\n</graphml>\n")


def _gexf(graph: _Graph, out: TextIO) -> None:
    out.write(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<gexf xmlns="http://gexf.net/1.3" version="1.3">\n'
        '<graph defaultedgetype="directed" mode="static">\n'
        '<attributes class="node">\n'
        '<attribute id="0" title="url" type="string"/>\n'
        '<attribute id="1" title="status" type="integer"/>\n'
        '<attribute id="2" title="depth" type="integer"/>\n'
        '<attribute id="3" title="inlinks" type="integer"/>\n'
        '<attribute id="4" title="outlinks" type="integer"/>\n'
        '<attribute id="5" title="canonical" type="string"/>\n'
        "</attributes>\n"
        '<attributes class="edge">\n'
        '<attribute id="6" title="tag" type="string"/>\n'
        '<attribute id="7" title="nofollow" type="boolean"/>\n'
        '<attribute id="8" title="count" type="integer"/>\n'
        "</attributes>\n<nodes>\n"
    )
    for url, status, depth, inlinks, outlinks, canonical in graph.nodes():
        out.write(
            f"<node id={_q(url)} label={_q(url)}><attvalues>"
            f'<attvalue for="0" value={_q(url)}/><attvalue for="1" value="{status}"/>'
            f'<attvalue for="2" value="{depth}"/><attvalue for="3" value="{inlinks}"/>'
            f'<attvalue for="4" value="{outlinks}"/><attvalue for="5" value={_q(canonical)}/>'
            "</attvalues></node>\n"
        )
    out.write("</nodes>\n<edges>\n")
    for i, (source, target, tag, nofollow, count) in enumerate(graph.edges()):
        out.write(
            f'<edge id="{i}" source={_q(source)} target={_q(target)}><attvalues>'
            f'<attvalue for="6" value={_q(tag)}/>'
            f'<attvalue for="7" value="{"true" if nofollow else "false"}"/>'
            f'<attvalue for="8" value="{count}"/></attvalues></edge>\n'
        )
    out.write("</edges>\n</graph>\n</gexf>\n")


def _csv_pair(graph: _Graph, path: str) -> None:
    stem = path[: -len(".csv")]
    with open(f"{stem}.nodes.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(_NODE_FIELDS)
        writer.writerows(graph.nodes())
    with open(f"{stem}.edges.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(_EDGE_FIELDS)
        for source, target, tag, nofollow, count in graph.edges():
            writer.writerow((source, target, tag, "true" if nofollow else "false", count))


def write_graph(run: _Analysis, path: str) -> None:
    """Write the run's link graph to ``path`` in the format its extension names.

    Raises:
        ValueError: an extension that is not one of GRAPH_FORMATS.
        OSError: the file cannot be written.
    """
    fmt = graph_format(path)
    if fmt is None:
        raise ValueError(f"--graph {path!r}: the name must end in {', '.join(GRAPH_FORMATS)}")
    graph = _Graph(run)
    if fmt == ".csv":
        _csv_pair(graph, path)
        return
    with open(path, "w", encoding="utf-8") as out:
        (_graphml if fmt == ".graphml" else _gexf)(graph, out)
