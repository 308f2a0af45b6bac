"""The redaction table (issue 14, item 2): every format redacted, ordinary text left alone.

Each row is a sample as it appears in a conversation, the secret (or PII value) inside it that
must be gone, and the category its placeholder names. The negatives are text a redactor must not
touch: numbers, dates, prices, invoice ids, UUIDs, versions, times, code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obsmem.config import MemoryConfig, PrivacyConfig
from obsmem.errors import ConfigError
from obsmem.privacy import (
    PII_CATEGORIES,
    SECRET_CATEGORIES,
    Detector,
    ProviderRules,
    Redactor,
    compile_pattern,
    provider_of,
)

from tests.integrity.work_count import GROWTH_BOUND
from tests.integrity.work_count import growth as work_growth

KEY = b"test-key-not-a-secret"
REDACTOR = Redactor(KEY, pii=PII_CATEGORIES)
PLACEHOLDER = re.compile(r"\[REDACTED:([a-z0-9_]+):([0-9a-f]{8})\]")

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq8Zx1w2xq9\nQ2hZ0p5Gk3mN8rT1uV4wX7yZ0aB3cD6eF9gH==\n"
    "-----END RSA PRIVATE KEY-----"
)
OPENSSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----"
)

#: (sample, the value that must disappear, category)
SECRETS: list[tuple[str, str, str]] = [
    ("OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "openai_key"),
    ("use sk-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e please", "sk-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e", "openai_key"),
    ("key sk-ant-api03-Zq8vN2kLp5Rt9wXy3Bc6Df1Gh4Jk7Mn0Pq-abcDEF_123", "sk-ant-api03-Zq8vN2kLp5Rt9wXy3Bc6Df1Gh4Jk7Mn0Pq-abcDEF_123", "anthropic_key"),
    ("maps key AIzaSyB1c2D3e4F5g6H7i8J9k0L1m2N3o4P5q6R", "AIzaSyB1c2D3e4F5g6H7i8J9k0L1m2N3o4P5q6R", "google_key"),
    ("oauth ya29.a0AfH6SMBx1y2z3A4B5C6D7E8F9G0h", "ya29.a0AfH6SMBx1y2z3A4B5C6D7E8F9G0h", "google_key"),
    ("client 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", "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", "google_key"),
    ("aws id AKIAIOSFODNN7EXAMPLE ok", "AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("temp ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A", "aws_access_key"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_key"),
    ("token ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r", "ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r", "github_token"),
    ("pat github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789", "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789", "github_token"),
    ("gitlab glpat-x1Y2z3A4b5C6d7E8f9G0", "glpat-x1Y2z3A4b5C6d7E8f9G0", "gitlab_token"),
    ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKl", "xoxb-123456789012-1234567890123-AbCdEfGhIjKl", "slack_token"),
    ("hook https://hooks.slack.com/services/T0001/B0001/XXXXXXXXXXXXXXXXXXXXXXXX", "T0001/B0001/XXXXXXXXXXXXXXXXXXXXXXXX", "slack_token"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe_key"),
    ("restricted rk_test_51H8aBcDeFgHiJkLmNoPqRsT", "rk_test_51H8aBcDeFgHiJkLmNoPqRsT", "stripe_key"),
    ("webhook whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "stripe_key"),
    ("sendgrid 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", "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", "sendgrid_key"),
    ("twilio SK0123456789abcdef0123456789abcdef", "SK0123456789abcdef0123456789abcdef", "twilio_key"),
    ("hf hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "huggingface_token"),
    ("npm npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "npm_token"),
    ("pypi pypi-AgEIcHlwaS5vcmcCJDU3OTI4YjU0LTkzMmUtNDM4ZC1hYjM5LWE1ZjZmYzE3ZGM0NQ", "pypi-AgEIcHlwaS5vcmcCJDU3OTI4YjU0LTkzMmUtNDM4ZC1hYjM5LWE1ZjZmYzE3ZGM0NQ", "pypi_token"),
    ("do dop_v1_" + "a1b2c3d4" * 8, "dop_v1_" + "a1b2c3d4" * 8, "digitalocean_token"),
    ("shop shpat_0123456789abcdef0123456789abcdef", "shpat_0123456789abcdef0123456789abcdef", "shopify_token"),
    ("jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt"),
    ("Authorization: Bearer abcDEF123456ghiJKL789mno", "abcDEF123456ghiJKL789mno", "auth_header"),
    ("curl -H 'Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l'", "YWxhZGRpbjpvcGVuc2VzYW1l", "auth_header"),
    ("X-Api-Key: 9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706", "auth_header"),
    (PEM, "MIIEowIBAAKCAQEA7bq8Zx1w2xq9", "private_key"),
    (OPENSSH, "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "private_key"),
    ('{"key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\n-----END PRIVATE KEY-----"}', "MIIEvQIBADANBgkqhkiG9w0B", "private_key"),
    ("pasted -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5", "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5", "private_key"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me", "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl", "ssh_key"),
    ("clone https://alice:s3cr3t-Pa55@git.example.com/repo.git", "s3cr3t-Pa55", "url_password"),
    ("DATABASE_URL=postgres://app:hunter2xyz@db.internal:5432/prod", "hunter2xyz", "connection_string"),
    ("mongodb+srv://admin:Mongo!Pass9@cluster0.abcd.mongodb.net/test", "Mongo!Pass9", "connection_string"),
    ("redis://:r3disPass@cache:6379/0", "r3disPass", "connection_string"),
    ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==", "connection_string"),
    ("Server=db;Database=app;User Id=sa;Password=P@ssw0rd!;", "P@ssw0rd!", "password"),
    ("DB_PASSWORD=correct-horse-42", "correct-horse-42", "password"),
    ('{"user": "bob", "password": "battery staple 9"}', "battery staple 9", "password"),
    ("password: tr0ub4dor", "tr0ub4dor", "password"),
    ("mysql -u root --password=Sup3rS3cret db", "Sup3rS3cret", "password"),
    ("client_secret: 'q8Zk2Lm9Xv4Rt7Yp1Wn6'", "q8Zk2Lm9Xv4Rt7Yp1Wn6", "secret"),
    ("api_key = a1b2c3d4e5f6g7h8i9j0k1l2", "a1b2c3d4e5f6g7h8i9j0k1l2", "secret"),
    ("SECRET_KEY_BASE=5f4dcc3b5aa765d61d8327deb882cf99", "5f4dcc3b5aa765d61d8327deb882cf99", "secret"),
]

PII: list[tuple[str, str, str]] = [
    ("mail john.doe+work@example.co.uk today", "john.doe+work@example.co.uk", "email"),
    ("from ANA_91@mail.example.org", "ANA_91@mail.example.org", "email"),
    ("call +1 (555) 123-4567 now", "+1 (555) 123-4567", "phone"),
    ("call 555-123-4567 now", "555-123-4567", "phone"),
    ("call (212) 555.0199 now", "(212) 555.0199", "phone"),
    ("uk +44 20 7946 0958", "+44 20 7946 0958", "phone"),
    ("fr +33 1 23 45 67 89", "+33 1 23 45 67 89", "phone"),
    ("in +91-98765-43210", "+91-98765-43210", "phone"),
    ("visa 4111 1111 1111 1111 exp 12/27", "4111 1111 1111 1111", "credit_card"),
    ("mc 5500-0000-0000-0004", "5500-0000-0000-0004", "credit_card"),
    ("amex 378282246310005", "378282246310005", "credit_card"),
    ("iban GB82 WEST 1234 5698 7654 32", "GB82 WEST 1234 5698 7654 32", "iban"),
    ("iban DE89370400440532013000", "DE89370400440532013000", "iban"),
    ("ssn 078-05-1120", "078-05-1120", "ssn"),
    ("SSN: 078051120", "078051120", "ssn"),
    ("server 203.0.113.42 down", "203.0.113.42", "ipv4"),
    ("v6 2001:db8:85a3::8a2e:370:7334 up", "2001:db8:85a3::8a2e:370:7334", "ipv6"),
    ("full fe80:0:0:0:202:b3ff:fe1e:8329", "fe80:0:0:0:202:b3ff:fe1e:8329", "ipv6"),
]

NEGATIVES = [
    "Invoice INV-2024-001 is due on 2024-01-15 (15.01.2024, 01/15/2024).",
    "It costs $19.99, or €1,234.56; 3.14159 and 1,000,000 and 42.",
    "Order 123e4567-e89b-12d3-a456-426614174000 shipped.",
    "Upgrade to v1.2.3 at 12:30:45 on build 20240115.",
    "Python slices like x[1::2] and a::b, C++ std::vector<int>.",
    "The MAC is 00:1A:2B:3C:4D:5E and the sha is 9fceb02d0ae598e95dc970b74764a1e2d3f4a5b6.",
    "A card-like 4111111111111112 fails Luhn; 1234567812345678 too.",
    "Reach room 555-1234, zip 94103-1234, tracking 1Z999AA10123456784.",
    "The password field is required; the token count is 1500; my secret is out.",
    "password: ${DB_PASSWORD} and password=<your-password> and password: ****",
    "Her basic understanding of bearer instruments was ok; task-runner sk-learn.",
    "IBAN-shaped GB00 WEST 1234 5698 7654 32 has a wrong checksum.",
    "SSN 000-12-3456 and 666-12-3456 are never issued.",
    "Email me at alice at example dot com; @mention someone.",
    "Account number 12345678, reference ABC-123-XYZ.",
]


@pytest.mark.parametrize(("sample", "value", "category"), SECRETS + PII, ids=lambda v: str(v)[:30])
def test_every_format_is_redacted(sample: str, value: str, category: str) -> None:
    result = REDACTOR.redact(sample)
    assert value not in result.text
    assert category in PLACEHOLDER.findall(result.text)[0] or any(
        found == category for found, _ in PLACEHOLDER.findall(result.text)
    ), result.text
    assert result.counts.get(category, 0) >= 1


def test_the_table_covers_thirty_formats_and_every_category() -> None:
    assert len(SECRETS) + len(PII) >= 30
    assert {category for _, _, category in SECRETS} == set(SECRET_CATEGORIES)
    assert {category for _, _, category in PII} == set(PII_CATEGORIES)


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_text_is_left_alone(text: str) -> None:
    result = REDACTOR.redact(text)
    assert result.text == text and result.counts == {}


def test_assignments_keep_their_name_and_only_the_value_goes() -> None:
    text = REDACTOR.redact('DB_PASSWORD=hunter2 and "api_key": "a1b2c3d4e5f6g7h8i9j0"').text
    assert text.startswith("DB_PASSWORD=[REDACTED:password:") and '"api_key": "[REDACTED:secret:' in text


def test_placeholders_are_stable_per_value_and_distinct_between_values() -> None:
    first = REDACTOR.redact("mail a@example.com then b@example.com then a@example.com").text
    tags = PLACEHOLDER.findall(first)
    assert [category for category, _ in tags] == ["email"] * 3
    assert tags[0] == tags[2] != tags[1]
    assert REDACTOR.redact("again a@example.com").text.endswith(f"[REDACTED:email:{tags[0][1]}]")


def test_placeholders_are_keyed_not_a_plain_hash() -> None:
    other = Redactor(b"another key", pii=["ssn"])
    assert REDACTOR.placeholder("ssn", "078-05-1120") != other.placeholder("ssn", "078-05-1120")
    import hashlib

    plain = hashlib.sha256(b"078-05-1120").hexdigest()[:8]
    assert plain not in REDACTOR.placeholder("ssn", "078-05-1120")


def test_pii_is_off_unless_chosen_per_category() -> None:
    secrets_only = Redactor(KEY)
    text = "mail a@example.com, call 555-123-4567, key AKIAIOSFODNN7EXAMPLE"
    assert secrets_only.redact(text).counts == {"aws_access_key": 1}
    emails = Redactor(KEY, pii=["email"])
    assert emails.redact(text).counts == {"aws_access_key": 1, "email": 1}
    nothing = Redactor(KEY, secrets=False)
    assert nothing.redact(text).text == text


def test_custom_patterns_run_first_and_may_limit_the_value() -> None:
    redactor = Redactor(KEY, patterns=[("employee_id", r"\bEMP-(?P<value>\d{6})\b")])
    result = redactor.redact("ask EMP-123456 about it")
    assert result.text.startswith("ask EMP-[REDACTED:employee_id:") and result.counts == {"employee_id": 1}


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        (("bad name", "x"), "must be lowercase"),
        (("email", "x"), "built-in"),
        (("ok", "("), "not a valid regex"),
        (("ok", "a*"), "matches empty text"),
        (("ok", 3), "non-empty regex"),
    ],
)
def test_a_bad_custom_pattern_is_a_config_error(pattern: tuple[object, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        compile_pattern(*pattern)
    assert caught.value.option == "privacy.patterns"
    with pytest.raises(ConfigError, match="privacy"):
        MemoryConfig(privacy=PrivacyConfig(patterns=[pattern]))  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"redact_pii": ["email", "fax"]}, "privacy.redact_pii"),
        ({"redact_pii": "email"}, "privacy.redact_pii"),
        ({"providers": {"acme": ["openai"]}}, "privacy.providers"),
        ({"providers": {"*": "openai"}}, "privacy.providers"),
        ({"providers": ["*"]}, "privacy.providers"),
        ({"key": ""}, "privacy.key"),
        ({"patterns": "email"}, "privacy.patterns"),
        ({"patterns": [("a", "x"), ("a", "y")]}, "privacy.patterns"),
        ({"strict": "yes"}, "privacy.strict"),
        ({"unknown": 1}, "privacy.unknown"),
    ],
)
def test_privacy_options_are_validated(options: dict[str, object], option: str) -> None:
    with pytest.raises(ConfigError) as caught:
        MemoryConfig(privacy=PrivacyConfig(**options))  # type: ignore[arg-type]
    assert caught.value.option == option


def test_the_key_never_reaches_a_snapshot_and_the_section_survives_one() -> None:
    config = MemoryConfig(privacy=PrivacyConfig(key="k3y-s3cr3t", redact_pii=True, providers={"*": ["openai"]}))
    snapshot = config.snapshot()
    assert "k3y-s3cr3t" not in repr(snapshot) and "k3y-s3cr3t" not in repr(config)
    restored = MemoryConfig.from_snapshot(snapshot)
    assert restored.privacy is not None and restored.privacy.redact_pii == PII_CATEGORIES
    assert restored.privacy.providers == {"*": ("openai",)}
    assert MemoryConfig.from_snapshot(MemoryConfig(privacy=PrivacyConfig()).snapshot()).privacy == PrivacyConfig()
    assert MemoryConfig().privacy is None


@pytest.mark.parametrize(
    ("rules", "provider", "scopes", "allowed"),
    [
        ({"resource:acme-*": ["offline"], "*": ["openai", "anthropic"]}, "openai", [("t1", "acme-eu")], False),
        ({"resource:acme-*": ["offline"], "*": ["openai", "anthropic"]}, "openai", [("t1", "globex")], True),
        ({"resource:acme-*": ["offline"], "*": ["openai", "anthropic"]}, "offline", [("t1", "acme-eu")], True),
        ({"resource:acme-*": ["offline"], "*": ["openai"]}, "openai", [("t1", "globex"), ("t2", "acme-1")], False),
        ({"thread:secret-*": ["ollama"], "*": ["*"]}, "openai", [("secret-1", "u")], False),
        ({"thread:secret-*": ["ollama"], "*": ["*"]}, "ollama", [("secret-1", "u")], True),
        ({"resource:acme-*": ["openai"]}, "openai", [("t1", "globex")], False),  # no rule: no provider
        ({"*": ["openai"]}, "openai", None, True),
        ({"*": ["openai"], "resource:acme": ["offline"]}, "openai", None, False),  # unknown: every rule
        ({"resource:acme": ["openai"]}, "openai", None, False),  # unknown and no '*'
    ],
)
def test_the_provider_allow_list(
    rules: dict[str, list[str]], provider: str, scopes: list[tuple[str, str]] | None, allowed: bool
) -> None:
    assert ProviderRules.parse(rules).allows(provider, scopes) is allowed


def test_provider_of_a_model_name() -> None:
    assert [provider_of(n) for n in ("openai:gpt-4o", "Anthropic:claude", "scripted")] == [
        "openai", "anthropic", "scripted",
    ]


# -- properties ----------------------------------------------------------------------------------

_SECRET_VALUES = st.sampled_from([value for _, value, _ in SECRETS + PII])
_TEXT = st.lists(
    st.one_of(st.text(max_size=40), _SECRET_VALUES, st.sampled_from(["password=", "Bearer ", "@", "://", ":", " "])),
    max_size=12,
).map("".join)


@settings(max_examples=300, deadline=None, database=None)
@given(_TEXT)
def test_redaction_never_raises_and_is_idempotent(text: str) -> None:
    once = REDACTOR.redact(text)
    assert REDACTOR.redact(once.text).text == once.text
    assert sum(once.counts.values()) == len(PLACEHOLDER.findall(once.text)) - len(PLACEHOLDER.findall(text))


# -- linear work: growth of the work counted for 4x the input (no time asserted; see tests/integrity) --
# Counted work sees the Python side of redaction (per match, per placeholder, per candidate);
# a pattern backtracking inside the regex engine is measured by CPU time in
# ``benchmarks/pathological.py --check`` (these shapes are its ``redact:`` shapes).


def _repeat(unit: str) -> Callable[[int], str]:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


SHAPES: dict[str, Callable[[int], str]] = {
    "letters": _repeat("a"),
    "eyJ runs": _repeat("eyJ"),
    "eyJ dots": _repeat("eyJa."),
    "sk- runs": _repeat("sk-"),
    "at signs": _repeat("a@"),
    "dotted labels": lambda n: "a@" + _repeat("b.")(n),
    "digits": _repeat("1"),
    "digits and spaces": _repeat("1 "),
    "plus digits": _repeat("+1 "),
    "colons and hex": _repeat("a:"),
    "dots and digits": _repeat("1."),
    "BEGIN without END": _repeat("-----BEGIN PRIVATE KEY-----\nAAAA"),
    "password assignments": _repeat("password="),
    "schemes": _repeat("a://b:"),
    "bearer": _repeat("Bearer "),
    "key names": _repeat("token"),
    "placeholders": _repeat("[REDACTED:email:0123abcd]"),
    "whitespace": lambda n: "password" + " " * n + "=x",
}


@pytest.mark.parametrize("shape", SHAPES)
def test_redaction_is_linear(shape: str) -> None:
    growth = work_growth(REDACTOR.redact, SHAPES[shape], 10_000)
    assert growth < GROWTH_BOUND, f"{shape}: {growth:.1f}x the work for 4x the input"


def test_secrets_glued_to_each_other_are_all_redacted_in_one_call() -> None:
    """Each glued value is found only once its neighbour became a placeholder (one per pass): with
    4 passes the tail of a chain of 5 stayed in clear (found by Hypothesis in CI; fails on main)."""
    chain = ("npm_" + "0" * 36) * 20 + "sk-00000000011223345678"
    once = REDACTOR.redact(chain)
    assert "npm_0" not in once.text and "sk-0000" not in once.text
    assert REDACTOR.redact(once.text).text == once.text


# -- glued chains: one sweep, whatever their length ------------------------------------------------
#: Values that end where their pattern ends (a fixed length, no look-ahead): glued one after
#: another, each starts right where the one before it ends, inside one run of token characters.
#: In turn, each kind's detector runs before the one of the kind before it, so a pass over the
#: text (every detector once) could take one value of the chain, no more.
_GLUABLE: list[Callable[[int], str]] = [
    lambda i: f"shpat_{i:032x}",
    lambda i: f"dop_v1_{i:064x}",
    lambda i: f"npm_{i:036d}",
    lambda i: f"AIza{i:035d}",
]


def _glued_chain(length: int) -> tuple[str, list[str]]:
    """``length`` distinct values glued together, the kinds in turn, and an OpenAI key at the end."""
    values = [_GLUABLE[i % len(_GLUABLE)](i) for i in range(length)] + ["sk-00000000011223345678"]
    return "".join(values), values


def test_a_chain_of_a_hundred_glued_secrets_is_all_redacted() -> None:
    """Each value of a glued chain starts a token only once its neighbour is a placeholder; the
    sweep restarts there. Repeated passes (64 at most) left the tail of a chain of 100 in clear."""
    chain, values = _glued_chain(100)
    once = REDACTOR.redact(f"token list: {chain} (rotated)")
    assert [value for value in values if value in once.text] == []
    assert once.counts == {"npm_token": 25, "shopify_token": 25, "digitalocean_token": 25, "google_key": 25,
                           "openai_key": 1}  # fmt: skip
    assert once.text.startswith("token list: [REDACTED:") and once.text.endswith("] (rotated)")
    assert REDACTOR.redact(once.text).text == once.text


@settings(max_examples=100, deadline=None, database=None)
@given(
    st.lists(st.tuples(st.integers(0, len(_GLUABLE) - 1), st.integers(0, 10**30)), min_size=1, max_size=100),
    st.sampled_from(["", " ", "id=", "x "]),
)
def test_any_glued_chain_is_all_redacted(kinds: list[tuple[int, int]], before: str) -> None:
    values = [_GLUABLE[kind](number) for kind, number in kinds]
    once = REDACTOR.redact(before + "".join(values))
    assert [value for value in values if value in once.text] == []
    assert sum(once.counts.values()) == len(values)
    assert REDACTOR.redact(once.text).text == once.text


def test_a_glued_chain_is_scanned_a_fixed_number_of_times_whatever_its_length(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted, not timed: each detector scans the text outside placeholders (``Detector.spans``)
    as often for a chain of 400 as for a chain of 4 (a pass per glued value scanned it 100 times
    more), and the work counted under ``sys.settrace`` grows linearly with the chain."""
    scans = 0
    spans = Detector.spans

    def counted(self: Detector, text: str) -> Iterator[tuple[int, int]]:
        nonlocal scans
        scans += 1
        return spans(self, text)

    monkeypatch.setattr(Detector, "spans", counted)
    per_length: dict[int, int] = {}
    for length in (4, 40, 400):
        scans = 0
        REDACTOR.redact("keys: " + _glued_chain(length)[0])
        per_length[length] = scans
    assert per_length[4] == per_length[40] == per_length[400] <= 3 * len(REDACTOR.detectors), per_length
    monkeypatch.undo()
    growth = work_growth(REDACTOR.redact, lambda size: _glued_chain(size // 45)[0], 45 * 16)
    assert growth < GROWTH_BOUND, f"{growth:.1f}x the work for a chain 4x as long"
