"""Continuation hints of the offline observer: ``<current-task>`` and ``<suggested-response>``.

They say what is open at the moment of the last observed message: the user's request or
question waiting for the assistant, or the assistant's question waiting for the user. The next
cycle is told them back (``ObservationRequest.current_task``) and reads its own words again
(:class:`CarriedHint`), so a state one batch left open is closed by the next batch that shows
the answer, instead of being carried forward as a task already done. The phrases say what the
hint waits for ("waiting for the assistant …", "Waiting for the user's reply"), which is also
what tells a reader of the hint when it has been overtaken by newer messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from obsmem.om.offline.rules import shorten
from obsmem.om.protocols import ObservationRequest

__all__ = ["CarriedHint", "OpenAsk", "continuation_hints"]

# The hints' words, which the next cycle reads back (see CarriedHint).
WAITING_TO_DO = "; waiting for the assistant to do it"
WAITING_TO_ANSWER = "; waiting for the assistant's answer"
WAITING_TO_CONTINUE = "; waiting for the assistant to continue"
USER_ANSWERED = "the user answered the assistant's question: "
ASKED_THE_USER = "Assistant asked the user: "
WAITING_FOR_USER = " Waiting for the user's reply"


@dataclass(slots=True)
class CarriedHint:
    """What the previous cycle's current-task left open, read back from its words.

    Hints are written for the moment of the last observed message; this cycle's messages come
    after it. A request or question still waiting for the assistant is closed by a reply with
    content; a question of the assistant still waiting for the user, by the user's next message.
    """

    ask: str | None  # "User asked …" (None: the hint named no request)
    question: str | None  # the assistant's question to the user, when the hint waited for the user
    answered: bool = False  # an assistant reply in this batch answered or did the request
    user_replied: bool = False  # the user spoke in this batch

    @classmethod
    def read(cls, current_task: str | None) -> CarriedHint | None:
        """The open state a current-task of this observer describes; None for any other text."""
        if not current_task:
            return None
        if current_task.endswith(WAITING_FOR_USER) and ASKED_THE_USER in current_task:
            head, _, question = current_task.removesuffix(WAITING_FOR_USER).partition(ASKED_THE_USER)
            return cls(head.removesuffix("; ") or None, question)
        if current_task.endswith(WAITING_TO_CONTINUE):
            head = current_task.removesuffix(WAITING_TO_CONTINUE).partition(USER_ANSWERED)[0]
            return cls(head.removesuffix("; ") or None, None)
        for waiting in (WAITING_TO_DO, WAITING_TO_ANSWER):
            if current_task.endswith(waiting):
                return cls(current_task.removesuffix(waiting), None)
        return None


class OpenAsk(NamedTuple):
    """The user's question or request a batch left unanswered."""

    text: str  # "User asked the assistant to …"
    topic: str
    is_request: bool


def continuation_hints(
    request: ObservationRequest,
    *,
    open_ask: OpenAsk | None,
    last_ask: str | None,
    awaiting_user: str | None,
    carried: CarriedHint | None,
) -> tuple[str | None, str | None]:
    """current-task and suggested-response, from the last open question or request.

    ``open_ask`` is the user's question or request this batch left unanswered, ``last_ask`` the
    last one it answered ("User asked …"), ``awaiting_user`` the assistant's question still
    waiting for the user, ``carried`` what the previous cycle's current-task left open.

    What the previous cycle left open (``request.current_task`` in this observer's words) stays
    open only until this batch shows the answer: a reply with content closes a request or
    question, a user message closes a wait for the user.
    """
    if not request.continuation_hints:
        return None, None
    still_open = carried.ask if carried is not None and not carried.answered else None
    if awaiting_user:
        asked = open_ask.text if open_ask is not None else still_open
        prefix = f"{asked}; " if asked else ""
        return (f"{prefix}{ASKED_THE_USER}{awaiting_user}{WAITING_FOR_USER}",
                "Wait for the user's reply to the assistant's question before continuing")  # fmt: skip
    if open_ask is not None:
        if open_ask.is_request:
            return (f"{open_ask.text}{WAITING_TO_DO}",
                    f"Continue with the user's request: {shorten(open_ask.topic, 100)}")  # fmt: skip
        return (f"{open_ask.text}{WAITING_TO_ANSWER}",
                f"Answer the user's question about {shorten(open_ask.topic, 100)}")  # fmt: skip
    if last_ask is not None:
        return f"No open request; last topic: {last_ask} (answered)", None
    if carried is None:
        return request.current_task, None
    if carried.answered:
        topic = f"; last topic: {carried.ask} (answered)" if carried.ask else ""
        return f"No open request{topic}", None  # never None: the engine would keep the stale hint
    if carried.question is not None and carried.user_replied:
        asked = f"{carried.ask}; " if carried.ask else ""
        return (f"{asked}{USER_ANSWERED}{carried.question}{WAITING_TO_CONTINUE}",
                f"Continue from the user's answer to: {shorten(carried.question, 100)}")  # fmt: skip
    return request.current_task, request.suggested_response
