"""The wikilink graph around a knowledge node, drawn as inline SVG on the server.

:func:`neighbourhood` reads the node's neighbours one and two hops away through the store's public
reads (a node's own wikilinks, the records about it and what they mention, the records that
mention it), at most :data:`MAX_NODES` nodes (nearer hops first, then by name), and counts the
ones left out. :func:`radial_layout`
places them deterministically: the node in the middle, its neighbours evenly on an inner ring
(ordered by name), the second hop on an outer ring next to the neighbour that reached it.
:func:`graph_svg` draws the result: every node a link to its page, every edge with its relation
(the record's attribute) when it has one, with ``<title>`` and ARIA labels throughout.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from obsmem.knowledge import Knowledge, Node, Record, RecordView
from obsmem.server.ui.html import counted, h

__all__ = ["MAX_NODES", "Edge", "Graph", "GraphNode", "graph_svg", "neighbourhood", "radial_layout"]

MAX_NODES = 30
"""At most this many nodes are drawn (the centre included); the rest are reported as "+N more"."""
_READ = 50
"""Records read per node and direction while walking the graph."""
_LOADED = 200
"""At most this many nodes are looked up per hop (to order them by name and count the "+N more")."""
WIDTH, HEIGHT = 760, 560
_RINGS = (0.0, 150.0, 250.0)


@dataclass(frozen=True, slots=True)
class GraphNode:
    id: str
    name: str
    kind: str
    hop: int
    parent: str | None = None
    """The node one hop nearer the centre that reached this one (None for the centre)."""


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    label: str | None = None
    """The relation (the linking record's attribute); None for a plain wikilink."""
    title: str = ""
    """What made the edge: the linking record's text, or ``wikilink`` for a node's own link."""


@dataclass(slots=True)
class Graph:
    centre: GraphNode
    nodes: list[GraphNode] = field(default_factory=list)
    """Every node drawn, the centre first."""
    edges: list[Edge] = field(default_factory=list)
    more: int = 0
    """Neighbours found but not drawn (beyond :data:`MAX_NODES`)."""


def _links(node: Node, records: list[Record]) -> list[Edge]:
    """The edges ``node`` takes part in, read from its own mentions and ``records`` (those about it
    or mentioning it): a record about X mentioning Y is an edge X → Y."""
    edges = [Edge(node.id, target, None, "wikilink") for target in node.mentions if target != node.id]
    for record in records:
        label = record.attribute or None
        edges += [Edge(record.node_id, m, label, record.text) for m in record.mentions if m != record.node_id]
    return edges


async def _edges_of(knowledge: Knowledge, scope: str, node: Node, view: RecordView) -> list[Edge]:
    about = await knowledge.store.list_about(node.id, scope, view=view, limit=_READ)
    mentioning = await knowledge.store.list_mentioning(node.id, scope, view=view, limit=_READ)
    return _links(node, [*about.items, *mentioning.items])


async def neighbourhood(knowledge: Knowledge, scope: str, centre: Node, view: RecordView, *, hops: int = 2) -> Graph:
    """The nodes within ``hops`` (1 or 2) of ``centre`` visible from ``scope`` under ``view``."""
    graph = Graph(GraphNode(centre.id, centre.name, centre.kind, 0))
    graph.nodes.append(graph.centre)
    drawn: dict[str, GraphNode] = {centre.id: graph.centre}
    seen_edges: set[tuple[str, str, str | None]] = set()
    frontier: list[Node] = [centre]
    for hop in range(1, hops + 1):
        reached: list[tuple[str, str]] = []  # (node id, parent id), in the order found
        known: set[str] = set()
        for node in frontier:
            for edge in await _edges_of(knowledge, scope, node, view):
                other = edge.target if edge.source == node.id else edge.source
                if other not in drawn and other not in known:
                    known.add(other)
                    reached.append((other, node.id))
                key = (edge.source, edge.target, edge.label)
                if key not in seen_edges:
                    seen_edges.add(key)
                    graph.edges.append(edge)
        found: list[tuple[Node, str]] = []
        for node_id, parent in reached[:_LOADED]:  # only nodes this scope may see are drawn or counted
            loaded = await knowledge.store.get_node(node_id, scope)
            if loaded is not None:
                found.append((loaded, parent))
        found.sort(key=lambda pair: (pair[0].name.lower(), pair[0].id))
        room = max(0, MAX_NODES - len(drawn))
        graph.more += len(found[room:]) + max(0, len(reached) - _LOADED)
        for loaded, parent in found[:room]:
            drawn[loaded.id] = GraphNode(loaded.id, loaded.name, loaded.kind, hop, parent)
            graph.nodes.append(drawn[loaded.id])
        frontier = [loaded for loaded, _ in found[:room]]
    graph.edges = [e for e in graph.edges if e.source in drawn and e.target in drawn]
    return graph


def radial_layout(nodes: list[GraphNode]) -> dict[str, tuple[float, float]]:
    """Where each node goes: the centre (hop 0) in the middle; hop 1 evenly on the inner ring in
    the order given, the first at the top; hop 2 on the outer ring inside the sector of the node
    that reached it, spread evenly across that sector in the order given. The same nodes give
    the same picture."""
    cx, cy = WIDTH / 2, HEIGHT / 2
    where: dict[str, tuple[float, float]] = {}
    angle: dict[str, float] = {}

    def place(node: GraphNode, theta: float) -> None:
        angle[node.id] = theta
        radius = _RINGS[node.hop]
        where[node.id] = (round(cx + radius * math.cos(theta), 1), round(cy + radius * math.sin(theta), 1))

    inner = [n for n in nodes if n.hop == 1]
    sector = 2 * math.pi / max(1, len(inner))
    for node in nodes:
        if node.hop == 0:
            place(node, 0.0)
    for index, node in enumerate(inner):
        place(node, -math.pi / 2 + sector * index)
    outer = [n for n in nodes if n.hop == 2]
    for parent in {n.parent for n in outer}:
        children = [n for n in outer if n.parent == parent]
        middle = angle.get(parent or "", -math.pi / 2)
        for index, node in enumerate(children):
            place(node, middle + sector * ((index + 0.5) / len(children) - 0.5))
    return where


_KIND_COLOURS = ("#0b5cad", "#2e8540", "#8a6d3b", "#6f42c1", "#b31d28", "#1b7c83")


def _colour(kind: str, kinds: list[str]) -> str:
    return _KIND_COLOURS[kinds.index(kind) % len(_KIND_COLOURS)]


def _short(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _label_at(x: float, y: float, radius: float, hop: int) -> tuple[float, float, str]:
    """Where a node's name goes, clear of its edges (which run along the spokes): under the
    centre; beside a first-hop node (across its spoke, whose outer end leads to the second hop);
    past a second-hop node, away from the centre."""
    if hop == 0:
        return x, round(y + radius + 14, 1), "middle"
    theta = math.atan2(y - HEIGHT / 2, x - WIDTH / 2)
    if hop == 1:
        theta += math.pi / 2
    dx, dy = math.cos(theta), math.sin(theta)
    anchor = "start" if dx > 0.3 else "end" if dx < -0.3 else "middle"
    lx = x + dx * (radius + 4)
    ly = y + dy * (radius + 4) + (4 if abs(dy) <= 0.7 else 12 if dy > 0 else -2)
    return round(lx, 1), round(ly, 1), anchor


def graph_svg(graph: Graph, link: Callable[[str], str]) -> str:
    """The graph as an inline ``<svg>`` (``link(node_id)`` is each node's page)."""
    where = radial_layout(graph.nodes)
    names = {n.id: n.name for n in graph.nodes}
    kinds = sorted({n.kind for n in graph.nodes})
    more = f", and {graph.more} more not drawn" if graph.more else ""
    label = (
        f"Wikilink graph around {graph.centre.name}: {counted(len(graph.nodes) - 1, 'linked node')} within two hops, "
        f"{counted(len(graph.edges), 'link')}{more}"
    )
    out = [
        f'<svg class="graph" role="group" aria-label="{h(label)}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg" data-nodes="{len(graph.nodes)}" '
        f'data-edges="{len(graph.edges)}" data-more="{graph.more}"><title>{h(label)}</title>'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="22" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#8c959f"/></marker></defs>'
    ]
    for edge in graph.edges:
        (x1, y1), (x2, y2) = where[edge.source], where[edge.target]
        what = f"{names[edge.source]} → {names[edge.target]}" + (f" ({edge.label})" if edge.label else "")
        out.append(
            f'<g class="edge" data-source="{h(edge.source)}" data-target="{h(edge.target)}" '
            f'data-label="{h(edge.label or "")}"><title>{h(what)}: {h(_short(edge.title, 200))}</title>'
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#8c959f" stroke-width="1.5" '
            'marker-end="url(#arrow)"/>'
        )
        if edge.label:
            mx, my = round((x1 + x2) / 2, 1), round((y1 + y2) / 2, 1)
            out.append(
                f'<text x="{mx}" y="{my - 4}" text-anchor="middle" font-size="11" fill="#57606a" '
                f'paint-order="stroke" stroke="#f6f7f9" stroke-width="3">{h(_short(edge.label, 24))}</text>'
            )
        out.append("</g>")
    for node in graph.nodes:
        x, y = where[node.id]
        radius = 16 if node.hop == 0 else 11 if node.hop == 1 else 8
        where_from = "this node" if node.hop == 0 else f"{counted(node.hop, 'hop')} away"
        tx, ty, anchor = _label_at(x, y, radius, node.hop)
        out.append(
            f'<a class="node" href="{h(link(node.id))}" data-node="{h(node.id)}" data-hop="{node.hop}" '
            f'aria-label="{h(node.name)} ({h(node.kind)}, {where_from})">'
            f"<title>{h(node.name)} ({h(node.kind)}, {where_from})</title>"
            f'<circle cx="{x}" cy="{y}" r="{radius}" fill="{_colour(node.kind, kinds)}" '
            f'stroke="{"#f0a500" if node.hop == 0 else "#fff"}" stroke-width="3"/>'
            f'<text x="{tx}" y="{ty}" text-anchor="{anchor}" font-size="12" fill="#1b1f24" paint-order="stroke" '
            f'stroke="#f6f7f9" stroke-width="4" font-weight="{"bold" if node.hop == 0 else "normal"}">'
            f"{h(_short(node.name, 22))}</text></a>"
        )
    if graph.more:
        out.append(f'<text x="{WIDTH - 8}" y="{HEIGHT - 8}" text-anchor="end" font-size="12" fill="#57606a">'
                   f"+{graph.more} more</text>")  # fmt: skip
    out.append("</svg>")
    return "".join(out)
