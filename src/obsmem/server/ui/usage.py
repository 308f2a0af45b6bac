"""Model calls per role over time, drawn as inline SVG on the server, with the same numbers as a table.

:func:`usage_chart_svg` and :func:`usage_table` are pure: they take a
:class:`~obsmem.calls.UsageReport` (the cost ledger's rows per UTC day, role and model) and
return markup. The chart has one panel per measure (calls, input, cached input and output tokens,
mean latency); in each, one bar per role per day, coloured by role, each bar with a ``<title>``
naming its day, role and value. The table under it says the same for screen readers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from obsmem.calls import UsageReport, UsageRow
from obsmem.server.ui.html import counted, h, table

__all__ = ["MEASURES", "Measure", "usage_chart_svg", "usage_table"]

WIDTH = 760
_LEFT, _RIGHT, _TOP = 70, 10, 34
_PANEL, _GAP = 70, 40
_COLOURS = ("#0b5cad", "#2e8540", "#8a6d3b", "#6f42c1", "#b31d28", "#1b7c83", "#d4622a", "#57606a")


def _mean_latency(row: UsageRow) -> float:
    return row.latency_s / row.calls if row.calls else 0.0


@dataclass(frozen=True, slots=True)
class Measure:
    key: str
    title: str
    value: Callable[[UsageRow], float]
    unit: str = ""


MEASURES: tuple[Measure, ...] = (
    Measure("calls", "Calls", lambda r: r.calls),
    Measure("input_tokens", "Input tokens", lambda r: r.input_tokens),
    Measure("cached_input_tokens", "Cached input tokens", lambda r: r.cached_input_tokens),
    Measure("output_tokens", "Output tokens", lambda r: r.output_tokens),
    Measure("mean_latency_s", "Mean latency", _mean_latency, " s"),
)


def _number(value: float) -> str:
    if value == int(value):
        return f"{int(value):,}"
    if value < 0.001:
        return "<0.001"
    if value < 1:
        return f"{value:.3f}"
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def _roles(rows: tuple[UsageRow, ...]) -> list[str]:
    return sorted({row.role or "(none)" for row in rows})


def usage_chart_svg(report: UsageReport) -> str:
    """The chart of ``report`` by day and role (an SVG that says so when there is nothing to draw)."""
    rows = report.by("day", "role")
    if not rows:
        return (
            f'<svg class="usage-chart" role="img" aria-label="No model calls recorded" viewBox="0 0 {WIDTH} 40" '
            f'width="{WIDTH}" height="40" xmlns="http://www.w3.org/2000/svg"><title>No model calls recorded</title>'
            '<text x="10" y="25" font-size="13" fill="#57606a">No model calls recorded.</text></svg>'
        )
    days = sorted({row.day or "" for row in rows})
    roles = _roles(rows)
    colour = {role: _COLOURS[i % len(_COLOURS)] for i, role in enumerate(roles)}
    cell = {(row.day or "", row.role or "(none)"): row for row in rows}
    height = _TOP + len(MEASURES) * (_PANEL + _GAP)
    plot = WIDTH - _LEFT - _RIGHT
    group = plot / len(days)
    bar = min(28.0, group * 0.8 / len(roles))
    label_every = max(1, len(days) // 12)
    summary = (
        f"Model calls per role and day, {days[0]} to {days[-1]}: "
        + ", ".join(f"{role} {counted(sum(r.calls for r in rows if (r.role or '(none)') == role), 'call')}" for role in roles)
    )  # fmt: skip
    out = [
        f'<svg class="usage-chart" role="group" aria-label="{h(summary)}" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" xmlns="http://www.w3.org/2000/svg" data-days="{len(days)}" '
        f'data-roles="{h(" ".join(roles))}"><title>{h(summary)}</title><g class="legend">'
    ]
    x = _LEFT
    for role in roles:
        out.append(
            f'<rect x="{x}" y="8" width="12" height="12" fill="{colour[role]}"/>'
            f'<text x="{x + 16}" y="18" font-size="12" fill="#1b1f24">{h(role)}</text>'
        )
        x += 28 + 7 * len(role)
    out.append("</g>")
    for index, measure in enumerate(MEASURES):
        top = _TOP + index * (_PANEL + _GAP) + 16
        bottom = top + _PANEL
        peak = max(measure.value(row) for row in rows)
        scale = _PANEL / peak if peak > 0 else 0.0
        out.append(
            f'<g class="panel" data-measure="{measure.key}" data-max="{round(peak, 6)}">'
            f'<text x="{_LEFT}" y="{top - 6}" font-size="12" font-weight="bold" fill="#1b1f24">'
            f"{h(measure.title)}{h(measure.unit and f' ({measure.unit.strip()})')}</text>"
            f'<line x1="{_LEFT}" y1="{bottom}" x2="{WIDTH - _RIGHT}" y2="{bottom}" stroke="#8c959f"/>'
            f'<text x="{_LEFT - 6}" y="{top + 10}" text-anchor="end" font-size="11" fill="#57606a">{_number(peak)}</text>'
            f'<text x="{_LEFT - 6}" y="{bottom}" text-anchor="end" font-size="11" fill="#57606a">0</text>'
        )  # fmt: skip
        for d, day in enumerate(days):
            start = _LEFT + d * group + (group - bar * len(roles)) / 2
            for r, role in enumerate(roles):
                row = cell.get((day, role))
                if row is None:
                    continue
                value = measure.value(row)
                tall = round(value * scale, 1)
                out.append(
                    f'<rect class="bar" x="{round(start + r * bar, 1)}" y="{round(bottom - tall, 1)}" '
                    f'width="{round(max(1.0, bar - 1), 1)}" height="{tall}" fill="{colour[role]}" '
                    f'data-day="{h(day)}" data-role="{h(role)}" data-value="{round(value, 6)}">'
                    f"<title>{h(day)} · {h(role)}: {_number(value)}{measure.unit} {h(measure.title.lower())}</title></rect>"
                )
            if d % label_every == 0:
                out.append(
                    f'<text x="{round(_LEFT + (d + 0.5) * group, 1)}" y="{bottom + 14}" text-anchor="middle" '
                    f'font-size="10" fill="#57606a">{h(day[5:] if len(days) > 1 else day)}</text>'
                )
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def usage_table(report: UsageReport) -> str:
    """The chart's numbers, one row per day and role, then the total."""
    rows = report.by("day", "role")
    cells = [
        [h(row.day), h(row.role or "(none)"), _number(row.calls), _number(row.failed), _number(row.input_tokens),
         _number(row.cached_input_tokens), _number(row.output_tokens), _number(round(_mean_latency(row), 3)),
         f"{row.cost_usd:.4f}" + (f" (+{row.unpriced_calls} unpriced)" if row.unpriced_calls else "")]
        for row in rows
    ]  # fmt: skip
    if rows:
        total = report.total()
        cells.append(
            ["<strong>Total</strong>", "", _number(total.calls), _number(total.failed), _number(total.input_tokens),
             _number(total.cached_input_tokens), _number(total.output_tokens), _number(round(_mean_latency(total), 3)),
             f"{total.cost_usd:.4f}" + (f" (+{total.unpriced_calls} unpriced)" if total.unpriced_calls else "")]
        )  # fmt: skip
    return table(
        ["Day (UTC)", "Role", "Calls", "Failed", "Input tokens", "Cached input tokens", "Output tokens",
         "Mean latency (s)", "Cost (USD)"],
        cells, caption="Model calls per day and role", numeric=(2, 3, 4, 5, 6, 7, 8),
    )  # fmt: skip
