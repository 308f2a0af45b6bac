"""Text from users, tools and models is data on the operator's terminal, never structure.

A real SQLite store is filled through the public API (a conversation whose observer is a scripted
model, messages saved as given, knowledge candidates, dead-lettered work) with text holding what a
terminal or Rich takes as a command: bidi overrides and isolates ("Trojan Source": ``A\\u202eB``
reads as ``AB`` reversed), zero-width and other invisible characters (Unicode tag characters hide
whole words), ANSI and OSC escapes, BEL, backspace, carriage return, C1 controls, Rich markup and
Rich emoji codes (``:white_check_mark:`` drew a green check). Every CLI command that prints that
text shows each such character as a visible escape (``\\u202e``, ``\\x1b``, ``\\U000e0041``) and
the markup and emoji codes as written."""

from __future__ import annotations

import asyncio
import json
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.models.wire_server import MemoryModelPlayer, Recorded, Reply, WireServer, openai_text_stream
from typer.testing import CliRunner

from obsmem import DataPart, FilePart, Memory, MemoryConfig, Message, ReasoningPart, ToolCallPart, ToolResultPart
from obsmem.cli import app
from obsmem.knowledge import Knowledge, TrustState
from obsmem.models.testing import FunctionModel
from obsmem.storage import open_store

runner = CliRunner()
WIDE = {"COLUMNS": "400"}

#: Each character Trojan Source and friends use, and how the CLI must show it.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"  # (the marks: test_rtl_marks.py)
EVIL = (
    "pay\u202eevil\u202c bob\u2067x\u2069 [bold red]ALERT[/bold red] [link=https://evil.example]here[/link] "
    ":white_check_mark: APPROVED \x1b[31mred\x1b[0m \x1b]8;;https://evil.example\x07click\x1b]8;;\x07 bell\x07 "
    "back\x08 over\rwrite \x9b31m zero\u200bwidth tag\U000e0041\U000e0042 sep\u2028line " + BIDI
)
#: What each of those characters reads as on the terminal.
SHOWN = ["pay\\u202eevil\\u202c", "bob\\u2067x\\u2069", "[bold red]ALERT[/bold red]",
         "[link=https://evil.example]here[/link]", ":white_check_mark: APPROVED", "\\x1b[31mred\\x1b[0m",
         "\\x1b]8;;https://evil.example\\x07click", "back\\x08 over\\x0dwrite", "\\x9b31m",
         "zero\\u200bwidth", "tag\\U000e0041\\U000e0042", "sep\\u2028line",
         "\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069"]  # fmt: skip

THREAD = "t\u200b1\U000e0041"  # looks like "t1"
RESOURCE = "alice\u202e\u00a0"  # looks like "alice "
SCOPE = "org:acme/resource:alice"

CONFIG = MemoryConfig(observation={"message_tokens": 300, "buffer_tokens": False},
                      reflection={"observation_tokens": 40_000})  # fmt: skip


def _observer(messages: list[Message], settings: object) -> str:
    return f"<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User said {EVIL}.\n</observations>"


