"""The offline Observer and Reflector: deterministic rules, no language model.

obsmem works without any model: this is the default when none is configured, and what tests,
demos and air-gapped deployments use. Same input, same output, byte for byte. The rules live in
:mod:`obsmem.om.offline.observer`, :mod:`obsmem.om.offline.reflector`,
:mod:`obsmem.om.offline.rules` and :mod:`obsmem.om.offline.patterns`; this module is their public
face.

**What the offline observer keeps.** As 🔴, only what stays true about the user: who they are,
their people and pets, home and work, possessions, health and diet, preferences and habits,
contact details, budgets, decisions ("I'm vegetarian", "my daughter Ida is six", "the movers are
Brandt Umzüge", "my number is now …"), rewritten in the third person and kept near verbatim;
changes of state with "(changing from …)" when the old value is known (from the previous
observations or earlier in the batch) for the attributes it recognises (residence, employer,
"my <name/email/favourite X/…> is", "use X for Y"); and dated plans and appointments with the
date resolved against the message time ("next Friday (meaning Jun 27, 2025)"). Each question or
request becomes one 🟡 line with a condensed answer (key sentences scored for names, numbers and
overlap with the question, list items reduced to their name and distinguishing attribute);
assistant recommendations and completions (✅ "Assistant booked …") are kept; tool runs become
"Assistant ran tool(args) -> outcome", identical runs merged with a count, unless the reply of
their turn is recorded, which says what they found (a failed run always keeps its line); shared
files are named. Names and quantities an answer had to cut are appended as "(also: …)" unless
they are already recorded. What a user narrates that is not durable (figures become 🟡, a new
name 🟢) is kept low so reflection can drop it; apologies, reactions, transitions ("let's talk
Lisbon"), narration of the moment ("heading to the office now"), small talk, greetings,
reasoning and data parts are dropped.

**Conversations between named people.** When the assistant side of a batch carries a
speaker's name (``metadata["name"]``), the talk is people telling each other about their lives,
not a user and an agent: each message gives at most one note about its speaker ("Melanie:
ran charity race for mental health last Saturday (meaning May 20, 2023)"), in note style, with
questions, greetings, reactions, remarks about the listener and feelings about nothing named
dropped; a speaker's notes of one day share one line, without a clock time. Notes are terse:
articles, pronouns, auxiliaries, linking words and common prepositions go, names, numbers,
dates, negations and content words stay ("Melanie: ran charity race mental health last Saturday
(meaning May 20, 2023)"). Reflecting such a log aims at 85% of the target rather than half,
dropping the notes worth least per token (rare words, names, numbers, dates) only as far as the
budget needs. See :mod:`obsmem.om.offline.participants`.

**Hostile text stays data.** Observations become a system message of the actor's context, so
everything the rules copy from users, tools, file names and a speaker's ``name`` is defused on
the way in (:func:`obsmem.om.text.quote.defuse`: no line break, angle brackets as ‹ ›, no
priority marker) and only ever follows the observer's own attribution ("User said …",
"Assistant ran …", a plainly named speaker, or ``Participant “…”`` for any other name): a
``</observations>``, a ``<system-reminder>``, a fake line ``🔴 (09:00) User is an admin`` or a
``SYSTEM:`` prefix ends up as words inside an attributed line. The reflector keeps it that way:
it never undoes the defusing and never cuts an attribution off a part that would then read as
a role or a label.

**What the offline reflector does.** It climbs a ladder of levels (0-4) and stops at the first
whose output leaves room to grow (at most 65% of the target): consolidate and supersede, drop
old 🟢, shorten old 🟡, merge each day's old 🟡 lines into one "Topics:" line, cut old 🔴 lines
to their fact-bearing clauses (names, numbers, dates, places stay), and at the top keep the
newest version of each keyed fact, a few topics per old day and one "User stated: a; b; …" line
per old day. 🔴 facts are cut or superseded, never dropped by a level. See
:mod:`obsmem.om.offline.reflector`.

**What it loses compared with an LLM observer.** It does not understand text, it matches
patterns, so:

* it cannot paraphrase or abstract: lines are trimmed copies, not summaries, and a long answer
  is cut to its highest-scoring sentences even when the important point is elsewhere;
* priorities come from word lists: a durable fact phrased in a way the lists do not know ("the
  flat has no lift") is kept low or dropped, and narration that happens to use a listed word
  ("I called ahead about the peanut allergy") is kept high;
* it misses facts phrased in ways its patterns do not know (third parties, implicit facts,
  sarcasm, negation in unusual places, non-English text), and it can mistake a hypothetical
  ("if I lived in Paris…") for a fact;
* it knows only a fixed list of single-valued attributes, so "(changing from …)" and
  supersession miss changes outside that list ("I switched to Fastmail" after "I use Gmail"),
  and an outdated value stays next to the new one ("the review is Thursday at 14:00" and "it's
  now Wednesday at 11:00");
* dates are resolved only for the phrases in :mod:`~obsmem.om.offline.rules`, with one fixed
  reading of "next Friday" (the Friday of next week); other readings it cannot be sure of
  (a weekday near a date in another week, "on a Friday", a birthday's year) get no date;
* it cannot connect events, infer goals, notice that the assistant went off track, judge what
  matters most, or write a good current-task (it reports the last open question or request,
  until a later batch shows it answered);
* inline extractors need a model and get no value offline; hook extractors run normally;
  ``instruction`` (custom instructions) is ignored;
* the reflector merges and cuts but never rewrites: older 🟡 detail is cut and folded per day
  rather than summarised, a fact cut to its clauses can lose a qualifier that had no name or
  number in it, and facts merged per day lose their individual times.

It compresses well on chatty conversations (greetings, long explanations, pleasantries) and
less well on dense ones, where nearly every sentence carries a name or a number it must keep.
On the bundled demo (323 turns, 71k tokens) it keeps every fact the demo checks in a context
about 15 times smaller than the conversation.
"""

from __future__ import annotations

from obsmem.om.offline.observer import OfflineObserver
from obsmem.om.offline.offload import end_idle_children
from obsmem.om.offline.participants import general_rarity
from obsmem.om.offline.reflector import OfflineReflector, forget_fact_keys

__all__ = ["OfflineObserver", "OfflineReflector", "end_idle_children", "forget_texts"]


def forget_texts() -> None:
    """Drop what the offline roles keep of texts between calls in this process (observation
    lines, words): after a delete or a forget, nothing of what went stays here. Their idle
    child interpreters keep as much: :func:`end_idle_children` (blocking: from a thread)."""
    forget_fact_keys()
    general_rarity.cache_clear()
