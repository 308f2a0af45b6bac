"""The privacy boundary at the wire: a Memory with an OpenAI-compatible observer on a local HTTP
server; the server never receives a secret, only placeholders; a forbidden scope goes to the
offline observer (the server receives nothing) or, strict, fails with PrivacyError."""

from __future__ import annotations

import json

import pytest
from tests.models.wire_server import MemoryModelPlayer, WireServer

from obsmem.assembly import assemble_roles
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, PrivacyConfig
from obsmem.errors import ObservationError, PrivacyError
from obsmem.memory import Memory
from obsmem.models.testing import ScriptedModel
from obsmem.om.outcomes import EngineEvent
from obsmem.om.protocols import ObservationRequest
from obsmem.tokens import TokenCounter
from obsmem.types import Message

pytestmark = pytest.mark.anyio

SECRETS = {
    "openai": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "password": "hunter2-Correct",
    "email": "jane.roe@example.org",
    "card": "4111 1111 1111 1111",
}
TEXT = (
    f"My key is {SECRETS['openai']} and the AWS id {SECRETS['aws']}; DB_PASSWORD={SECRETS['password']}. "
    f"Mail {SECRETS['email']}, card {SECRETS['card']}. I am planning a trip to Lisbon in May with my family."
)


def _config(**privacy: object) -> MemoryConfig:
    return MemoryConfig(
        observation={"message_tokens": 60, "buffer_tokens": False},
        reflection={"observation_tokens": 100_000, "buffer_activation": None},
        privacy=PrivacyConfig(key="wire-test-key", redact_pii=["email", "credit_card"], **privacy),  # type: ignore[arg-type]
    )


async def _converse(memory: Memory, thread: str, resource: str) -> None:
    for n in range(3):
        async with memory.turn(thread_id=thread, resource_id=resource, messages=[Message.user(f"{TEXT} ({n})")]) as turn:
            await turn.step([Message.assistant(f"Noted, item {n}. Your key {SECRETS['openai']} is safe.")])


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> WireServer:
    server = WireServer().__enter__()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.responder = MemoryModelPlayer()
    return server


async def test_no_secret_reaches_the_wire_only_placeholders(openai_server: WireServer) -> None:
    async with Memory("memory://", model="openai:gpt-4o-mini", config=_config(), clock=FakeClock()) as memory:
        await _converse(memory, "t1", "u1")
        record = await memory.get_record("t1")
    openai_server.__exit__()
    assert openai_server.requests, "observation never ran"
    assert record is not None and "detail number" in record.active_observations
    for request in openai_server.requests:
        body = json.dumps(request.body)
        for value in SECRETS.values():
            assert value not in body
        assert "[REDACTED:openai_key:" in body  # every request carries the conversation's key
    everything = json.dumps([request.body for request in openai_server.requests])
    assert "Lisbon" in everything
    for category in ("openai_key", "aws_access_key", "password", "email", "credit_card"):
        assert f"[REDACTED:{category}:" in everything
    # the same value has the same placeholder across requests and messages
    first = json.dumps(openai_server.requests[0].body)
    tags = {tag for tag in first.split("[REDACTED:openai_key:")[1:]}
    assert len({tag[:8] for tag in tags}) == 1


async def test_a_forbidden_scope_falls_back_to_the_offline_observer(openai_server: WireServer) -> None:
    providers = {"resource:acme-*": ["offline"], "*": ["openai"]}
    async with Memory("memory://", model="openai:gpt-4o-mini", config=_config(providers=providers)) as memory:
        await _converse(memory, "t-acme", "acme-eu")
        forbidden = await memory.get_record("t-acme")
        assert openai_server.requests == []
        await _converse(memory, "t-globex", "globex")
    openai_server.__exit__()
    assert forbidden is not None and forbidden.active_observations.strip()  # the offline rules observed
    assert openai_server.requests and all("t-acme" not in json.dumps(r.body) for r in openai_server.requests)


async def test_strict_refuses_a_forbidden_scope_with_a_typed_error(openai_server: WireServer) -> None:
    config = _config(providers={"resource:acme-*": ["offline"], "*": ["openai"]}, strict=True)
    async with Memory("memory://", model="openai:gpt-4o-mini", config=config) as memory:
        with pytest.raises(ObservationError) as caught:
            await _converse(memory, "t-acme", "acme-eu")
    openai_server.__exit__()
    privacy = caught.value.__cause__ or caught.value.__context__  # the engine names it in an ObservationError
    assert isinstance(privacy, PrivacyError) and privacy.provider == "openai" and "acme-eu" in privacy.scope
    assert openai_server.requests == []


async def test_redactions_are_counted_in_events_and_tiers_are_wrapped_too() -> None:
    events: list[EngineEvent] = []
    small, large = ScriptedModel(["<observations>\n* ok\n</observations>"], name="openai:small"), ScriptedModel(
        [], name="openai:large"
    )
    roles = assemble_roles(
        _config(), model={100_000: small, 1_000_000: large}, counter=TokenCounter(), clock=FakeClock(),
        on_event=events.append,
    )
    message = Message.user(TEXT, thread_id="t1", resource_id="u1")
    await roles.observer.observe(ObservationRequest(messages=[message]))
    sent = json.dumps([m.model_dump(mode="json") for m in small.requests[0][0]])
    assert all(value not in sent for value in SECRETS.values())
    [event] = [e for e in events if str(e.kind) == "redaction"]
    assert event.thread_id == "t1" and event.data["role"] == "observation"
    assert event.data["counts"] == {"openai_key": 1, "aws_access_key": 1, "password": 1, "email": 1, "credit_card": 1}


async def test_without_privacy_nothing_changes() -> None:
    model = ScriptedModel(["<observations>\n* ok\n</observations>"], name="openai:x")
    roles = assemble_roles(MemoryConfig(), model=model, counter=TokenCounter(), clock=FakeClock())
    await roles.observer.observe(ObservationRequest(messages=[Message.user(TEXT, thread_id="t1")]))
    assert SECRETS["openai"] in json.dumps([m.model_dump(mode="json") for m in model.requests[0][0]])


async def test_memory_reports_redactions_and_fallbacks_to_on_event(openai_server: WireServer) -> None:
    """Memory(on_event=...) hears the boundary's events (before, only assemble_roles users did)."""
    events: list[EngineEvent] = []
    providers = {"resource:acme-*": ["offline"], "*": ["openai"]}
    async with Memory(
        "memory://", model="openai:gpt-4o-mini", config=_config(providers=providers), on_event=events.append,
    ) as memory:
        await _converse(memory, "t1", "u1")
        await _converse(memory, "t-acme", "acme-eu")
    openai_server.__exit__()
    redactions = [e for e in events if e.kind == "redaction"]
    assert redactions and all(e.data["counts"].get("openai_key") for e in redactions)
    assert any(e.kind == "privacy-fallback" for e in events)
