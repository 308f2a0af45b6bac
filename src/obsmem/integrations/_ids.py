"""Message ids for what a framework hands over with an id of its own, and the stored copy of a
failed run's input that a retried run takes (:func:`resumed_input`).

A framework's message id (LangChain's ``AIMessage.id``, Agent Framework's ``message_id``) often
comes from the model server (``chatcmpl-…``): nothing keeps it unique, across threads or even
within one (a server may repeat it). obsmem's message ids are unique in a store, so such an id
is never used as it is: :func:`scoped_id` derives one from the thread, the framework's id and
the message's content. The same message sent again (a framework re-sending its history) gets
the same id, so it is stored once; another message with a repeated id, or the same id in
another thread, gets another.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from obsmem.errors import ThreadNotFoundError
from obsmem.storage.contract import Store
from obsmem.turn import same_shown
from obsmem.types import Message

__all__ = ["RESUME_WINDOW", "resumed_input", "scoped_id"]


def scoped_id(framework: str, thread_id: str, framework_id: str, content: Any) -> str:
    """obsmem's id for the message ``framework_id`` of ``framework`` in ``thread_id`` whose
    content (anything JSON can write, keys sorted; other values by ``str``) is ``content``.

    Text that is not Unicode (a lone surrogate: half an emoji a client split) is hashed too
    (``surrogatepass``), so the message reaches obsmem's own check, which refuses it with an
    ``InvalidInputError`` naming the part, instead of a ``UnicodeEncodeError`` from here."""
    body = json.dumps(
        [framework, thread_id, framework_id, content], sort_keys=True, default=str, ensure_ascii=False
    )
    return f"msg_{hashlib.sha256(body.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}"


#: How many of a thread's newest messages :func:`resumed_input` reads (a failed run's tool steps).
RESUME_WINDOW = 64


async def resumed_input(
    store: Store, thread_id: str, messages: Sequence[Message],
    same: Callable[[Message, Message], bool] = same_shown,
    *, final: Callable[[Message], bool] = lambda message: False,
) -> list[Message] | None:
    """The thread's stored copy of ``messages`` (a run's input) when a run with that input stored
    it, ran tools and then failed before it answered (the provider down at the model call after a
    tool), and the user runs it again: the input is followed only by complete tool steps
    (assistant messages with tool calls, tool messages answering every one of them), nothing else.

    Passed in its place (same ids), the input is not stored again, and the model gets it once,
    with the steps that ran: it answers from the results it has (obsmem's
    :func:`~obsmem.turn.retried_input` covers a run that failed at its first model call). None
    otherwise: an answer after the input (a text, or a tool message ``final`` says is one, as
    pydantic-ai's output tools are), a call still waiting (a tool awaiting approval), or more
    steps than :data:`RESUME_WINDOW` messages. One read of that many rows."""
    if not messages:
        return None
    try:
        tail = await store.list_messages(thread_id, limit=RESUME_WINDOW + len(messages), newest_first=True)
    except ThreadNotFoundError:
        return None
    calls: set[str] = set()
    results: set[str] = set()
    steps = 0
    for message in tail:
        if message.is_marker_only:
            steps += 1
        elif message.role == "assistant" and message.tool_calls:
            calls.update(c.tool_call_id for c in message.tool_calls)
            steps += 1
        elif message.role == "tool" and message.tool_results and not final(message):
            if message.metadata.get("obsmem_unanswered"):
                return None  # closed by a later turn: not a run to resume
            results.update(r.tool_call_id for r in message.tool_results)
            steps += 1
        else:
            break
    if not calls or calls != results:
        return None
    asked = tail[steps:steps + len(messages)][::-1]
    given = {m.id for m in messages}
    if len(asked) != len(messages) or any(
        old.id in given or not same(old, new) for old, new in zip(asked, messages, strict=True)
    ):
        return None
    return asked
