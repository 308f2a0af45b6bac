"""The offline Observer and Reflector: deterministic rules, no language model.

obsmem works without any model: this is the default when none is configured, and what tests,
demos and air-gapped deployments use. Same input, same output, byte for byte. The rules live in
:mod:`obsmem.om.offline_observer`, :mod:`obsmem.om.offline_reflector` and
:mod:`obsmem.om.offline_rules`; this module is their public face.

**What the offline observer keeps.** Facts the user states about themselves ("I live in Berlin",
"my daughter is Emma", "I'm allergic to shellfish"), rewritten in the third person and kept near
verbatim as 🔴 lines; changes of state with "(changing from …)" when the old value is known
(from the previous observations or earlier in the batch) for the attributes it recognises
(residence, employer, "my <name/email/favourite X/…> is", "use X for Y"); plans and dated
events with the date resolved against the message time ("next Friday (meaning Jun 27, 2025)");
each question or request with a condensed answer (key sentences scored for names, numbers and
overlap with the question, about 200 characters, list items reduced to their name and
distinguishing attribute); assistant recommendations and completions (✅ "Assistant booked …");
tool runs as "Assistant ran tool(args) -> outcome", identical runs merged with a count; shared
files by name. Names and quantities an answer had to cut are appended as "[also: …]" unless
they are already recorded. Small talk, greetings, reasoning and data parts are dropped.

**What it loses compared with an LLM observer.** It does not understand text, it matches
patterns, so:

* it cannot paraphrase or abstract: lines are trimmed copies, not summaries, and a long answer
  is cut to its highest-scoring sentences even when the important point is elsewhere;
* it misses facts phrased in ways its patterns do not know (third parties, implicit facts,
  sarcasm, negation in unusual places, non-English text), and it can mistake a hypothetical
  ("if I lived in Paris…") for a fact;
* it knows only a fixed list of single-valued attributes, so "(changing from …)" and
  supersession miss changes outside that list ("I switched to Fastmail" after "I use Gmail");
* dates are resolved only for the phrases in :mod:`~obsmem.om.offline_rules`, with one fixed
  reading of ambiguous ones ("next Friday" = the Friday of next week);
* it cannot connect events, infer goals, notice that the assistant went off track, judge what
  matters most, or write a good current-task (it reports the last open question or request);
* inline extractors need a model and get no value offline; hook extractors run normally;
  ``instruction`` (custom instructions) is ignored;
* the reflector merges and shortens but never rewrites: older 🟡 detail is cut and folded
  per day rather than summarised, so compression is coarser than an LLM's at the same size.

It compresses well on chatty conversations (greetings, long explanations, pleasantries) and
poorly on dense ones, where nearly every sentence carries a name or a number it must keep.
"""

from __future__ import annotations

from obsmem.om.offline_observer import OfflineObserver
from obsmem.om.offline_reflector import OfflineReflector

__all__ = ["OfflineObserver", "OfflineReflector"]
