"""A large import over REST is read off the event loop (the product rule: no input blocks it).

``POST /api/resources/import`` first reads the export for the resource it names and the orgs of
its threads (to check the key), every line of it parsed with ``json.loads``; that ran on the
server's event loop, where every other request waits: 0.7 s for a 64 MB export (the largest
import the server takes) measured, while the import itself parses in a thread. The test counts
work, never time: ``json.loads`` notes on which thread each line of the export is parsed, and
none may be parsed on the event loop's thread."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth

LONG_TEXT = "The shipment ledger lists every crate. " * 20_000  # ~780 KB


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("import-off-loop-147"))


async def _ident() -> int:
    return threading.get_ident()


def test_a_large_export_is_read_off_the_event_loop(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    alice = auth(env.keys.alice)
    with httpx.Client(base_url=env.url, timeout=120) as client:
        assert client.post("/api/threads", headers=alice, json={"id": "big-1"}).status_code == 201
        saved = client.post("/api/threads/big-1/messages", headers=alice, json={"format": "openai", "messages": [
            {"role": "user", "content": LONG_TEXT}, {"role": "assistant", "content": "Noted."}]})  # fmt: skip
        assert saved.status_code == 201, saved.text
        exported = client.get("/api/resources/alice/export", headers=alice)
        assert exported.status_code == 200 and len(exported.text) > 500_000
        assert client.delete("/api/resources/alice", headers=alice).status_code == 200

        loop_thread = env.live.call(_ident())
        parsed_on: list[int] = []
        loads: Callable[..., Any] = json.loads

        def watched(text: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(text, (str, bytes)) and text[:8] in ('{"kind":', b'{"kind":', '{"format', b'{"format'):
                parsed_on.append(threading.get_ident())
            return loads(text, *args, **kwargs)

        monkeypatch.setattr(json, "loads", watched)
        imported = client.post("/api/resources/import", headers=alice, json={"export": exported.text})
        monkeypatch.undo()
        assert imported.status_code == 201, imported.text
        assert imported.json()["counts"]["message"] == 2
    assert parsed_on, "the export's lines were never parsed (the watch saw nothing)"
    on_loop = sum(1 for ident in parsed_on if ident == loop_thread)
    assert on_loop == 0, f"{on_loop} of {len(parsed_on)} lines of the export were parsed on the event loop"
