"""One role assembly for ``Memory`` and the worker: the same config sends the same requests.

Each side runs on a store of its own holding the same conversation, with a recording model of
its own; the engine transitions are the same code on both sides, so whatever differs in what
the models receive (settings, prompts, attachments, tiers, start level, extractors) comes from
how each side built its roles.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from obsmem.assembly import assemble_roles, memory_config, request_settings
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.errors import ConfigError
from obsmem.memory import Memory
from obsmem.models.base import ChatModel, ModelRequest
from obsmem.models.testing import FunctionModel
from obsmem.models.tiers import ModelByInputTokens
from obsmem.om.engine import Engine
from obsmem.om.extractors import Extractor
from obsmem.om.llm.observer import LLMObserver
from obsmem.om.llm.reflector import LLMReflector
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.om.protocols import ObservationRequest
from obsmem.storage import MemoryStore
from obsmem.tokens import TokenCounter
from obsmem.types import FilePart, Message, TextPart, Thread
from obsmem.worker import Worker

pytestmark = pytest.mark.anyio

START = FakeClock.DEFAULT_START
OBSERVED = "\n".join(
    f"* 🔴 (10:{n:02d}) User said their project Kestrel{n} has a budget of {n * 100} euros and a review."
    for n in range(12)
)
REFLECTED = "* 🔴 (10:00) User runs twelve Kestrel projects with budgets from 0 to 1100 euros."

# A small threshold so that the observations above are due for reflection.
BASE = {
    "observation": {"message_tokens": 200, "buffer_tokens": False},
    "reflection": {"observation_tokens": 60},
}


def _answer(messages: list[Message], settings: ModelRequest | None) -> str:
    text = messages[-1].text
    if "## Observations to reflect on" in text:
        return f"<observations>\n{REFLECTED}\n</observations>"
    working_memory = "<working-memory>\n- Kestrel projects\n</working-memory>"
    return f"<observations>\n{OBSERVED}\n</observations>\n{working_memory}"


Sent = list[tuple[list[tuple[str, tuple[Any, ...]]], ModelRequest | None]]


def _sent(*models: FunctionModel) -> Sent:
    """Every request the models received, in order: each message's role and parts, and the settings
    (a message's id and creation time are new on every build, so they are left out)."""
    requests = [request for model in models for request in model.requests]
    return [([(m.role, m.parts) for m in messages], settings) for messages, settings in requests]


def _conversation() -> list[Message]:
    image = FilePart(media_type="image/png", url="https://example.com/kestrel.png", filename="kestrel.png")
    sheet = FilePart(media_type="text/csv", url="https://example.com/budget.csv", filename="budget.csv")
    messages = []
    for n in range(8):
        parts: tuple[Any, ...] = (
            TextPart(text=f"Kestrel{n} has a budget of {n * 100} euros, reviewed on day {n}."),
        )
        if n == 2:
            parts = (*parts, image, sheet)
        messages.append(
            Message(id=f"u{n}", role="user", parts=parts, created_at=START + timedelta(minutes=n))
        )
        messages.append(
            Message(
                id=f"a{n}",
                role="assistant",
                parts=(TextPart(text=f"Noted Kestrel{n}."),),
                created_at=START + timedelta(minutes=n, seconds=30),
            )
        )
    return messages


async def _drive(engine: Engine, store: MemoryStore) -> None:
    """Observe the conversation, then reflect automatically (the start level applies)."""
    thread = await store.create_thread(Thread(id="t1", resource_id="r1"))
    await store.save_messages(thread.id, _conversation())
    await engine.observe(thread, force=True)
    await engine.maybe_reflect(thread)


def _models(tiered: bool, names: tuple[str, str]) -> tuple[Any, list[FunctionModel]]:
    """The model argument both sides get (fresh recorders for each side)."""
    if not tiered:
        model = FunctionModel(_answer, name=names[0])
        return model, [model]
    small, big = FunctionModel(_answer, name=names[0]), FunctionModel(_answer, name=names[1])
    return {100_000: big, 3_000: small}, [small, big]


CASES: dict[str, tuple[dict[str, Any], bool, tuple[str, str]]] = {
    # the defaults: temperature 0.3 / 0.0, and max_output_tokens unset, so not sent
    "defaults": ({}, False, ("openai:gpt-4o-mini", "")),
    "explicit-limits-working-memory-title": (
        {
            "observation": {"max_output_tokens": 4_000, "manage_working_memory": True, "thread_title": True},
            "reflection": {"temperature": 0.2, "max_output_tokens": 8_000},
        },
        False,
        ("google:gemini-2.5-flash", ""),
    ),
    # tiers: no default temperature, and the largest tier's model sets the start level
    "tiers": (
        {"observation": {"observe_attachments": ["text/csv"]}},
        True,
        ("openai:gpt-4o-mini", "google:gemini-2.5-flash"),
    ),
}


def _config(options: dict[str, Any]) -> MemoryConfig:
    merged = {**BASE, **{k: {**BASE.get(k, {}), **v} for k, v in options.items()}}
    return MemoryConfig.model_validate(merged)


@pytest.mark.parametrize("from_snapshot", [False, True], ids=["same-config", "worker-reads-a-snapshot"])
@pytest.mark.parametrize("case", list(CASES))
async def test_worker_and_memory_send_identical_requests(case: str, from_snapshot: bool) -> None:
    options, tiered, names = CASES[case]
    config = _config(options)
    memory_model, memory_recorders = _models(tiered, names)
    worker_model, worker_recorders = _models(tiered, names)
    memory_store, worker_store = MemoryStore(), MemoryStore()
    # `obsmem worker --config` reads the application's config back from its JSON snapshot
    worker_config = (
        MemoryConfig.from_snapshot(json.loads(json.dumps(config.snapshot()))) if from_snapshot else config
    )
    memory = Memory(memory_store, config=config, model=memory_model, clock=FakeClock())
    worker = Worker(worker_store, config=worker_config, model=worker_model, clock=FakeClock())

    await _drive(memory.engine, memory_store)
    await _drive(worker.engine, worker_store)

    sent = _sent(*memory_recorders)
    assert len(sent) == 2  # one observation, one reflection
    assert _sent(*worker_recorders) == sent
    assert worker.engine.reflector_start_level == memory.engine.reflector_start_level
    assert worker.engine.extractors == memory.engine.extractors
    observe_settings, reflect_settings = sent[0][1], sent[1][1]
    assert observe_settings is not None and reflect_settings is not None
    if case == "defaults":
        assert observe_settings.max_output_tokens is None and reflect_settings.max_output_tokens is None
        assert (observe_settings.temperature, reflect_settings.temperature) == (0.3, 0.0)
        assert memory.engine.reflector_start_level == 1
    elif case == "tiers":
        assert (observe_settings.temperature, reflect_settings.temperature) == (None, None)
        assert memory.engine.reflector_start_level == 2  # the largest tier is Gemini 2.5 Flash
        forwarded = [p for _, parts in sent[0][0] for p in parts if isinstance(p, FilePart)]
        assert [p.media_type for p in forwarded] == ["text/csv"]
    else:
        assert (observe_settings.max_output_tokens, reflect_settings.max_output_tokens) == (4_000, 8_000)
        assert reflect_settings.temperature == 0.2
        assert [e.slug for e in worker.engine.extractors] == ["working-memory"]
        assert worker.engine.extractors[0].mode == "inline"
    await memory.aclose()


# ---- the pieces ---------------------------------------------------------------------------------


def _roles(config: MemoryConfig, **kwargs: Any) -> Any:
    return assemble_roles(config, counter=TokenCounter(), clock=FakeClock(), **kwargs)


def test_a_role_left_unset_follows_the_config_then_the_other_role_then_offline() -> None:
    offline = _roles(MemoryConfig())
    assert isinstance(offline.observer, OfflineObserver) and isinstance(offline.reflector, OfflineReflector)
    assert offline.reflector_start_level == 1
    configured = _roles(MemoryConfig(observation={"model": "ollama:llama3.1:8b"}))
    assert isinstance(configured.observer, LLMObserver) and isinstance(configured.reflector, LLMReflector)
    assert configured.reflector.model.name == "ollama:llama3.1:8b"


def test_model_and_a_role_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="model"):
        _roles(MemoryConfig(), model=FunctionModel(_answer), observer="offline")


