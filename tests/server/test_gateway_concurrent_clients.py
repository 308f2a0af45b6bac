"""Two clients of the gateway on one thread at the same time (two tabs of one chat, an agent's
parallel requests): each request's upstream context must end with that request's own question.
Before, a turn's context was read after other requests had saved theirs: client A's upstream
request ended "A0, C0" and A got the answer to C's question (30 of 45 answers wrong here). A
turn now leaves out, of the context ``begin_turn`` gives, what other writers stored after its
input meanwhile (helper-121's finding)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.server.conftest import Env, open_env
from tests.server.test_gateway import client_for


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("gateway-concurrent"))


def test_concurrent_requests_on_one_thread_each_get_their_own_answer(env: Env) -> None:
    client = client_for(env, "g-tabs")
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])

    def ask(question: str) -> tuple[str, str | None]:
        answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
        return question, answer.choices[0].message.content

    wrong = []
    with ThreadPoolExecutor(3) as pool:
        for i in range(15):
            for question, answer in pool.map(ask, [f"A{i}", f"B{i}", f"C{i}"]):
                if answer != f"You said: {question}":  # the upstream echoes the newest user message
                    wrong.append((question, answer))
    assert wrong == []
