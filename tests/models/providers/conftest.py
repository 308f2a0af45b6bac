"""Every provider test talks to a real local HTTP server (``wire_server``), never to a patched SDK."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.models.wire_server import WireServer


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as running:
        yield running
