"""The inspector's server-drawn SVG, as pure functions over hand-made inputs: the usage chart
(model calls per role and day) with its table, and the wikilink graph's radial layout and drawing."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from obsmem.calls import UsageReport, UsageRow
from obsmem.server.ui.graph import HEIGHT, WIDTH, Edge, Graph, GraphNode, graph_svg, radial_layout
from obsmem.server.ui.usage import MEASURES, usage_chart_svg, usage_table

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    """The SVG as XML: it must be well formed (escaping included)."""
    return ET.fromstring(svg)


def bars(root: ET.Element) -> list[dict[str, str]]:
    return [
        {"measure": panel.get("data-measure", ""), **{k: rect.get(f"data-{k}", "") for k in ("day", "role", "value")},
         "height": rect.get("height", ""), "x": rect.get("x", ""), "title": "".join(rect.itertext())}
        for panel in root.iter(f"{SVG}g") if panel.get("class") == "panel"
        for rect in panel.iter(f"{SVG}rect") if rect.get("class") == "bar"
    ]  # fmt: skip


def row(day: str, role: str, model: str = "m", **values: float) -> UsageRow:
    return UsageRow(day=day, role=role, model=model, **values)  # type: ignore[arg-type]


# -- the usage chart ------------------------------------------------------------------------------
def test_an_empty_report_says_nothing_was_recorded() -> None:
    root = parse(usage_chart_svg(UsageReport()))
    assert root.get("aria-label") == "No model calls recorded"
    assert bars(root) == []
    assert "No model calls recorded" in usage_chart_svg(UsageReport())
    table = usage_table(UsageReport())
    assert "<tbody></tbody>" in table and "Total" not in table


def test_a_single_day_sums_models_per_role() -> None:
    report = UsageReport((
        row("2026-12-01", "observer", "a", calls=3, input_tokens=900, cached_input_tokens=300, output_tokens=60,
            latency_s=3.0),
        row("2026-12-01", "observer", "b", calls=1, input_tokens=100, output_tokens=40, latency_s=1.0),
        row("2026-12-01", "reflector", "a", calls=2, input_tokens=2000, output_tokens=500, latency_s=5.0, failed=1),
    ))  # fmt: skip
    root = parse(usage_chart_svg(report))
    assert root.get("data-days") == "1" and root.get("data-roles") == "observer reflector"
    found = {(b["measure"], b["role"]): float(b["value"]) for b in bars(root)}
    assert found == {
        ("calls", "observer"): 4, ("calls", "reflector"): 2,
        ("input_tokens", "observer"): 1000, ("input_tokens", "reflector"): 2000,
        ("cached_input_tokens", "observer"): 300, ("cached_input_tokens", "reflector"): 0,
        ("output_tokens", "observer"): 100, ("output_tokens", "reflector"): 500,
        ("mean_latency_s", "observer"): 1.0, ("mean_latency_s", "reflector"): 2.5,
    }  # fmt: skip
    heights = {(b["measure"], b["role"]): float(b["height"]) for b in bars(root)}
    assert heights[("calls", "observer")] == 70.0 and heights[("calls", "reflector")] == 35.0  # the panel's peak is full
    assert heights[("cached_input_tokens", "reflector")] == 0.0
    titles = [b["title"] for b in bars(root) if b["measure"] == "mean_latency_s"]
    assert "2026-12-01 · reflector: 2.50 s mean latency" in titles
    assert "observer 4 calls, reflector 2 calls" in (root.get("aria-label") or "")
    table = usage_table(report)
    assert table.count("<tr>") == 1 + 2 + 1  # header, two roles, the total
    assert "<td>observer</td><td class=num>4</td><td class=num>0</td><td class=num>1,000</td>" in table
    assert "<td class=num>6</td><td class=num>1</td><td class=num>3,000</td>" in table  # the total row


def test_several_days_with_a_role_missing_on_one() -> None:
    report = UsageReport((
        row("2026-11-29", "observer", calls=2, latency_s=1.0),
        row("2026-11-29", "reflector", calls=1, latency_s=4.0),
        row("2026-11-30", "observer", calls=5, latency_s=2.0),
        row("2026-12-01", "observer", calls=1, latency_s=0.5),
        row("2026-12-01", "reflector", calls=1, latency_s=3.0),
    ))  # fmt: skip
    root = parse(usage_chart_svg(report))
    assert root.get("data-days") == "3"
    calls = [b for b in bars(root) if b["measure"] == "calls"]
    assert [(b["day"], b["role"], b["value"]) for b in calls] == [
        ("2026-11-29", "observer", "2"), ("2026-11-29", "reflector", "1"), ("2026-11-30", "observer", "5"),
        ("2026-12-01", "observer", "1"), ("2026-12-01", "reflector", "1"),
    ]  # fmt: skip
    xs = [float(b["x"]) for b in calls]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)  # days left to right, roles side by side
    assert len(bars(root)) == len(MEASURES) * 5
    assert usage_chart_svg(report) == usage_chart_svg(report)


def test_role_names_are_escaped() -> None:
    report = UsageReport((row("2026-12-01", '<script>"&', calls=1),))
    svg = usage_chart_svg(report)
    assert "<script>" not in svg and "<script>" not in usage_table(report)
    assert parse(svg).get("data-roles") == '<script>"&'


# -- the wikilink graph --------------------------------------------------------------------------
def node(name: str, hop: int, parent: str | None = None) -> GraphNode:
    return GraphNode(name.lower(), name, "entity", hop, parent)


def sample(more: int = 0) -> Graph:
    centre = node("Nadia", 0)
    nodes = [centre, node("Lisbon", 1, "nadia"), node("Paris", 1, "nadia"), node("Pixel", 1, "nadia"),
             node("Portugal", 2, "lisbon"), node("France", 2, "paris")]  # fmt: skip
    edges = [Edge("nadia", "lisbon", "home", "Nadia lives in [[Lisbon]]"), Edge("nadia", "paris", None, "wikilink"),
             Edge("pixel", "nadia", "owner", "[[Pixel]] is Nadia's cat"), Edge("lisbon", "portugal", None, "x"),
             Edge("paris", "france", None, "y")]  # fmt: skip
    return Graph(centre, nodes, edges, more)


def test_the_radial_layout_puts_hops_on_rings() -> None:
    graph = sample()
    where = radial_layout(graph.nodes)
    assert where == radial_layout(graph.nodes)  # deterministic
    cx, cy = WIDTH / 2, HEIGHT / 2
    assert where["nadia"] == (cx, cy)

    def radius(node_id: str) -> float:
        return math.hypot(where[node_id][0] - cx, where[node_id][1] - cy)

    assert [round(radius(n)) for n in ("lisbon", "paris", "pixel")] == [150, 150, 150]
    assert [round(radius(n)) for n in ("portugal", "france")] == [250, 250]
    assert where["lisbon"] == (cx, cy - 150)  # the first neighbour at the top, then clockwise
    spread = {round(math.dist(where[a], where[b])) for a, b in (("lisbon", "paris"), ("paris", "pixel"), ("pixel", "lisbon"))}
    assert len(spread) == 1  # evenly spaced

    def angle(node_id: str) -> float:
        return math.atan2(where[node_id][1] - cy, where[node_id][0] - cx)

    # a second-hop node lies nearer its own parent than the other first-hop nodes
    for child, parent in (("portugal", "lisbon"), ("france", "paris")):
        gaps = {n: abs(math.remainder(angle(child) - angle(n), 2 * math.pi)) for n in ("lisbon", "paris", "pixel")}
        assert min(gaps, key=gaps.__getitem__) == parent, (child, gaps)


@pytest.mark.parametrize("more", [0, 7])
def test_the_graph_svg_links_every_node_and_labels_edges(more: int) -> None:
    svg = graph_svg(sample(more), lambda node_id: f"/ui/knowledge/nodes/{node_id}?x=1&y=2")
    root = parse(svg)
    links = {a.get("data-node"): a for a in root.iter(f"{SVG}a")}
    assert set(links) == {"nadia", "lisbon", "paris", "pixel", "portugal", "france"}
    assert links["paris"].get("href") == "/ui/knowledge/nodes/paris?x=1&y=2"
    assert links["portugal"].get("aria-label") == "Portugal (entity, 2 hops away)"
    assert all(a.find(f"{SVG}title") is not None for a in links.values())
    edges = [g for g in root.iter(f"{SVG}g") if g.get("class") == "edge"]
    assert [(g.get("data-source"), g.get("data-target"), g.get("data-label")) for g in edges][:3] == [
        ("nadia", "lisbon", "home"), ("nadia", "paris", ""), ("pixel", "nadia", "owner")]
    labelled = {"".join(t.itertext()) for g in edges for t in g.iter(f"{SVG}text")}
    assert labelled == {"home", "owner"}
    assert "Nadia → Lisbon (home): Nadia lives in [[Lisbon]]" in "".join(edges[0].find(f"{SVG}title").itertext())  # type: ignore[union-attr]
    assert root.get("data-more") == str(more)
    assert (f"+{more} more" in svg) == bool(more)
    assert "5 linked nodes within two hops, 5 links" in (root.get("aria-label") or "")


def test_the_graph_escapes_names() -> None:
    graph = Graph(node('<b>"x"&', 0), [], [])
    graph.nodes.append(graph.centre)
    svg = graph_svg(graph, lambda node_id: "/n?a=1&b=<")
    assert "<b>" not in svg
    assert parse(svg).find(f"{SVG}a").get("href") == "/n?a=1&b=<"  # type: ignore[union-attr]
