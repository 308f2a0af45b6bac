"""What a client asks the server to remember crosses the same privacy boundary as a pin.

Found by a hostile review: with ``privacy.redact_pii=["email"]`` in the server's config, the MCP
``remember`` tool and ``POST /api/knowledge`` (both ``capture_fact``) stored the raw email in the
knowledge store, where ``Memory.pin`` redacts it. The README: "The knowledge store sits behind the
same boundary … a pinned text is redacted before it is stored". On main the record held
``alice.private@example.org``.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from obsmem.config import MemoryConfig, PrivacyConfig
from obsmem.knowledge import Knowledge
from obsmem.server import ServerSettings, Service
from tests.server.live import auth, live_server, make_keys

EMAIL = "alice.private@example.org"


def test_a_remembered_fact_is_redacted_before_it_is_stored(tmp_path: Path) -> None:
    knowledge = Knowledge.sqlite(tmp_path / "k.db")
    config = MemoryConfig(privacy=PrivacyConfig(redact_pii=["email"]))
    service = Service.open(f"sqlite:///{tmp_path / 'm.db'}", settings=ServerSettings(mcp=False), knowledge=knowledge,
                           config=config)
    keys = make_keys(service)
    with live_server(service) as live:
        made = httpx.post(live.url + "/api/knowledge", json={"text": f"Send invoices to {EMAIL}"},
                          headers=auth(keys.alice), timeout=60)
        assert made.status_code == 201, made.text
        assert EMAIL not in made.text
        record = live.call(knowledge.store.load_record(made.json()["id"]))
        assert record is not None and EMAIL not in record.text and "Send invoices to" in record.text
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("k.db*"))
    assert EMAIL.encode() not in raw, "the raw email is in the knowledge database's files"
