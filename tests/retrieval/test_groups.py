"""Pure group markup and reflection regrouping, tested with tables."""

from __future__ import annotations

import pytest

from obsmem.models.base import Usage
from obsmem.om.activation import reflection_slice
from obsmem.om.text.groups import (
    ObservationGroup,
    find_group,
    group_safe_line_count,
    parse_groups,
    render_for_context,
    strip_groups,
    wrap_group,
)
from obsmem.om.protocols import ReflectionRequest, ReflectionResult
from obsmem.om.regroup import GroupedReflector, regroup
from obsmem.om.sections import wrap_section

pytestmark = pytest.mark.anyio


def group(gid: str, first: int, last: int, body: str, thread: str = "t1") -> ObservationGroup:
    return ObservationGroup(gid, thread, first, last, f"m{first}", f"m{last}", body)


A = group(
    "aaaaaaaaaaaa",
    1,
    8,
    "Date: Jun 1, 2025\n* 🔴 (09:00) User lives in Lisbon.\n* (09:05) User has a cat named Pixel.",
)
B = group("bbbbbbbbbbbb", 9, 15, "Date: Jun 1, 2025\n* (10:00) User deploys with Terraform 1.7.")
C = group(
    "cccccccccccc", 16, 30, "Date: Jun 3, 2025\n* 🔴 (08:00) User runs the Berlin marathon in September."
)


def test_wrap_parse_round_trip_escapes_attributes_and_drops_echoed_tags() -> None:
    odd = ObservationGroup(
        "0123456789ab", 't"1<x>', 3, 9, "a:b", 'c"d', 'line\n<observation-group id="x">\nmore'
    )
    (parsed,) = parse_groups(wrap_group(odd))
    assert parsed == ObservationGroup("0123456789ab", 't"1<x>', 3, 9, "a:b", 'c"d', "line\nmore")
    empty = wrap_group(group("x", 1, 2, "  \n"))  # a cycle that noted nothing still covers its messages
    assert [(g.range, g.body) for g in parse_groups(empty)] == [("1:2", "")]
    assert render_for_context(f"* a\n\n{empty}") == "* a"
    assert render_for_context(f"<thread id=\"t\">\n{empty}\n</thread>").strip() == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain text", []),
        ('<observation-group id="x" thread="t" range="a:b">\nbody\n</observation-group>', []),  # malformed
        ('<observation-group id="x" thread="t" range="1:2">\nunclosed body', [("x", "unclosed body")]),
    ],
)
def test_parse_is_tolerant(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(g.id, g.body) for g in parse_groups(text)] == expected


def test_render_shows_a_heading_per_group_and_no_tags() -> None:
    text = "\n\n".join(wrap_group(g) for g in (A, B))
    rendered = render_for_context(text)
    assert rendered.count("## Group `") == 2 and "observation-group" not in rendered
    assert strip_groups(text).split() == (A.body + "\n" + B.body).split()
    assert find_group(["nothing here", text], B.id) == B


def test_a_slice_never_ends_inside_a_group() -> None:
    lines = "\n\n".join(wrap_group(g) for g in (A, B, C)).split("\n")
    ends = [i + 1 for i, line in enumerate(lines) if line == "</observation-group>"]
    for count in range(1, len(lines) + 1):
        safe = group_safe_line_count(lines, count)
        assert safe in ends or lines[safe - 1] == "" or safe == 0
        assert len(parse_groups("\n".join(lines[:safe]))) == sum(1 for e in ends if e <= safe)
    text, count = reflection_slice("\n".join(lines), 300, 40)
    assert text.rstrip().endswith("</observation-group>") and count in ends


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        # Each date block maps to the sources its lines came from; B is not mentioned and joins A's block.
        (
            "Date: Jun 1, 2025\n* 🔴 User lives in Lisbon.\n\n"
            "Date: Jun 3, 2025\n* User runs the Berlin marathon in September.",
            [(1, 15), (16, 30)],
        ),
        # A rephrased line still maps (word overlap); the unmatched header-less text rides along.
        (
            "Date: Jun 1, 2025\n"
            "* User lives in Lisbon with cat Pixel; deploys with Terraform 1.7, runs Berlin marathon.",
            [(1, 30)],
        ),
        # Nothing maps: one group spanning every source.
        ("Completely new words only.", [(1, 30)]),
    ],
)
def test_regroup_spans_min_start_to_max_end_of_its_sources(
    output: str, expected: list[tuple[int, int]]
) -> None:
    groups = parse_groups(regroup(output, [A, B, C]))
    assert [(g.first_seq, g.last_seq) for g in groups] == expected
    assert all(g.kind == "reflection" for g in groups)
    assert strip_groups(regroup(output, [A, B, C])).split() == output.split()


class EchoReflector:
    """A reflector that returns its input's non-header lines, recording what it was shown."""

    name = "echo"

    def __init__(self) -> None:
        self.seen = ""

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        self.seen = request.observations
        return ReflectionResult(observations=request.observations, usage=Usage())


async def test_any_reflector_sees_plain_text_and_gets_groups_back_per_thread() -> None:
    inner = EchoReflector()
    text = "\n\n".join(
        [
            wrap_section("t1", wrap_group(A)),
            wrap_section("t2", wrap_group(group("dd", 3, 4, "* x y z", "t2"))),
        ]
    )
    result = await GroupedReflector(inner, lambda s: len(s.split())).reflect(
        ReflectionRequest(text, target_tokens=10)
    )
    assert "observation-group" not in inner.seen
    groups = parse_groups(result.observations)
    assert [(g.thread_id, g.range, g.kind) for g in groups] == [
        ("t1", "1:8", "reflection"),
        ("t2", "3:4", "reflection"),
    ]


def test_gap_lines_move_above_a_group_heading() -> None:
    from obsmem.om.text.dates import is_gap_line
    from obsmem.om.text.groups import lift_above_headings

    text = "* a\n\n## Group `x`\n\n[3 days later]\n\nDate: Jun 4, 2025\n* b"
    lifted = "* a\n\n[3 days later]\n\n## Group `x`\n\nDate: Jun 4, 2025\n* b"
    assert lift_above_headings(text, is_gap_line) == lifted
    assert lift_above_headings("[2 weeks later]\n* c", is_gap_line) == "[2 weeks later]\n* c"