def test_extractors_are_checked_for_every_caller() -> None:
    twice = [Extractor(name="Budget", instructions="x"), Extractor(name="budget", instructions="y")]
    with pytest.raises(ConfigError, match="observation.extract"):
        _roles(MemoryConfig(), extractors=twice)
    with pytest.raises(ConfigError, match="observation.extract"):
        Worker(MemoryStore(), extractors=twice)
    with pytest.raises(ConfigError, match="reserved"):
        Worker(MemoryStore(), extractors=[Extractor(name="history", instructions="x")])


def test_working_memory_is_inline_only_for_an_llm_observer() -> None:
    config = MemoryConfig(observation={"manage_working_memory": True})
    assert _roles(config).extractors[0].mode == "hook"
    assert _roles(config, model=FunctionModel(_answer)).extractors[0].mode == "inline"
    # a worker given a model only for the reflector keeps the offline observer, so the hook
    worker = Worker(MemoryStore(), config=config, reflector=FunctionModel(_answer))
    assert [e.mode for e in worker.engine.extractors] == ["hook"]


@pytest.mark.parametrize(
    ("role", "tiered", "expected"),
    [
        (ObservationConfig(), False, (0.3, None)),
        (ObservationConfig(), True, (None, None)),
        (ObservationConfig(temperature=0.3), True, (0.3, None)),
        (ObservationConfig(max_output_tokens=100_000), False, (0.3, 100_000)),
        (ObservationConfig.model_validate(ObservationConfig().model_dump()), False, (0.3, 100_000)),
    ],
)
def test_request_settings(
    role: ObservationConfig, tiered: bool, expected: tuple[float | None, int | None]
) -> None:
    model: ChatModel = FunctionModel(_answer)
    if tiered:
        model = ModelByInputTokens({1_000: model})
    assert request_settings(role, model) == expected


