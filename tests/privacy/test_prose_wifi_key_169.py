"""A wifi key said after the network's name, or right after "wifi key", never reaches the memory
models (helper-169).

Before: with privacy on, "network HomeNet, key Tulip77x", "SSID HomeNet key: Orchid55k", "wifi
key Sunfl0wer42" (no colon or copula) reached the hosted observer in clear and stayed in the
observations it wrote, while "wifi key: Tulip77x" and "the wifi key is Tulip77x" were already
redacted. Ordinary sentences with the same words ("the key is to stay calm", "network latency, key
metrics", "SSID eduroam, key management WPA2-Enterprise") are left as written.
"""

from __future__ import annotations

import pytest

from .hosted_observer import check_never_sent, check_sent_as_written, check_replaced_alone, check_left_alone

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ("network HomeNet, key Tulip77x", "Tulip77x"),
    ("SSID HomeNet5G key: Orchid55k", "Orchid55k"),
    ("wifi key Sunfl0wer42", "Sunfl0wer42"),
    ('WiFi network "Attic", key "m4pleSyrup"', "m4pleSyrup"),
    ("network key Hibiscus6w", "Hibiscus6w"),
    # the forms with a colon, a copula or "password", redacted before too: kept so
    ("Wi-Fi: CafeGuest, password brew2024beans", "brew2024beans"),
    ("wifi key: Quartz88zz", "Quartz88zz"),
    ("the wifi key is Lantern3x", "Lantern3x"),
]

#: Ordinary sentences with the same words: left as written.
ORDINARY = [
    "the key is to stay calm",
    "the key point is",
    "The key is in the drawer.",
    "network latency, key metrics",
    "network eth0, key exchange done",
    "network HomeNet, key rotation every 90 days",
    "SSID eduroam, key management WPA2-Enterprise",
    "The wifi key is printed on the router.",
    "Where is the wifi key?",
    "The SSID is HomeNet and the password is on the router.",
]


async def test_wifi_keys_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(SAID)


async def test_ordinary_sentences_about_keys_reach_the_observer_as_written() -> None:
    await check_sent_as_written(ORDINARY)


@pytest.mark.parametrize(("text", "secret"), SAID)
def test_the_key_alone_is_replaced(text: str, secret: str) -> None:
    check_replaced_alone(text, secret, counts={"password": 1})


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_sentences_are_left_alone(text: str) -> None:
    check_left_alone(text)
