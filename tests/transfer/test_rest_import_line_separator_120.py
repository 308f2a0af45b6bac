"""A user's own export comes back over REST whatever characters their messages hold
(helper-120's hostile review).

An export is JSON lines written with ``ensure_ascii=False``: a message holding U+2028 (LINE
SEPARATOR, common in text pasted from web pages and word processors) or U+0085 keeps it raw in
its line, and that is one valid JSON line (``obsmem import`` reads it). ``POST
/api/resources/import`` first reads the export's owner with :meth:`str.splitlines`, which also
breaks lines at those characters, and refused the user's own untouched export: 400
"export line 3 is not JSON". ``_export_owner`` now splits at ``\\n`` only, as the import does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from obsmem.server import ServerSettings, Service, create_app


@pytest.mark.parametrize("separator", ["\u2028", "\x85"])
def test_an_export_with_a_line_separator_in_a_message_imports_over_rest(tmp_path: Path, separator: str) -> None:
    """Before: 400 {"...": "export line 3 is not JSON"} for the untouched export."""
    service = Service.open(f"sqlite:///{tmp_path / 'm.db'}", settings=ServerSettings(mcp=False))
    with TestClient(create_app(service)) as client:
        assert client.portal is not None
        secret = client.portal.call(lambda: service.keys.create("acme", resource_id="alice"))[1]
        auth = {"Authorization": f"Bearer {secret}"}
        assert client.post("/api/threads", json={"id": "a-t"}, headers=auth).status_code == 201
        said = {"format": "openai", "messages": [{"role": "user", "content": f"first line{separator}second line"}]}
        assert client.post("/api/threads/a-t/messages", json=said, headers=auth).status_code == 201
        exported = client.get("/api/resources/alice/export", headers=auth)
        assert exported.status_code == 200 and separator in exported.text
        assert client.delete("/api/resources/alice", headers=auth).status_code == 200
        imported = client.post("/api/resources/import", json={"export": exported.text}, headers=auth)
        assert imported.status_code == 201, imported.text
