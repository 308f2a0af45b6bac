"""Options whose effect depends on being chosen, through snapshots; and observe_attachments' patterns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from obsmem.config import MemoryConfig, ObservationConfig


def _through_snapshot(config: MemoryConfig) -> MemoryConfig:
    return MemoryConfig.from_snapshot(json.loads(json.dumps(config.snapshot())))


def test_a_snapshot_reads_default_values_back_as_defaults() -> None:
    restored = _through_snapshot(MemoryConfig())
    # block_after's default depends on other options, so its resolved value is always kept
    assert restored.observation.model_fields_set == {"block_after"}
    assert restored.reflection.model_fields_set == {"block_after"}
    assert "max_output_tokens" not in restored.observation.model_fields_set
    assert restored == MemoryConfig()


def test_a_snapshot_keeps_the_values_that_were_chosen() -> None:
    config = MemoryConfig(
        temporal_markers=True,
        observation={"max_output_tokens": 4_000, "buffer_tokens": False},
        reflection={"temperature": 0.2, "model": {8_000: "vllm:small"}},
        retrieval={"scope": "resource", "enabled": False},
    )
    restored = _through_snapshot(config)
    assert restored == config and restored.snapshot() == config.snapshot()
    assert {"max_output_tokens", "buffer_tokens"} <= restored.observation.model_fields_set
    assert {"temperature", "model"} <= restored.reflection.model_fields_set
    assert restored.retrieval.enabled is False  # a section dict would have switched it on


@pytest.mark.parametrize(
    ("setting", "media_type", "forwarded"),
    [
        (("image/*", "application/pdf"), "image/png", True),
        (("image/*", "application/pdf"), "IMAGE/JPEG", True),
        (("image/*", "application/pdf"), "application/pdf", True),
        (("image/*", "application/pdf"), "text/csv", False),
        (("image/*", "application/pdf"), "image/*", True),
        (["text/csv"], "text/csv", True),
        (["text/csv"], "text/plain", False),
        (["text/csv"], "image/png", False),
        (["*"], "video/mp4", True),
        ([], "image/png", False),
        (True, "video/mp4", True),
        (False, "image/png", False),
        ("auto", "application/zip", True),
    ],
)
def test_observe_attachments_patterns(setting: Any, media_type: str, forwarded: bool) -> None:
    assert ObservationConfig(observe_attachments=setting).forwards_attachment(media_type) is forwarded
