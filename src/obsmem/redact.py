"""One function, :func:`redact_secrets`, for every URL or DSN obsmem prints, logs or raises.

Whatever obsmem says about a store, an index, a knowledge store or a model endpoint goes
through it first, so a password never reaches a log line, a status line or an error message:

* ``scheme://user:secret@host/db`` → ``scheme://user@host/db`` (the password is dropped, the
  user kept, so an operator still sees who connects where; a password holding ``@`` or ``/``
  typed unescaped is dropped whole too);
* ``…?password=secret&sslmode=require`` → ``…?password=***&sslmode=require``;
* libpq key/value strings, ``host=db user=u password=secret`` or ``password='s e'`` →
  ``password=***`` (also ``sslpassword``, ``passwd``, ``pwd``, ``api_key``/``apikey``,
  ``token``, ``access_token``, ``secret``, ``signature``, ``credential``, and these after a
  prefix: ``client_secret``, ``refresh_token``, ``db_password``, ``X-Amz-Signature``,
  ``subscription-key``, and in camelCase: ``clientSecret``, ``refreshToken``, ``dbPassword``);
* a URL's query parameters ``key``, ``code``, ``sig``, ``auth`` and ``pass`` (a model endpoint's
  ``…/v1?key=…``) → ``key=***``.

It works on any text (a URL, a DSN, or a message that quotes one), is idempotent, and never
raises.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "redact_secrets"]

MASK = "***"

# scheme:// and the text after it up to a blank or a quote: its authority holds the userinfo.
_URL = re.compile(r"(?P<scheme>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://)(?P<rest>[^\s'\"<>]*)")
#: Names of a secret anywhere (a query, a libpq string, a message), after up to three words joined
#: by ``_`` or ``-`` (``client_secret``, ``refresh_token``, ``db_password``, ``X-Amz-Signature``,
#: ``subscription-key``) or run together in camelCase (``clientSecret``, ``refreshToken``,
#: ``dbPassword``: a word ends where a capital follows); each start tries a bounded prefix, so the
#: scan stays linear.
_KEYS = (r"(?:ssl|pg)?password|passwd|pwd|api[_-]?key|apikey|access[_-]?token|token|secret|credentials?|signature"
         r"|(?:private|access|account|subscription|shared[_-]?access|secret)[_-]?key|sas")
#: One word before the secret's name: joined by ``_`` or ``-``, or a camelCase word (case-sensitive).
_PREFIX_WORD = r"(?:[A-Za-z0-9]{1,30}[_-]|(?-i:[A-Za-z][a-z0-9]{0,29}(?=[A-Z])))"
#: Names that are a secret only as a URL's query parameter (after ``?`` or ``&``): Google's and
#: Azure's ``key=``, Azure Functions' ``code=``, a SAS ``sig=``, ``auth=``, ``pass=`` (elsewhere
#: ``exit code=1`` or ``pass=3 fail=0`` is no secret).
_QUERY_KEYS = r"key|code|sig|auth|pass"
_VALUE = r"(?P<value>'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s&;#,)'\"]+)"
_KEY_VALUE = re.compile(
    rf"(?P<key>(?<![A-Za-z0-9_]){_PREFIX_WORD}{{0,3}}(?:{_KEYS})|(?<=[?&])(?:{_QUERY_KEYS}))"
    rf"(?P<eq>\s*=\s*){_VALUE}",
    re.IGNORECASE,
)


def _drop_password(match: re.Match[str]) -> str:
    scheme, rest = match.group("scheme"), match.group("rest")
    cut = next((i for i, ch in enumerate(rest) if ch in "/?#"), len(rest))
    if "@" in rest[:cut]:
        userinfo, tail = rest[:cut].rsplit("@", 1)
        tail += rest[cut:]
    elif ":" in rest[:cut] and "@" in rest:  # an unescaped '/', '?' or '#' inside the password
        userinfo, tail = rest.rsplit("@", 1)
    else:
        return match.group(0)
    if ":" not in userinfo:  # a user name only: nothing secret to drop
        return match.group(0)
    user = userinfo.split(":", 1)[0]
    return f"{scheme}{user}@{tail}" if user else f"{scheme}{tail}"


def _mask_value(match: re.Match[str]) -> str:
    if match.group("value") == MASK:
        return match.group(0)
    return f"{match.group('key')}{match.group('eq')}{MASK}"


def redact_secrets(text: object) -> str:
    """``text`` (a URL, a DSN, or a message quoting them) with every password in it hidden."""
    value = text if isinstance(text, str) else str(text)
    try:
        value = _URL.sub(_drop_password, value)
        return _KEY_VALUE.sub(_mask_value, value)
    except Exception:  # noqa: BLE001 - redaction must never be the thing that fails
        return MASK
