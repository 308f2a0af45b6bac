"""The integration tests' shared fixture: a local server speaking the OpenAI wire format, answered
by an :class:`~tests.integrations.agent_model.AgentModel` with its default rules. A test module
that needs other rules defines its own ``server`` fixture, which takes precedence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integrations.agent_model import AgentModel
from tests.models.wire_server import WireServer


@pytest.fixture
def server() -> Iterator[tuple[WireServer, AgentModel]]:
    model = AgentModel()
    with WireServer() as wire:
        wire.responder = model
        yield wire, model
