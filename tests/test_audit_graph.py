"""``crawler audit --graph``: GraphML, GEXF and the CSV pair hold the same graph, networkx
reads GraphML and GEXF back identically, and the graph is the site's (tests/audit_site.py)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from audit_site import MESH, site_app

from crawler.audit import audit
from crawler.config import ConfigError

pytestmark = pytest.mark.timeout(60)
_NODE_INTS = ("status", "depth", "inlinks", "outlinks")


def _from_csv(stem: Path) -> nx.DiGraph:
    graph = nx.DiGraph()
    with open(f"{stem}.nodes.csv", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            attrs: dict[str, Any] = dict(row)
            for key in _NODE_INTS:
                attrs[key] = int(attrs[key])
            graph.add_node(row["url"], **attrs)
    with open(f"{stem}.edges.csv", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            graph.add_edge(
                row["source"],
                row["target"],
                tag=row["tag"],
                nofollow=row["nofollow"] == "true",
                count=int(row["count"]),
            )
    return graph


def _plain(graph: nx.DiGraph) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], Any]]:
    nodes = {
        n: {k: v for k, v in d.items() if k not in ("label", "id")}
        for n, d in graph.nodes(data=True)
    }
    edges = {
        (s, t): {k: v for k, v in d.items() if k != "id"} for s, t, d in graph.edges(data=True)
    }
    return nodes, edges


async def test_graphml_gexf_and_csv_hold_the_same_graph(serve: Any, tmp_path: Path) -> None:
    server = await serve(site_app())
    base = str(server.make_url("/")).rstrip("/")
    for name in ("g.graphml", "g.gexf", "g.csv"):
        await audit(base + "/", graph=str(tmp_path / name))
    from_graphml = nx.read_graphml(tmp_path / "g.graphml")
    from_gexf = nx.read_gexf(tmp_path / "g.gexf")
    from_csv = _from_csv(tmp_path / "g")
    assert isinstance(from_graphml, nx.DiGraph) and not from_graphml.is_multigraph()
    assert _plain(from_graphml) == _plain(from_gexf) == _plain(from_csv)

    nodes, edges = _plain(from_graphml)
    u = lambda path: base + path  # noqa: E731
    # the site as built: a redirect is a node with its own status; depth by clicks
    assert nodes[u("/moved")]["status"] == 301 and nodes[u("/moved")]["depth"] == -1
    assert nodes[u("/d5")]["depth"] == 5 and nodes[u("/d5")]["inlinks"] == 2
    assert nodes[u("/dead-end")]["outlinks"] == 0
    assert nodes[u("/dup")]["canonical"] == u("/about") and nodes[u("/en")]["canonical"] == ""
    assert u("/gone") not in nodes  # a canonical's target, linked by no page: no node
    assert nodes[u("/private/secret")]["status"] == -1  # robots.txt: never requested
    assert edges[u("/"), u("/nf")] == {"tag": "a", "nofollow": True, "count": 1}
    assert edges[u("/"), u("/moved")] == {"tag": "a", "nofollow": False, "count": 1}
    # every mesh page links every other mesh page (but the dead end, which links nowhere)
    linked = [p for p in MESH if p not in ("/dead-end", "/private/secret")]
    for source in linked:
        for target in MESH:
            if target != source:
                assert (u(source), u(target)) in edges
    assert not any(s == u("/dead-end") for s, _ in edges)


async def test_a_bad_graph_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="graph"):
        await audit("http://127.0.0.1:9/", graph="g.png")
