"""POST /api/threads of one id sent several times at once by the same key: every request answered
201 (each saying it created the thread, each echoing the first one's title), where one sent after
the others answers 409 ThreadIdTakenError. Memory.create_thread hands back an existing thread as it
is, so the service could not tell it made it; Memory.create_thread_made says so. Found by helper 196."""

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("create-race"))


def test_one_of_concurrent_creates_of_one_id_is_201(env: Env) -> None:
    async def run() -> list[int]:
        async with httpx.AsyncClient(base_url=env.url, timeout=60, headers=auth(env.keys.alice)) as client:
            answers = await asyncio.gather(*(client.post("/api/threads", json={"id": "same", "title": f"t{n}"})
                                             for n in range(5)))
        return [a.status_code for a in answers]

    codes = asyncio.run(run())
    assert sorted(codes) == [201, 409, 409, 409, 409], codes
