"""A schema or config table with a password row states no password (found by helper-142).

39ff337's table view read '| password | string |' as 'password: string', which the secret rules
treat as a stated password: every Markdown schema table with a password row was refused by
Knowledge.capture, and secret_values() of such an observation gave 'string', so any proposal
holding the word 'string' was refused in that capture run. A cell that names a type or a
requirement (string, varchar(255), required, hidden, ...) is no value now; a table that states
one still is."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.knowledge.secrets import holds_secret, secret_values

pytestmark = pytest.mark.anyio
SCOPE = "org:default/resource:alice/thread:t1"
SCHEMA = "| Field | Type |\n|---|---|\n| username | string |\n| password | string |"


@pytest.fixture
async def knowledge(anyio_backend: str) -> AsyncIterator[Knowledge]:
    async with Knowledge.in_memory(clock=FakeClock()) as facade:
        yield facade


async def test_a_schema_table_with_a_password_row_is_no_secret(knowledge: Knowledge) -> None:
    user = await knowledge.node("User", "person", "org:default/resource:alice")
    outcome = await knowledge.capture(user.id, "Their signup form schema:\n" + SCHEMA, context=SCOPE,
                                      proposed_level="thread", ceiling="resource", reason="r")
    assert outcome.status == "captured"
    assert "string" not in secret_values(SCHEMA)
    assert not holds_secret("The API returns a string", secret_values(SCHEMA))


@pytest.mark.parametrize(
    "table",
    [
        "| Field | Type |\n|---|---|\n| password | varchar(255) |",
        "| Setting | Required |\n|---|---|\n| password | yes |",
        "| Column | Notes |\n|---|---|\n| PIN | hidden |",
    ],
)
def test_type_and_requirement_cells_are_no_values(table: str) -> None:
    assert not holds_secret(table) and not secret_values(table)


@pytest.mark.parametrize(
    "table",
    [
        "| Service | Password |\n|---|---|\n| Netflix | hunter2-Blue! |",
        "| wifi password | hunter2-Blue! |",
        "| Login | Password |\n|---|---|\n| alice | Tr0ub4dor&3 |",
    ],
)
def test_a_table_stating_a_password_still_holds_it(table: str) -> None:
    assert holds_secret(table)
