"""A password on a command line reaches the observer only as a placeholder (helper-126's hostile
review).

A coding agent's shell tool runs ``mysql -uroot -pS3cret``, ``curl -u admin:pass``,
``sshpass -p pass ssh …``, ``docker login -p pass``, ``redis-cli -a pass``: the tool call's
``command`` argument is not a key-like name, and only ``--password`` was known, so each password
went to the hosted observer in clear.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import Redactor
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

VALUES = {
    "mysql": "S3cretPass-1",
    "mysql_quoted": "Two Words 2",
    "curl": "hunter2x-3",
    "sshpass": "letmein-4",
    "docker": "Registry-5",
    "redis": "RedisPw-6",
    "mongosh": "MongoPw-7",
}
COMMANDS = [
    f"mysql -uroot -p{VALUES['mysql']} shop -e 'select 1'",
    f"mysqldump -u root -p'{VALUES['mysql_quoted']}' shop > dump.sql",
    f"curl -sS -u admin:{VALUES['curl']} https://api.example.com/v1/status",
    f"sshpass -p '{VALUES['sshpass']}' ssh deploy@10.0.0.5",
    f"docker login -u me -p {VALUES['docker']} registry.example.com",
    f"redis-cli -h cache -a {VALUES['redis']} ping",
    f"mongosh mongodb://db:27017/app -u app -p {VALUES['mongosh']}",
]


async def test_command_line_passwords_never_reach_the_observer() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) Assistant ran commands.\n</observations>"

    messages: list[Message] = [Message.user("check the servers " + "x " * 30)]
    for n, command in enumerate(COMMANDS):
        messages += [
            Message(role="assistant", parts=(ToolCallPart(tool_call_id=f"c{n}", tool_name="shell",
                                                          args={"command": command}),)),
            Message(role="tool", parts=(ToolResultPart(tool_call_id=f"c{n}", tool_name="shell", result="ok"),)),
        ]
    messages.append(Message.assistant("all good " + "y " * 30))
    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=messages)
        await turn.end()
        await memory.observe("t1")
    sent = "\n".join(seen)
    assert "Tool Call shell" in sent and "registry.example.com" in sent
    assert [name for name, value in VALUES.items() if value in sent] == []


@pytest.mark.parametrize(
    "text",
    ["mysql -u root -p shop", "docker run -p 8080:80 nginx", "mkdir -p /tmp/x", "curl -u $USER:$TOKEN url",
     "mysql -uroot -p$MYSQL_PWD", "ssh -p 2222 host", "pip install -U obsmem"],
)
def test_ordinary_commands_are_kept(text: str) -> None:
    assert Redactor(b"k").redact(text).text == text


@pytest.mark.parametrize("unit", ["mysql ", "mysql -p", "curl -u a:", "sshpass ", "docker login ", "-u "])
def test_linear_on_runs(unit: str) -> None:
    from tests.integrity.work_count import GROWTH_BOUND, growth

    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND, f"{unit!r}: {ratio:.1f}x the work for 4x the input"
