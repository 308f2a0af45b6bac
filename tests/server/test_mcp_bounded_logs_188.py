"""The MCP server logs what a client sent in bounded lines (helper-188).

The MCP library logs each failed tool call and resource read with what the client named: the
tool's name, the resource's URI, each in full and the URI twice (it is in the error too). In
``obsmem serve`` those lines go to the library's rich handler (through obsmem's redacting
filter), which took about 19 s and 150 MB to write one line for a 2 MB URI and as long for a
2 MB tool name, the server's event loop blocked meanwhile: any key, read-only too, could stall
every tenant with a request body of a few megabytes. A thread id over the 200 characters the
REST routes allow, in the observations resource's URI, was logged as an unexpected exception
(level ERROR, with a traceback) instead of being refused like a tool's argument.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from obsmem import MemoryConfig
from obsmem.server import ServerSettings, Service
from obsmem.server.access import Principal
from obsmem.server.mcp_server import build_mcp

pytestmark = pytest.mark.anyio

SDK_LOGGER = "mcp.server.mcpserver.server"
LINE_BOUND = 20_000  # characters: a log line holds a clipped argument, not megabytes


@pytest.fixture
async def service() -> AsyncIterator[Service]:
    service = Service.open("memory://", settings=ServerSettings(), config=MemoryConfig(), max_turn_wait=None)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def test_a_megabyte_uri_or_tool_name_is_logged_clipped(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SDK_LOGGER)
    big = 1_000_000
    async with Client(build_mcp(service, Principal("k1", "acme", "alice"))) as client:
        with pytest.raises(MCPError):
            await client.read_resource("obsmem://threads/" + "y" * big + "/observations")
        assert (await client.call_tool("z" * big, {})).is_error
        assert (await client.call_tool("memory_status", {"thread_id": "no-such-thread"})).is_error
    lines = [record.getMessage() for record in caplog.records if record.name == SDK_LOGGER]
    assert len(lines) == 3, lines
    assert max(len(line) for line in lines) <= LINE_BOUND, [len(line) for line in lines]
    assert "yyyy" in lines[0] and "zzzz" in lines[1]  # still said, clipped
    assert "no-such-thread" in lines[2]  # a short argument is logged whole


async def test_an_overlong_thread_id_in_the_resource_uri_is_refused_not_an_error_in_the_log(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SDK_LOGGER)
    await service.memory.create_thread("a" * 200, "alice", org_id="acme")
    async with Client(build_mcp(service, Principal("k1", "acme", "alice"))) as client:
        read = await client.read_resource("obsmem://threads/" + "a" * 200 + "/observations")
        assert read.contents[0].text == ""  # type: ignore[union-attr]  # 200 characters: an id
        with pytest.raises(MCPError) as refused:
            await client.read_resource("obsmem://threads/" + "a" * 201 + "/observations")
    assert "thread_id" in str(refused.value) and "200" in str(refused.value)
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
