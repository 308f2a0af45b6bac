"""What every inspector page shares: the page wrapper (sign-in redirect, errors as HTML pages)
and small readers over the public Memory API."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec

from fastapi.responses import RedirectResponse, Response

from obsmem import Message, ObsmemError
from obsmem.server.errors import ServiceError, status_for
from obsmem.server.ui.auth import SignInNeeded
from obsmem.server.ui.html import h, page
from obsmem.types import DataPart, TextPart, ToolCallPart, ToolResultPart

__all__ = ["folded_text", "guarded", "int_param", "marker_html", "message_plain", "message_text"]

P = ParamSpec("P")
_SHOWN_CHARS = 2000
#: The most of one message's text :func:`folded_text` sends, folded part included.
_FOLDED_CHARS = 20_000


def guarded(handler: Callable[P, Awaitable[Response]]) -> Callable[P, Awaitable[Response]]:
    """Run a page: no key → the login form; an error → an HTML page with the REST API's status
    (404 for anything not found or not visible to the key, exactly like the REST API)."""

    @functools.wraps(handler)
    async def run(*args: P.args, **kwargs: P.kwargs) -> Response:
        try:
            return await handler(*args, **kwargs)
        except SignInNeeded:
            return RedirectResponse("/ui/login", status_code=303)
        except (ObsmemError, ServiceError) as error:
            status = status_for(error)
            title = "Not found" if status == 404 else "Error"
            return page(title, f'<p class="error" role="alert">{h(error)}</p>', status=status)

    return run


def int_param(value: str | None, default: int, *, low: int = 0, high: int = 2**53) -> int:
    try:
        number = int(value) if value not in (None, "") else default
    except ValueError:
        number = default
    return max(low, min(high, number))


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + f"… ({len(text) - _SHOWN_CHARS} more chars)"


def message_plain(message: Message) -> str:
    """What a message says, tool calls and results included, as plain text (markers left out)."""
    out: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            out.append(_short(part.text))
        elif isinstance(part, ToolCallPart):
            out.append(f"→ {part.tool_name}({_short(part.args)})")
        elif isinstance(part, ToolResultPart):
            flag = " [error]" if part.is_error else ""
            out.append(f"← {part.tool_name}{flag}: {_short(part.result)}")
        elif not isinstance(part, DataPart):
            out.append(f"[{part.type}]")
    return "\n".join(out)


def message_text(message: Message) -> str:
    """:func:`message_plain` as escaped HTML."""
    return h(message_plain(message))


def folded_text(message: Message, shown: int) -> str:
    """The message's text as HTML: its first ``shown`` characters, the rest folded away in a
    ``<details>`` (the browser opens it; nothing is laid out until then)."""
    text = message_plain(message)
    if not text:
        return ""
    if len(text) <= shown:
        return f"<pre>{h(text)}</pre>"
    # a message of many parts (each cut at _SHOWN_CHARS) is still sent bounded: 100 messages a page
    kept = text[shown:_FOLDED_CHARS]
    left = len(text) - shown - len(kept)
    rest = f"<p>… {left:,} more characters not shown (the API returns the whole message).</p>" if left > 0 else ""
    return (
        f"<pre>{h(text[:shown])}…</pre><details><summary>{len(text) - shown} more characters</summary>"
        f"<pre>{h(kept)}</pre>{rest}</details>"
    )


_MARKER_FIELDS = ("cycle_id", "tokens_observed", "observation_tokens", "tokens", "duration_ms", "error", "chunks")


def marker_html(message: Message) -> str:
    """The lifecycle markers (``om-…`` data parts) a message carries, one line each."""
    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, DataPart) and part.name.startswith("om-"):
            name = part.name.removeprefix("om-")
            facts = " ".join(
                f"{k}={_short(part.data[k])[:80]}" for k in part.data if k in _MARKER_FIELDS or k.endswith("tokens")
            )
            cls = "marker failed" if "failed" in name else "marker"
            lines.append(f'<span class="{cls}" data-marker="{h(name)}">◆ {h(name)} {h(facts)}</span>')
    return "".join(lines)

