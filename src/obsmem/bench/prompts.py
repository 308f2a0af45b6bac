"""The prompts of the question-answering run: an actor that answers from its context, and a
judge that grades the answer against the gold one.

They are kept short and plain on purpose: the benchmark measures what the *context* holds, so
the actor gets no tricks beyond "answer from what you were given", and every system (full,
truncate, obsmem) gets the same prompt.
"""

from __future__ import annotations

__all__ = ["ACTOR_INSTRUCTIONS", "JUDGE_INSTRUCTIONS", "actor_question", "judge_request"]

ACTOR_INSTRUCTIONS = """\
You are answering a question about a long conversation. Everything you know about it is in the
messages above: the conversation itself, or your memory of it (observations), or both. Answer
from that alone.

- Answer in a few words or one short sentence: the fact asked for, not an explanation.
- For "when" questions give a date (day, month and year when you have them). Resolve relative
  dates ("last Saturday", "yesterday") against the date they were said.
- If the context does not contain the answer, say "I don't know"; do not guess.
"""

JUDGE_INSTRUCTIONS = """\
You grade answers to questions about a conversation. You get the question, the gold answer and
a candidate answer. The candidate is CORRECT when it states the same fact as the gold answer: it
may be longer, phrased differently, or give a date in another format or relative form that means
the same day, month or year; for a list, it must contain the gold items. It is WRONG when it
contradicts the gold answer, misses its key fact, or says it does not know.

Reply with one word on the first line, CORRECT or WRONG, and one short sentence of reasoning on
the second line.
"""


def actor_question(question: str, participants: str) -> str:
    """The user message that asks the actor one question."""
    who = f"{participants}\n\n" if participants else ""
    return f"{who}Question: {question}\nAnswer:"


def judge_request(question: str, gold: str, candidate: str) -> str:
    """The user message that asks the judge to grade one answer."""
    return f"Question: {question}\nGold answer: {gold}\nCandidate answer: {candidate}\n\nGrade:"
