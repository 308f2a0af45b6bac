"""Converters between obsmem messages and the providers' wire formats, both ways.

Send ``turn.context.messages`` to a model, and bring its answer back for ``turn.step``::

    wire = to_openai(turn.context.messages)                       # Chat Completions
    items = to_openai_responses(turn.context.messages)            # Responses API
    system, wire = to_anthropic(turn.context.messages)            # Anthropic Messages
    new = from_openai([completion.choices[0].message])
    new = from_openai_responses(response.output)
    new = from_anthropic([response])

They are pure functions over plain dicts (SDK objects are accepted wherever a dict is, through
their ``model_dump()``); they import no provider SDK. Rules shared by all of them:

- obsmem's data parts (its durable markers) never go to a provider;
- a tool result that is not a string is sent JSON-encoded;
- a result is placed right after the call it answers, as every provider requires;
- reasoning goes back only to the provider it came from, in the form that provider accepts
  (see :mod:`obsmem.convert.openai_responses` and :mod:`obsmem.convert.anthropic`); Chat
  Completions takes none;
- provider results carry only a call id: the tool's name comes from the call earlier in the
  list, or from ``history=`` (pass ``turn.context.messages``);
- anything unknown or malformed raises :class:`~obsmem.errors.InvalidInputError` naming the
  item's index and field.
"""

from obsmem.convert.anthropic import from_anthropic, to_anthropic
from obsmem.convert.openai import from_openai, to_openai
from obsmem.convert.openai_responses import from_openai_responses, to_openai_responses

__all__ = [
    "from_anthropic",
    "from_openai",
    "from_openai_responses",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
]