def _seed(db: Path) -> None:
    async def run() -> None:
        model = FunctionModel(_observer, name=f"acme:m\u202eodel\U000e0041 {EVIL}")
        async with Memory(f"sqlite:///{db}", config=CONFIG, model=model) as memory:
            await memory.create_thread(THREAD, RESOURCE, title=f"title {EVIL}")
            await memory.save_messages(THREAD, [
                Message.user(f"hello {EVIL}"),
                Message(role="assistant", parts=(
                    ReasoningPart(text=f"thinking {EVIL}"),
                    ToolCallPart(tool_call_id="c1", tool_name=f"look\u202eup{EVIL}", args={"q": EVIL}),
                )),
                Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name=f"look{EVIL}", result=EVIL),)),
                Message(role="assistant", parts=(ReasoningPart(text="plan\rFAKE-REASON\u2028x\x85y"),)),
                Message(role="tool", parts=(ToolResultPart(tool_call_id="c2", tool_name="get",
                                                           result={"r": "ok\rFAKE-RESULT\x1c"}),)),
                Message(role="user", parts=(
                    FilePart(media_type="text/plain", filename=f"f\u202etxt.exe{EVIL}", data="aGk="),)),
            ])  # fmt: skip
            for i in range(20):  # a conversation: the scripted observer writes EVIL into the observations
                turn = await memory.begin_turn(thread_id="t2", resource_id=RESOURCE, messages=[
                    Message.user(f"question {i} {EVIL} " + "garden " * 20)])  # fmt: skip
                await turn.step([Message.assistant(f"answer {i}")])
                await turn.end()
            await memory.settled()
        async with open_store(f"sqlite:///{db}") as store:
            now = datetime.now(UTC)
            await store.enqueue_work("observe", f"target {EVIL}", now=now)
            [item] = await store.claim_work("w1", ttl_s=60, now=now)
            await store.bury_work(item, now=now, error=f"boom {EVIL}")
            await store.acquire_lease(f"obs:{EVIL}", f"owner {EVIL}", ttl_s=60, now=now)
            # a marker as a store may hold it (Memory keeps 'om-' parts out of what it is given)
            marker = DataPart(name=f"om-x{EVIL}", data={"cycle_id": f"c{EVIL}", "seen_at": EVIL, "note": EVIL})
            await store.save_messages(THREAD, [Message(role="user", parts=(marker,))])

    asyncio.run(run())


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "m.db"
    _seed(path)
    return path


