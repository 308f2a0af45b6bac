"""The memory configuration the crash test's processes share (workers must use the app's)."""

from __future__ import annotations

from obsmem import MemoryConfig, ObservationConfig, ReflectionConfig

CLAIM_TTL_S = 1.5


def config() -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=2000, buffer_tokens=0.2),
        reflection=ReflectionConfig(observation_tokens=4000),
    )
