"""With privacy on, a password, PIN or door code a user states in prose never reaches the memory
models (helper-145).

Before: only ``password=``-style assignments were redacted, so "my password is Sunflower42", "my
wifi password is …", "pw: …", "the PIN is 4821", "the code for the alarm is 4821", "kod do drzwi
to 4821" and the other forms knowledge capture refuses reached the hosted observer in clear, and
the observations it wrote (here: what it was sent, echoed) kept them. Ordinary prose about
passwords is left as it is (tests/privacy/test_prose_secrets_redacted.py, and the sentences here).
"""

from __future__ import annotations

import pytest

from obsmem.privacy import Redactor

from .hosted_observer import observed as _observed
from tests.integrity.work_count import GROWTH_BOUND, growth

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ("my password is Sunflower42", "Sunflower42"),
    ("My wifi password is hunter2-Blue!", "hunter2-Blue"),
    ("The password for the router is Admin1234.", "Admin1234"),
    ("pw: Tulip77x", "Tulip77x"),
    ("my pw is Rosebud99", "Rosebud99"),
    ("My passcode is 482193", "482193"),
    ("PIN is 7305", "7305"),
    ("The PIN for my bank card is 6158.", "6158"),
    ("the code for the alarm is 9042", "9042"),
    ("The gate code is 3391#.", "3391#"),
    ("My password's Marigold7", "Marigold7"),
    ("## Password\nDaisy2024x", "Daisy2024x"),
    ("password -- Orchid55", "Orchid55"),
    ("kod do drzwi to 5527", "5527"),
    ("il codice della porta è 6684", "6684"),
    ("le code de la porte est 7719", "7719"),
    ("Mein Passwort ist Sonnenblume42", "Sonnenblume42"),
    ("Mon mot de passe est Tournesol42", "Tournesol42"),
    ("Hasło to Slonecznik42", "Slonecznik42"),
    ("La password è Girasole42", "Girasole42"),
    ("Mi contraseña es Girasol42", "Girasol42"),
]

#: Further forms users write (found after the first fix; each reached the observer in clear).
HUNTED = [
    ("my phone unlock code is 5831", "5831"),
    ("the lockbox code is 6203", "6203"),
    ("key box code: 7741", "7741"),
    ("The combination is 12-34-56.", "12-34-56"),
    ("the combo to the lock is 31-07-19", "31-07-19"),
    ("my card's CVV is 482", "482"),
    ("the security code is 917", "917"),
    ("my login is alice / Juniper8z", "Juniper8z"),
    ("WiFi: HomeNet / Magnolia5q", "Magnolia5q"),
    ("username alice password Lavender3k", "Lavender3k"),
    ("user: alice pass: Hibiscus6w", "Hibiscus6w"),
    ("the password i use is Peony44r", "Peony44r"),
    ("My password has been changed to Azalea9m", "Azalea9m"),
    ("I use Camellia7d as my password", "Camellia7d"),
    ("Begonia2v is my wifi password.", "Begonia2v"),
    ("my password is correct-horse42", "correct-horse42"),
]

#: The other languages the secret detectors read (each reached the observer in clear).
LANGUAGES = [
    ("La clave del wifi es Girasol42", "Girasol42"),
    ("Min pinkod är 5519", "5519"),
    ("Salasanani on Auringonkukka42", "Auringonkukka42"),
    ("PIN-koodi on 6620", "6620"),
    ("Şifrem Aycicegi42", "Aycicegi42"),
    ("Мой пароль Podsolnuh42", "Podsolnuh42"),
    ("Мой ПИН-код 7714", "7714"),
    ("Код от двери 8803", "8803"),
    ("我的密码是Xiangri42", "Xiangri42"),
    ("wifi密码是Lanhua42", "Lanhua42"),
    ("パスワードはHimawari42です", "Himawari42"),
    ("暗証番号は9152です", "9152"),
    ("비밀번호는 Haebaragi42입니다", "Haebaragi42"),
    ("Mon code PIN est le 3348", "3348"),
    ("Mon mot de passe wifi est Tournesol42", "Tournesol42"),
]

#: A door code told by how the door opens.
OPENS = [
    ("The gate opens with 2741", "2741"),
    ("You get in with code 3852", "3852"),
    ("Press 4963# at the door", "4963#"),
    ("The keypad takes 5074", "5074"),
]

