"""Redaction leaves ordinary prose about passwords, codes, keys and tokens alone.

The conversational secret patterns knowledge capture uses (obsmem.said: "my wifi password is
hunter2-Blue!") were added to the privacy boundary's detectors for a few minutes today; a hostile
review (helper-133) then found them replacing words of every sentence below, text a privacy user
would lose from every observation for good. They were taken out of redaction again (knowledge
capture keeps them, where a false positive costs a candidate fact): a password said in prose is
not redacted (README, privacy). This table keeps any detector that comes back from destroying
these sentences, and capture's own ordinary rows.
"""

from __future__ import annotations

import pytest

from obsmem.privacy import Redactor
from tests.knowledge.agents.test_capture_drops_secrets_129 import ORDINARY

PROSE = [
    # building codes are law, not secrets (_CODE_WORDS: "building[ -]?codes?")
    "The building code is strict about fire exits.",
    "Building codes are strict in California.",
    "The building code is IBC-2021.",
    # English status sentences whose adjective / participle is not in _NOT_VALUES
    "The password is case-sensitive.",
    "The password was reset yesterday.",
    "The password is sent over TLS.",
    "The verification code is sent to your phone.",
    "A password is like a toothbrush.",
    "The 2FA code is time-based.",
    "The safe code is known by the manager.",
    "They set a password to protect the PDF.",
    "Reset the password to default.",
    "Password → Settings → Security",
    "The passcode is Face ID.",
    # the same in the other languages the detector claims to read
    "Das Passwort ist Pflicht.",
    "Das Passwort ist ungültig.",
    "Das Passwort ist gespeichert.",
    "Le mot de passe est obligatoire.",
    "La contraseña es obligatoria.",
    "La contraseña es incorrecta.",
    "La contraseña es demasiado corta.",
    "A senha é obrigatória.",
    "A senha é inválida.",
    "Het wachtwoord is onjuist.",
    "Hasło jest nieprawidłowe.",
    # technical docs: a hashing algorithm before "password" (_BEFORE: only manager/reset/... excluded)
    "Use pbkdf2_sha256 as the password hasher.",
    "We use Argon2id as our password hashing algorithm.",
    # a password word, then "It's <something shaped>" in the next sentence (_SPLIT_SAID)
    "My password manager crashed. It's v8.2-beta now.",
    "The password policy changed. It's NIST-800-63 compliant now.",
    "Password requirements: at least 12 characters. It's NIST-compliant.",
    "The token expired. It's 3AM-ish here.",
    # a login / account line with a slash (_LOGIN)
    "Login is SSO/SAML.",
    "Account: Free/Pro/Team",
    # source code a coding agent discusses: the right-hand side of an assignment to a variable
    # named like a key/token is taken for the value (the older assignment detectors leave these)
    'token = request.headers.get("Authorization")',
    "api_key = settings.OPENAI_API_KEY",
    'const token = localStorage.getItem("token");',
    "secret_key = get_random_secret_key()",
    "private_key = serialization.load_pem_private_key(data, None)",
    "session_token = secrets.token_urlsafe(32)",
    "passcode = generate_code(6)",
    # CJK (_CJK_SAID): any ASCII word right after パスワードは / 密码是 / 비밀번호는 is the value
    "パスワードはSMSで送られます。",  # the password is sent by SMS
    "パスワードは1Passwordに保存しています。",  # I keep the password in 1Password
    "비밀번호는 OTP로 받습니다.",  # the password comes as an OTP
    "パスワードはWi-Fiルーターの裏にあります。",  # the password is on the back of the Wi-Fi router
    "パスワードはPDFに書いてあります。",  # the password is written in the PDF
    "密码是 iPhone 的 Face ID",
    # _LOGIN: 'login:'/'account:' then any '<x>:' or '<x>/' takes what follows for the password:
    # a link after 'Login:' loses everything after 'https:'
    "Login: https://app.example.com/login",
    "Account: https://github.com/alice",
    "Sign-in: https://accounts.google.com",
    "Account: ACME-42 / EMEA region",
    "Credentials are username:password (basic auth).",
    # a password/key/token word, then any "It's <word with a digit or a dash>" (_SPLIT_SAID):
    # dates, times, model names, standards are taken for the password
    "I reset my password yesterday. It's 2026-01-05 today, right?",
    "The token limit confused me. It's GPT-4o-mini I'm using.",
    "I rotated the API key. It's 10:30pm here, going to bed.",
    "Use the refresh token. It's JWT-based.",
    "The access token expired. It's RFC-6749 behaviour.",
    "I changed the wifi password. It's WPA3-Personal now.",
    "My password expired again. It's Q4-2026 planning week anyway.",
    # a form's empty value: '(none' is replaced and a stray ')' is left
    "Password: (none)",
]


def _redactor() -> Redactor:
    return Redactor(b"k" * 32)


@pytest.mark.parametrize("text", PROSE + [text for text, _ in ORDINARY])
def test_ordinary_prose_is_left_as_it_is(text: str) -> None:
    assert _redactor().redact(text).text == text
