"""Relative dates as the offline observer writes them: one table, read from the observation lines.

Each row is one user message, the moment it was sent, and every ``(meaning …)`` / ``(estimated
…)`` note the observer must write for it, in order; an empty list means the observer must not
resolve anything (a recurring or yearless date, or a reading it cannot be sure of) and still
keeps the line. Calendar: Monday 2025-06-16 ("MON"), Wednesday 2025-06-18 ("WED"), and Tuesday
2025-03-11 ("MAR11", the demo's day for Graça's party plans).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest
from obsmem.types import Message

pytestmark = pytest.mark.anyio

MON = datetime(2025, 6, 16, 10, 0, tzinfo=UTC)
WED = datetime(2025, 6, 18, 10, 0, tzinfo=UTC)
MAR11 = datetime(2025, 3, 11, 13, 18, tzinfo=UTC)

_NOTE = re.compile(r"\(((?:meaning|estimated) [^()]*)\)")

CASES: list[tuple[str, datetime, list[str]]] = [
    # moved / pushed / postponed / rescheduled: the new date is ahead, however the verb is tensed
    ("The release moved to Friday.", MON, ["meaning Jun 20, 2025"]),
    ("The release was moved to Friday.", MON, ["meaning Jun 20, 2025"]),
    ("The release got pushed to Friday.", MON, ["meaning Jun 20, 2025"]),
    ("The launch has been postponed to Thursday.", MON, ["meaning Jun 19, 2025"]),
    ("The dentist rescheduled my appointment for Wednesday.", MON, ["meaning Jun 18, 2025"]),
    ("The review was pushed back to next Tuesday.", MON, ["meaning Jun 24, 2025"]),
    ("Our demo was moved from Thursday to Friday.", MON, ["meaning Jun 19, 2025", "meaning Jun 20, 2025"]),
    ("The kickoff got moved to June 30.", MON, ["meaning Jun 30, 2025"]),
    ("The offsite was postponed until March 3.", MON, ["meaning Mar 3, 2026"]),
    ("We moved the meeting, it is now on Friday.", MON, ["meaning Jun 20, 2025"]),
    ("Yesterday the release was moved to Friday.", MON, ["meaning Jun 15, 2025", "meaning Jun 20, 2025"]),
    # past tense: the most recent occurrence
    ("I went to the dentist on Friday.", MON, ["meaning Jun 13, 2025"]),
    ("We met Ana on Saturday for lunch.", MON, ["meaning Jun 14, 2025"]),
    ("The package arrived on Thursday.", MON, ["meaning Jun 12, 2025"]),
    ("I visited my parents last Friday.", MON, ["meaning Jun 13, 2025"]),
    ("I've been sick since Monday.", WED, ["meaning Jun 16, 2025"]),
    ("Yesterday I ran 10 km in the park.", MON, ["meaning Jun 15, 2025"]),
    ("I got my bike stolen two days ago.", MON, ["meaning Jun 14, 2025"]),
    ("I started a new diet 2 weeks ago.", MON, ["estimated Jun 2, 2025"]),
    ("I moved to Berlin last month.", MON, ["meaning May 2025"]),
    ("We celebrated the launch last week.", MON, ["meaning week of Jun 9, 2025"]),
    ("I was in Japan in March.", MON, ["meaning Mar 2025"]),
    ("I flew to Porto on May 4.", MON, ["meaning May 4, 2025"]),
    # future and present tense: the coming occurrence ("next" = the week after this one)
    ("I'll see the dentist on Friday.", MON, ["meaning Jun 20, 2025"]),
    ("I'm flying to Rome on Saturday.", MON, ["meaning Jun 21, 2025"]),
    ("The interview is on Thursday.", MON, ["meaning Jun 19, 2025"]),
    ("I'll call the landlord this Friday.", MON, ["meaning Jun 20, 2025"]),
    ("This Sunday I'm running a half marathon.", MON, ["meaning Jun 22, 2025"]),
    ("I'm going to visit Lisbon next Friday.", MON, ["meaning Jun 27, 2025"]),
    ("I'm meeting Priya next Monday.", WED, ["meaning Jun 23, 2025"]),
    ("We're having a barbecue this weekend.", MON, ["meaning weekend of Jun 21, 2025"]),
    ("I have a team offsite next week.", MON, ["meaning week of Jun 23, 2025"]),
    ("I want to finish the report next month.", MON, ["meaning Jul 2025"]),
    ("The conference is in two weeks.", MON, ["estimated Jun 30, 2025"]),
    ("I fly to Oslo tomorrow.", MON, ["meaning Jun 17, 2025"]),
    ("The day after tomorrow I start my new job.", MON, ["meaning Jun 18, 2025"]),
    ("My sister arrives in 3 days.", MON, ["meaning Jun 19, 2025"]),
    ("I will travel to Japan in March.", MON, ["meaning Mar 2026"]),
    ("I'm flying to Porto on July 4.", MON, ["meaning Jul 4, 2025"]),
    ("Jonas moved the review, it's now Wednesday at 11:00, so tomorrow.", WED.replace(day=17),
     ["meaning Jun 18, 2025"]),  # one note for the two phrases that name the same day
    # birthdays, anniversaries, life events and habits: a yearless date stays yearless
    ("I was born on March 14.", MON, []),
    ("My daughter was born on 3 April.", MON, []),
    ("My birthday is June 20.", MON, []),
    ("Our wedding anniversary is on May 2.", MON, []),
    ("My grandfather died on October 9.", MON, []),
    ("We got married on September 12.", MON, []),
    ("I go swimming with Marco every Friday.", MON, []),
    ("I work from home on Fridays.", MON, []),
    ("I have Portuguese lessons on Tuesday evenings.", MON, []),
    ("The Lisbon festival happens every year on June 13.", MON, []),
    # issue 15: opening hours and weekday spans are every week, never one date
    ("The pool is open from 7am to 3pm Tuesday to Sunday.", MON, []),
    ("I volunteer at the library Monday through Thursday.", MON, []),
    ("The office is staffed between Tuesday and Friday.", MON, []),
    # issue 15: "a week from <weekday>" counts from the coming one; said on that weekday, it stays
    ("I have the audit a week from Saturday.", WED, ["meaning Jun 28, 2025"]),
    ("The visit is two weeks from Friday.", MON, ["meaning Jul 4, 2025"]),
    ("I have the audit a week from Wednesday.", WED, []),
    # issue 15: "next week on <weekday>" is that day of next week, even said on that weekday
    ("I have the demo next week on Wednesday.", WED, ["meaning Jun 25, 2025"]),
    ("The call is on Friday next week.", WED, ["meaning Jun 27, 2025"]),
    # issue 15: a past event named by its weekday is the one just gone
    ("I had the call with Dr. Mirel on Monday, it went fine.", WED, ["meaning Jun 16, 2025"]),
    # …but a birthday or wedding still to come is one particular day
    ("We're celebrating Mia's birthday on June 20.", MON, ["meaning Jun 20, 2025"]),
    ("We're getting married on September 12.", MON, ["meaning Sep 12, 2025"]),
    ("We'll take the family out on Saturday, March 22, for Graça's birthday dinner.", MAR11,
     ["meaning Mar 22, 2025"]),
    # ambiguous: no resolution rather than a guess
    ("I met my wife Sofia on a Friday.", MON, []),
    ("We'll celebrate with Marco the Friday after the launch.", MON, []),
    ("I told Marco I would come on Friday.", MON, []),
    ("I saw Marco a few days ago.", MON, []),
    # a weekday next to a calendar date in another week may belong to that week
    (
        "We're taking the family out on Saturday evening, March 22, for dinner. "
        "The party itself is lunch at Graça's on Sunday.",
        MAR11,
        ["meaning Mar 22, 2025"],
    ),
    ("On March 3 we arrived in Rome, and on Saturday we went hiking.", MON, ["meaning Mar 3, 2025"]),
]


async def _notes(said: str, at: datetime) -> tuple[list[str], str]:
    request = ObservationRequest(messages=(Message.user(said, created_at=at),))
    observations = (await OfflineObserver().observe(request)).observations
    return _NOTE.findall(observations), observations


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize(("said", "at", "notes"), CASES, ids=[c[0][:48] for c in CASES])
async def test_relative_date_resolution(said: str, at: datetime, notes: list[str]) -> None:
    found, observations = await _notes(said, at)
    assert any(line.startswith("* ") for line in observations.splitlines()), observations  # kept
    assert found == notes, observations


async def test_a_weekday_after_an_explicit_date_in_an_earlier_message_is_not_guessed() -> None:
    """The demo's surprise dinner: "Saturday" two turns after "March 22" is not Mar 15."""
    messages = (
        Message.user("Book a table for 10 on Saturday, March 22 at 20:00 in Alvalade.", created_at=MAR11),
        Message.assistant("Done: I've sent the request for 10 people on Saturday 22 March at 20:00.",
                          created_at=MAR11.replace(minute=20)),
        Message.user("Important: she thinks we're just having dinner at home on Saturday.",
                     created_at=MAR11.replace(minute=22)),
    )  # fmt: skip
    observations = (await OfflineObserver().observe(ObservationRequest(messages=messages))).observations
    assert "Mar 15, 2025" not in observations, observations
    assert "dinner at home on Saturday" in observations


async def test_a_weekday_an_explicit_date_nearby_agrees_with_is_resolved() -> None:
    """Other dates in the talk do not hide a weekday that one of them names outright."""
    messages = (
        Message.assistant("So the trial day on Friday 14 March is cancelled. Two weeks from today is "
                          "Tuesday 25 March, the day you fly back from Lisbon.", created_at=MAR11),
        Message.user("Since Tomás is free on Friday now, he can come to the Anmeldung with me.",
                     created_at=MAR11.replace(minute=22)),
    )  # fmt: skip
    observations = (await OfflineObserver().observe(ObservationRequest(messages=messages))).observations
    assert "free on Friday now, he can come to the Anmeldung with them (meaning Mar 14, 2025)" in observations