#: Ordinary sentences the new forms must leave alone (beside the guard's table).
ORDINARY = [
    "I changed my password yesterday.",
    "The password policy requires 12 characters.",
    "My password is 12 characters long.",
    "The password is AES-256 encrypted.",
    "The password is stored with SHA-256.",
    "password -- see the vault",
    "## Password\nUse at least 12 characters.",
    "The PIN is 4 digits.",
    "The code for the alarm is on the fridge.",
    "Il codice della porta è cambiato.",
    "Le code de la porte est sur le frigo.",
    "kod do drzwi nie działa",
    "Our release is v2.4.1 and the password reset flow is new.",
    "The wifi password is on a sticky note.",
    "The combination of Python3 and Rust works well.",
    "The security code is printed on the back of the card.",
    "We use GPT4o as our model.",
    "Login: https://app2.example.com/login",
    "The password was changed to meet the policy.",
    "The code for the building B2 is IBC-2021.",
    "The combo to the lock is on a sticky note.",
    "pwd is /home/alice2",
    "The OTP code is 6 digits.",
    "We used Argon2id as our password hashing algorithm.",
    "Salasana on liian lyhyt.",
    "Şifrem çok uzun.",
    "Мой пароль слишком короткий.",
    "La clave del éxito es la constancia.",
    "パスワードは1Passwordに保存しています。",
    "The gate opens with a remote.",
    "Press 123 on the keypad for help.",
    "Dial 911 on the intercom in an emergency.",
    "The door opens with 2 keys.",
    # helper-152's review of f1e0704 and 81c2cd9: times and cloud regions
    "Doors open 1930, show starts 2000.",
    "The flight gets in 1430 tomorrow.",
    "We hope to get in 2025.",
    "The AWS account is prod / us-east-1.",
    "account: 123456789012 / eu-west-2",
    "Login: prod / us-east-1",
]


async def test_no_stated_secret_reaches_the_observer_or_the_observations() -> None:
    text = "\n\n".join(said for said, _ in SAID) + "\n\n" + "word " * 40
    sent, kept = await _observed(text)
    assert sent and "User said" in kept, "observed"
    assert [secret for _, secret in SAID if secret in sent] == []
    assert [secret for _, secret in SAID if secret in kept] == []
    assert "[REDACTED:password:" in sent


async def test_further_forms_never_reach_the_observer_or_the_observations() -> None:
    text = "\n\n".join(said for said, _ in HUNTED) + "\n\n" + "word " * 40
    sent, kept = await _observed(text)
    assert sent and "User said" in kept, "observed"
    assert [secret for _, secret in HUNTED if secret in sent] == []
    assert [secret for _, secret in HUNTED if secret in kept] == []


async def test_other_languages_never_reach_the_observer_or_the_observations() -> None:
    text = "\n\n".join(said for said, _ in LANGUAGES) + "\n\n" + "word " * 40
    sent, kept = await _observed(text)
    assert sent and "User said" in kept, "observed"
    assert [secret for _, secret in LANGUAGES if secret in sent] == []
    assert [secret for _, secret in LANGUAGES if secret in kept] == []


async def test_a_code_told_by_how_the_door_opens_never_reaches_the_observer() -> None:
    text = "\n\n".join(said for said, _ in OPENS) + "\n\n" + "word " * 40
    sent, kept = await _observed(text)
    assert sent and "User said" in kept, "observed"
    assert [secret for _, secret in OPENS if secret in sent + kept] == []


async def test_ordinary_prose_reaches_the_observer_as_written() -> None:
    text = "\n\n".join(ORDINARY) + "\n\n" + "word " * 40
    sent, _ = await _observed(text)
    sent = sent.replace("\n> ", "\n")  # the transcript quotes a message's next lines
    assert [line for line in ORDINARY if line not in sent] == []
    assert "[REDACTED" not in sent


@pytest.mark.parametrize("unit", ["my password is ", "## Password\n", "password -- ", "kod do drzwi to ",
                                  "il codice della porta ", "le code de la porte est ", "PIN is ", "pw: ",
                                  "the code for the alarm is ", "My password's ", "username a password ",
                                  "WiFi: a / ", "I use abcdef1 as ", "abcdef1 is my ", "combination is ", "x" * 150 + " ",
                                  "Salasana on ", "Şifrem ", "The gate opens with ", "Press 1234 ", "Код от двери ", "密码是", "パスワードは" + "a" * 150])
def test_redaction_stays_linear(unit: str) -> None:
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND, f"{unit!r}: {ratio:.1f}x the work for 4x the input"
