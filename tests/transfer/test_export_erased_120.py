"""An export never hands out a user whose delete is under way or was cut off midway.

``Memory.delete_resource`` deletes a user's threads one by one (README: "An erase cut off midway
(the process killed, say) is finished by making the same call again"). Until it is finished the
user's other threads, messages, observations and working memory are still in the store, and
``memory.unfinished_deletes(user)`` names what is left to delete. An export of that user then
wrote the rest out as a whole, valid file: importing it anywhere brought back a user who asked
to be deleted (helper-120's hostile review). ``export_resource`` (and ``obsmem export``) refuse
it now, naming the unfinished delete, until ``delete_resource`` is called again.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli.app import app
from obsmem.errors import InvalidInputError
from obsmem.storage import SQLiteStore
from obsmem.transfer import export_resource

pytestmark = pytest.mark.anyio

SECRET = "my passport number is X1234567"


class _KilledMidway(SQLiteStore):
    """A store whose process 'dies' (an exception the delete does not catch) at the second
    thread a delete removes: the first thread is gone, the others are not yet."""

    deleted = 0

    async def delete_thread(self, thread_id: str) -> bool:
        self.deleted += 1
        if self.deleted == 2:
            raise KeyboardInterrupt("killed midway")
        return await super().delete_thread(thread_id)


async def _half_deleted(db: Path) -> None:
    async with _KilledMidway(db) as store:
        memory = Memory(store)
        for thread in ("t1", "t2", "t3"):
            await memory.create_thread(thread, resource_id="alice")
            await memory.save_messages(thread, [Message.user(f"{SECRET} ({thread})")])
        await store.set_working_memory("resource:alice", f"- {SECRET}")
        with pytest.raises(KeyboardInterrupt):
            await memory.delete_resource("alice")
        assert [t.id for t in await memory.unfinished_deletes("alice")]  # the README's 'left to finish'
        assert await store.list_threads("alice")  # and the rest of the user still stored
        await memory.aclose()


async def test_export_of_a_user_whose_delete_was_cut_off_is_refused(tmp_path: Path) -> None:
    """On main: the export succeeded, two threads with 'my passport number is X1234567' in
    their messages and the resource's working memory."""
    db = tmp_path / "m.db"
    await _half_deleted(db)
    out = io.StringIO()
    async with SQLiteStore(db) as store:
        with pytest.raises(InvalidInputError, match="delete"):
            await export_resource(store, "alice", out)
    assert SECRET not in out.getvalue()


async def test_it_exports_again_once_the_delete_is_finished_or_for_other_users(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    await _half_deleted(db)
    async with SQLiteStore(db) as store:
        memory = Memory(store)
        await memory.create_thread("b1", resource_id="bob")
        await memory.save_messages("b1", [Message.user("hello")])
        out = io.StringIO()
        await export_resource(store, "bob", out)  # another user of the same store is not held up
        assert '"resource_id": "bob"' in out.getvalue()
        await memory.delete_resource("alice")  # finished
        with pytest.raises(InvalidInputError, match="No threads"):
            await export_resource(store, "alice", io.StringIO())
        await memory.aclose()


def test_the_cli_refuses_it_in_one_line(tmp_path: Path) -> None:
    """On main: exit 0 and the two threads' messages on stdout."""
    import anyio

    db = tmp_path / "m.db"
    anyio.run(_half_deleted, db)
    result = CliRunner().invoke(app, ["export", "--resource", "alice", "--store", str(db)])
    assert result.exit_code == 1, result.output
    assert "delete" in result.output
    assert SECRET not in result.output