def test_a_worker_keeps_filling_the_role_not_given_from_its_model() -> None:
    worker = Worker(MemoryStore(), model=FunctionModel(_answer, name="openai:gpt-4o"), observer="offline")
    assert isinstance(worker.engine.observer, OfflineObserver)
    assert isinstance(worker.engine.reflector, LLMReflector)


# ---- observation.observe_attachments ------------------------------------------------------------


def _observer_parts(setting: Any) -> list[str]:
    config = MemoryConfig(observation={"observe_attachments": setting})
    observer = _roles(config, model=FunctionModel(_answer)).observer
    assert isinstance(observer, LLMObserver)
    sent = observer.build_messages(ObservationRequest(messages=_conversation()[4:6]))
    assert sent is not None
    return [p.media_type if isinstance(p, FilePart) else p.type for p in sent[-1].parts]


@pytest.mark.parametrize(
    ("setting", "forwarded"),
    [
        (("image/*", "application/pdf"), ["image/png"]),  # the default
        (True, ["image/png", "text/csv"]),
        ("auto", ["image/png", "text/csv"]),
        (False, []),
        (["TEXT/CSV"], ["text/csv"]),
        (["*"], ["image/png", "text/csv"]),
        ([], []),
    ],
)
def test_the_observer_model_sees_the_attachments_the_option_allows(
    setting: Any, forwarded: list[str]
) -> None:
    assert _observer_parts(setting) == ["text", *forwarded]


def test_an_image_under_a_generic_type_counts_as_an_image() -> None:
    config = MemoryConfig(observation={"observe_attachments": ["image/*"]})
    observer = _roles(config, model=FunctionModel(_answer)).observer
    png = FilePart(media_type="application/octet-stream", url="https://example.com/k.png", filename="k.png")
    request = ObservationRequest(messages=[Message(role="user", parts=(TextPart(text="see"), png))])
    sent = observer.build_messages(request)
    assert sent is not None and png in sent[-1].parts


# ---- config as a plain dict ---------------------------------------------------------------------


async def test_memory_and_worker_take_a_plain_dict_config() -> None:
    options = {"scope": "resource", "observation": {"message_tokens": 20_000}}
    async with Memory("memory://", config=options) as memory:  # type: ignore[arg-type]
        assert memory.config == MemoryConfig(**options)  # type: ignore[arg-type]
    assert (
        Worker(
            MemoryStore(), config={"observation": {"message_tokens": 20_000}}
        ).config.observation.message_tokens
        == 20_000
    )
    with pytest.raises(ConfigError, match=r"observation\.message_tokens"):
        Memory("memory://", config={"observation": {"message_tokens": -1}})
    with pytest.raises(
        ConfigError, match=r"observation\.mesage_tokens.*did you mean 'observation\.message_tokens'"
    ):
        Worker(MemoryStore(), config={"observation": {"mesage_tokens": 1}})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="config"):
        memory_config(["observation"])  # type: ignore[arg-type]


async def test_the_worker_takes_the_apps_retry_policy_and_model_timeout() -> None:
    """A worker retries and times out the observer/reflector calls the way the app's Memory does."""
    from obsmem.models.retry import RetryPolicy
    from obsmem.storage import MemoryStore
    from obsmem.worker import Worker

    policy = RetryPolicy(max_retries=2)
    worker = Worker(MemoryStore(), model=FunctionModel(lambda request: "ok"), retry=policy, model_timeout_s=12.5)
    assert worker.engine.model_timeout_s == 12.5
    assert worker.engine.observer.retry_policy is policy  # type: ignore[attr-defined]