def _raw(output: str) -> list[str]:
    """The characters of ``output`` a terminal takes as a command or shows as nothing: controls
    (but newline), format characters (bidi, zero-width, tags), line and paragraph separators."""
    return sorted({f"U+{ord(c):04X}" for c in output
                   if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")})  # fmt: skip


def _said(output: str) -> str:
    """The output with table borders and wrapping taken out (a cell's text reads on)."""
    for border in "│┃║":
        output = output.replace(border, " ")
    return "".join(output.split())


def _shows_evil(output: str, at_least: int = 1) -> None:
    said = _said(output)
    for piece in SHOWN:
        assert said.count("".join(piece.split())) >= at_least, (piece, output[-6000:])


def _invoke(*args: str) -> str:
    """What ``obsmem ARGS`` prints, stdout and stderr."""
    result = runner.invoke(app, list(args), env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output


def _json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"], env=WIDE)
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_show_escapes_every_hidden_character_of_messages_observations_and_markers(db: Path) -> None:
    """On main: the bidi controls, tag and zero-width characters, U+2028 reached the terminal raw
    (the message read reordered), ':white_check_mark:' was drawn as a check mark, and a marker's
    '..._at' value that was no time was printed raw (its markup applied, its ESC sent)."""
    output = _invoke("show", THREAD, "--store", str(db), "--chars", "0")
    assert _raw(output) == [], output[-6000:]
    _shows_evil(output, at_least=5)  # title, message, reasoning, tool call, result, file, marker
    assert "t\\u200b1\\U000e0041" in output and "alice\\u202e\\xa0" in output
    # cut to one line, a reasoning or a result still shows its carriage return, not a space
    assert "plan\\x0dFAKE-REASON\\u2028x\\x85y" in output and "ok\\rFAKE-RESULT\\u001c" in output, output
    observed = _invoke("show", "t2", "--store", str(db), "--chars", "0")
    assert _raw(observed) == [], observed[-6000:]
    assert "Observations (generation" in observed
    _shows_evil(observed, at_least=2)  # the observations and the unobserved messages


def test_threads_shows_invisible_characters_of_ids(db: Path) -> None:
    """On main: the tag characters of the thread id and the no-break space of the resource id
    printed raw (the id read as 't1', 'alice ')."""
    for args in (("threads", "--store", str(db)), ("threads", "--store", str(db), "--resource", RESOURCE)):
        output = _invoke(*args)
        assert _raw(output) == [], output
        assert "t\\u200b1\\U000e0041" in output and "alice\\u202e\\xa0" in output, output


def test_threads_next_page_hint_reads_back_as_the_id_in_a_shell(db: Path) -> None:
    """The hint names the last thread as a shell word: tag characters as \\U (bash reads \\xa0 as
    one byte, \\u00a0 as the character)."""
    output = _invoke("threads", "--store", str(db), "--resource", RESOURCE, "--limit", "1")
    assert _raw(output) == [], output
    assert "--resource $'alice\\u202e\\u00a0'" in output, output


def test_usage_escapes_a_model_name(db: Path) -> None:
    """On main: the tag characters of the model's name printed raw."""
    output = _invoke("usage", "--store", str(db))
    assert _raw(output) == [], output
    assert "acme:m\\u202eodel\\U000e0041" in output
    document = _json("usage", "--store", str(db))  # --json: the name as stored
    assert f"acme:m\u202eodel\U000e0041 {EVIL}" in {row["model"] for row in document["rows"]}


def test_queue_escapes_targets_errors_keys_and_owners(db: Path) -> None:
    """On main: the tag characters and U+2028 of the dead item and the lease printed raw."""
    output = _invoke("queue", "--store", str(db))
    assert _raw(output) == [], output
    _shows_evil(output, at_least=4)  # target, error, lease key, lease owner
    document = _json("queue", "--store", str(db))
    assert document["leases"][0]["owner"] == f"owner {EVIL}"


def test_knowledge_review_shows_candidates_and_reasons_literally(tmp_path: Path) -> None:
    """On main: ':white_check_mark:' in a candidate's text or reason was drawn as a check mark,
    and the tag characters printed raw."""
    path = tmp_path / "k.db"

    async def main() -> None:
        async with Knowledge.sqlite(path) as knowledge:
            node = await knowledge.node("Bob", "person", SCOPE)
            await knowledge.append(node.id, EVIL, SCOPE, reason=f"captured: {EVIL}", trust=TrustState.CANDIDATE)

    asyncio.run(main())
    for command in ("pending", "activity"):
        output = _invoke("knowledge", command, "-k", str(path), "--scope", SCOPE)
        assert _raw(output) == [], (command, output)
        _shows_evil(output, at_least=2 if command == "pending" else 1)


def test_export_and_import_say_the_resource_id_escaped(db: Path, tmp_path: Path) -> None:
    """On main: import's summary printed the no-break space of the resource id raw."""
    exported = tmp_path / "alice.jsonl"
    result = runner.invoke(app, ["export", "-r", RESOURCE, "--store", str(db), "-o", str(exported)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert _raw(result.output) == [] and "alice\\u202e\\xa0" in result.output, result.output
    imported = runner.invoke(app, ["import", str(exported), "--store", str(tmp_path / "new.db")], env=WIDE)
    assert imported.exit_code == 0, imported.output
    assert _raw(imported.output) == [] and "alice\\u202e\\xa0" in imported.output, imported.output


def test_an_error_naming_stored_text_escapes_it(db: Path) -> None:
    """A thread that is not there, named with invisible characters: the error shows them."""
    result = runner.invoke(app, ["show", f"nope{EVIL}", "--store", str(db)], env=WIDE)
    assert result.exit_code == 1
    assert _raw(result.output) == [], result.output
    assert "nope" in result.output and "\\u202e" in result.output


class _HostilePlayer(MemoryModelPlayer):
    """Answers as a real model would, with EVIL in every observation."""

    def __call__(self, request: Recorded) -> Reply:
        self.observer_calls += 1
        return openai_text_stream(f"<observations>\nDate: Jun 15, 2025\n* 🔴 (12:00) User said {EVIL} "
                                  f"({self.observer_calls}).\n</observations>")  # fmt: skip


def test_demo_context_shows_a_models_text_escaped(tmp_path: Path) -> None:
    """On main: the context ``obsmem demo`` draws held the model's bidi controls, tag characters
    and ESC raw (Rich's Text drops only BEL, backspace, CR and the like)."""
    with WireServer() as server:
        server.responder = _HostilePlayer()
        result = runner.invoke(app, ["demo", "--model", f"openai-compatible:m@{server.url}/v1", "--turns", "12",
                                     "--message-tokens", "800", "--observation-tokens", "3000"], env=WIDE)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Final context the model would see" in result.output
    assert _raw(result.output) == [], result.output[-6000:]
    assert "pay\\u202eevil\\u202c" in result.output and "tag\\U000e0041" in result.output
