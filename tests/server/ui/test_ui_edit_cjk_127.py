"""The inspector's review edit refuses a corrected text in Chinese (or any non-Latin script) well
under the 10,000 characters it promises (helper-127's hostile review of 183550e / 9c314f8).

183550e bounds the edit at 10,000 characters, "what REST's edit takes"; 9c314f8 refuses a form
over 64 KiB (413) before reading it. A browser posts the form URL-encoded: one CJK character is 9
bytes (%E4%B8%AD), so any edit over about 7,200 such characters is refused 413 with "The form is
too large", though REST takes 10,000 of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.server.ui_env import UiEnv, open_ui_env

TEXT = "娜迪亚喜欢靠过道的座位" * 800  # 8,800 characters: under the 10,000 promised


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui-cjk-127"), turns=1) as env:
        yield env


def test_a_long_chinese_edit_under_the_limit_is_saved(ui: UiEnv) -> None:
    target = ui.candidates[0]
    with httpx.Client(base_url=ui.url, cookies={"obsmem_ui_key": ui.keys.alice}, follow_redirects=False,
                      timeout=60) as client:  # fmt: skip
        page = client.get("/ui/knowledge/review").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token is not None
        done = client.post(f"/ui/knowledge/review/{target}/edit",
                           data={"csrf_token": token.group(1), "text": TEXT, "reason": "fix"})  # fmt: skip
    assert done.status_code == 303, (done.status_code, done.text[:200])
