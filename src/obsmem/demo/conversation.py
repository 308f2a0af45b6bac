"""The bundled demo conversation that ``obsmem demo`` replays through the memory engine.

Eleven days (Mon 3 to Fri 14 March 2025) between an assistant and Nadia Kessler, a backend
engineer who moves with her family from Munich to Berlin, plans a trip to Lisbon for her
mother-in-law's 70th birthday and migrates her team's service from Celery to Dramatiq. The
story is written out by hand in ``conversation.json`` next to this module; this module only
turns it into :class:`~obsmem.types.Message` objects with stable ids and timestamps.

What the data holds, and why:

* facts that change over the days (city, job title, phone number, a flight date...) stated
  with explicit change words, plus stable facts, so a memory can be checked against
  :func:`demo_facts`;
* plans with relative dates ("tomorrow", "next Friday", "in two weeks") that later happen or
  get cancelled;
* tool calls with results, some of them long and some of them errors;
* plenty of small talk that a good memory should drop.

Everything is deterministic: the only randomness (minute gaps between turns, seconds between
the steps of a turn, the filler rows of a few long tool results) comes from ``random.Random``
seeded with fixed strings, so every call on every machine gives the same messages.

JSON layout (``conversation.json``)::

    {"days": [{"date": "2025-03-03", "sessions": [{"start": "08:40", "turns": [TURN, ...]}]}]}

    TURN = {"id": "optional label", "gap": minutes (optional), "u": "user text",
            "steps": [{"say": "optional text", "calls": [CALL, ...]}, ...] (optional),
            "a": "final assistant text"}
    CALL = {"name": "tool", "args": {...}, "result": {...} | {"$gen": KIND, ...}, "error": bool}
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from importlib import resources
from typing import Any

from obsmem.types import Message, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "DEMO_RESOURCE_ID",
    "DEMO_THREAD_ID",
    "DemoFact",
    "DemoTurn",
    "demo_conversation",
    "demo_facts",
]

DEMO_THREAD_ID = "demo-thread"
DEMO_RESOURCE_ID = "demo-user"

_DATA_FILE = "conversation.json"


@dataclass(frozen=True)
class DemoTurn:
    """One user message and the assistant's step messages that answer it.

    ``responses`` is either a single assistant text message, or one or more rounds of an
    assistant message with tool calls followed by a ``tool`` message with their results,
    ending with an assistant text message.
    """

    user: Message
    responses: tuple[Message, ...]

    @property
    def messages(self) -> tuple[Message, ...]:
        """The user message followed by the responses, in order."""
        return (self.user, *self.responses)


@dataclass(frozen=True)
class DemoFact:
    """Ground truth about the user: what a good memory should know after the whole demo.

    ``final_value`` appears verbatim in the user message of turn ``turn_index``; each of
    ``superseded_values`` was stated by the user in an earlier turn and is no longer true.
    """

    key: str
    final_value: str
    superseded_values: tuple[str, ...]
    turn_index: int


# --- facts -----------------------------------------------------------------------------------
# (key, final value, superseded values, label of the turn that states the final value)

_CHANGING_FACTS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("home_city", "Berlin", ("Munich",), "moved-to-berlin"),
    ("job_title", "Staff Engineer", ("Senior Backend Engineer",), "promotion"),
    ("daily_drink", "green tea", ("coffee",), "switched-to-tea"),
    ("phone_number", "+49 176 5550 3381", ("+49 151 5550 7720",), "new-phone"),
    ("personal_email", "nadia@kessler-ferreira.example", ("nadia.kessler@mailbox.example",), "new-email"),
    ("lisbon_outbound_flight_date", "March 21", ("March 20",), "flight-moved"),
    ("dog_name", "Kiki", ("Kiwi",), "dog-name"),
    ("lisbon_trip_budget", "€3,000", ("€2,400",), "budget-changed"),
    ("architecture_review", "Wednesday at 11:00", ("Thursday at 14:00",), "review-moved"),
    ("waypoint_task_queue", "Dramatiq", ("Celery",), "switched-to-dramatiq"),
    ("kita_trial_day", "March 27", ("next Friday",), "trial-rescheduled"),  # cancelled, then moved
)

_STABLE_FACTS: tuple[tuple[str, str, str], ...] = (
    ("user_name", "Nadia Kessler", "intro"),
    ("employer", "Tessera Logistics", "intro"),
    ("partner_name", "Tomás", "fixed-dates"),
    ("partner_job", "architect", "partner-job"),
    ("mother_in_law", "Graça", "fixed-dates"),
    ("mother_in_law_birthday_party", "March 23", "fixed-dates"),
    ("moving_company", "Brandt Umzüge", "partner-job"),
    ("daughter_name", "Ida", "family"),
    ("daughter_age", "six years old", "family"),
    ("dog_breed", "beagle", "family"),
    ("allergy", "peanut allergy", "food"),
    ("diet", "vegetarian", "food"),
    ("manager", "Jonas", "review-thursday"),
    ("project_name", "Waypoint", "review-thursday"),
    ("web_framework", "FastAPI", "waypoint-stack"),
    ("database", "PostgreSQL", "waypoint-stack"),
    ("new_neighbourhood", "Friedrichshain", "new-flat"),
    ("anmeldung_appointment", "March 14th", "anmeldung"),
    ("kita", "Kita Sonnenhof", "kita"),
    ("seat_preference", "aisle seat", "aisle"),
    ("portuguese_lessons", "Tuesday evenings", "portuguese"),
    ("favourite_cuisine", "Sichuan", "sichuan"),
    ("favourite_restaurant", "Osteria Gallo Nero", "gallo-nero"),
    ("hometown", "Regensburg", "hometown"),
    ("laptop", "ThinkPad X1 Carbon", "laptop"),
    ("colleague_berlin", "Priya", "priya"),
)


# --- public API ------------------------------------------------------------------------------


def demo_conversation() -> list[DemoTurn]:
    """The whole demo, turn by turn. Identical on every call and every machine."""
    return list(_build()[0])


def demo_facts() -> list[DemoFact]:
    """What the user said about themselves: facts that changed, then stable facts."""
    labels = _build()[1]
    facts = [
        DemoFact(key, final, superseded, labels[label]) for key, final, superseded, label in _CHANGING_FACTS
    ]
    facts += [DemoFact(key, value, (), labels[label]) for key, value, label in _STABLE_FACTS]
    return facts


# --- building --------------------------------------------------------------------------------


def _load() -> dict[str, Any]:
    text = resources.files("obsmem.demo").joinpath(_DATA_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@lru_cache(maxsize=1)
def _build() -> tuple[tuple[DemoTurn, ...], dict[str, int]]:
    data = _load()
    turns: list[DemoTurn] = []
    labels: dict[str, int] = {}
    last: datetime | None = None
    for day in data["days"]:
        day_date = date.fromisoformat(day["date"])
        for session in day["sessions"]:
            hour, minute = (int(x) for x in session["start"].split(":"))
            clock = datetime(day_date.year, day_date.month, day_date.day, hour, minute, tzinfo=UTC)
            if last is not None and clock <= last:
                where = f"{day['date']} {session['start']}"
                raise ValueError(f"session {where} starts before the previous session ends")
            for position, raw in enumerate(session["turns"]):
                index = len(turns)
                rng = random.Random(f"demo-turn-{index}")
                if position > 0:
                    gap = raw.get("gap")
                    minutes = gap if gap is not None else rng.randint(1, 6)
                    clock = max(clock, last or clock) + timedelta(minutes=minutes, seconds=rng.randint(0, 50))
                turn = _build_turn(index, raw, clock, rng)
                last = turn.responses[-1].created_at
                if "id" in raw:
                    if raw["id"] in labels:
                        raise ValueError(f"duplicate turn label {raw['id']!r}")
                    labels[raw["id"]] = index
                turns.append(turn)
    return tuple(turns), labels


def _build_turn(index: int, raw: dict[str, Any], at: datetime, rng: random.Random) -> DemoTurn:
    number = f"{index + 1:04d}"
    common: dict[str, Any] = {"thread_id": DEMO_THREAD_ID, "resource_id": DEMO_RESOURCE_ID}
    user = Message(
        id=f"demo-u-{number}", role="user", parts=(TextPart(text=raw["u"]),), created_at=at, **common
    )
    responses: list[Message] = []
    clock = at
    step = 0
    call_no = 0

    def next_id(kind: str) -> str:
        nonlocal step
        step += 1
        return f"demo-{kind}-{number}-{step}"

    for round_ in raw.get("steps", ()):
        call_parts: list[TextPart | ToolCallPart] = []
        result_parts: list[ToolResultPart] = []
        if round_.get("say"):
            call_parts.append(TextPart(text=round_["say"]))
        for call in round_["calls"]:
            call_no += 1
            call_id = f"call-{number}-{call_no}"
            args = call.get("args", {})
            result = _expand(call.get("result"), call_id)
            call_parts.append(ToolCallPart(tool_call_id=call_id, tool_name=call["name"], args=args))
            result_parts.append(
                ToolResultPart(
                    tool_call_id=call_id,
                    tool_name=call["name"],
                    result=result,
                    is_error=bool(call.get("error", False)),
                )
            )
        clock += timedelta(seconds=rng.randint(2, 6))
        responses.append(
            Message(id=next_id("a"), role="assistant", parts=tuple(call_parts), created_at=clock, **common)
        )
        clock += timedelta(seconds=rng.randint(1, 9))
        responses.append(
            Message(id=next_id("t"), role="tool", parts=tuple(result_parts), created_at=clock, **common)
        )
    clock += timedelta(seconds=rng.randint(4, 25))
    final = TextPart(text=raw["a"])
    responses.append(Message(id=next_id("a"), role="assistant", parts=(final,), created_at=clock, **common))
    return DemoTurn(user=user, responses=tuple(responses))


# --- generated filler for long tool results ----------------------------------------------------
# A result written as {"$gen": KIND, ...params} is produced by the generator for KIND, seeded
# with the tool call id. The rows that the story refers to are written out in the JSON
# ("pinned"); the generators only add plausible filler rows around them.


def _expand(result: Any, call_id: str) -> Any:
    if isinstance(result, dict) and "$gen" in result:
        params = dict(result)
        kind = params.pop("$gen")
        return _GENERATORS[kind](params, random.Random(f"demo-result-{call_id}"))
    return result


_CARRIERS_BER_LIS: tuple[tuple[str, str, str | None], ...] = (
    ("Lufthansa", "LH", "FRA"),
    ("Lufthansa", "LH", "MUC"),
    ("KLM", "KL", "AMS"),
    ("Air France", "AF", "CDG"),
    ("Iberia", "IB", "MAD"),
    ("Swiss", "LX", "ZRH"),
    ("Brussels Airlines", "SN", "BRU"),
    ("Eurowings", "EW", "DUS"),
    ("Ryanair", "FR", None),
    ("easyJet", "U2", None),
)


def _gen_flights(params: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Flight search results: the pinned flights plus filler connections, sorted by departure."""
    pinned: list[dict[str, Any]] = list(params.get("pinned", []))
    count = int(params.get("count", 10))
    min_price = int(params.get("min_price", 300))
    shift = int(params.get("tz_shift_min", -60))  # arrival local time minus departure local time
    taken = {p["flight"] for p in pinned}
    rows = list(pinned)
    carriers = list(_CARRIERS_BER_LIS)
    rng.shuffle(carriers)
    for name, code, via in carriers:
        if len(rows) >= count:
            break
        flight = f"{code} {rng.randint(1000, 8999)}" if via else f"{code} {rng.randint(200, 899)}"
        if flight in taken:
            continue
        depart = rng.randint(6 * 12, 20 * 12) * 5  # minutes after midnight, on a 5-minute grid
        duration = rng.randint(230, 250) if via is None else rng.randint(66, 110) * 5
        arrive = depart + duration + shift
        rows.append(
            {
                "flight": flight,
                "airline": name,
                "depart": f"{depart // 60:02d}:{depart % 60:02d}",
                "arrive": f"{(arrive // 60) % 24:02d}:{arrive % 60:02d}" + (" +1" if arrive >= 1440 else ""),
                "stops": 0 if via is None else 1,
                "via": via,
                "duration": f"{duration // 60}h {duration % 60:02d}m",
                "price_total_eur": min_price + rng.randint(1, 60) * 10,
                "fare": rng.choice(["Basic", "Light", "Economy Classic", "Standard", "Economy Flex"]),
                "cabin_bag": True,
                "checked_bags": rng.choice([0, 0, 1]),
                "seats_left": rng.randint(2, 9),
            }
        )
    rows.sort(key=lambda r: str(r["depart"]))
    return {
        "origin": params["origin"],
        "destination": params["destination"],
        "date": params["date"],
        "passengers": params.get("passengers", {"adults": 2, "children": 1}),
        "currency": "EUR",
        "results": rows,
        "result_count": len(rows),
        "note": params.get("note", "Prices are totals for all passengers, taxes included."),
    }


_TEST_NAMES: tuple[str, ...] = (
    "tests/test_eta.py::test_eta_crosses_midnight",
    "tests/test_eta.py::test_eta_service_window_respected",
    "tests/test_eta.py::test_eta_dst_spring_forward",
    "tests/test_optimize.py::test_optimize_forty_stops",
    "tests/test_optimize.py::test_optimize_respects_capacity",
    "tests/test_optimize.py::test_optimize_empty_route",
    "tests/test_api_routes.py::test_post_optimize_returns_202",
    "tests/test_api_routes.py::test_get_route_eta_iso_format",
    "tests/test_repository.py::test_stop_windows_by_depot",
    "tests/test_repository.py::test_bulk_upsert_stops",
    "tests/test_tasks.py::test_recompute_route_batch_chunks",
    "tests/test_tasks.py::test_geocode_stop_retries",
    "tests/test_tasks.py::test_nightly_cleanup_deletes_old_plans",
    "tests/test_webhooks.py::test_webhook_payload_contains_task_id",
    "tests/test_webhooks.py::test_webhook_signature",
    "tests/test_geo.py::test_haversine_known_distances",
    "tests/test_geo.py::test_matrix_cache_hit",
    "tests/test_cache.py::test_redis_key_includes_timezone",
    "tests/test_auth.py::test_depot_token_scopes",
    "tests/test_settings.py::test_settings_from_env",
)


def _gen_pytest(params: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A pytest run summary with the slowest tests, as a test-runner tool would report it."""
    names = [n for n in _TEST_NAMES if n.startswith(tuple(params.get("only", ["tests/"])))]
    slowest = rng.sample(names, min(int(params.get("slowest", 10)), len(names)))
    timings = sorted((round(rng.uniform(0.2, 4.5), 2) for _ in slowest), reverse=True)
    result: dict[str, Any] = {
        "command": params["command"],
        "passed": params["passed"],
        "failed": len(params.get("failures", [])),
        "skipped": params.get("skipped", 0),
        "duration_s": params["duration_s"],
        "failures": params.get("failures", []),
        "slowest_durations": [{"test": n, "seconds": t} for n, t in zip(slowest, timings, strict=True)],
    }
    if "warnings" in params:
        result["warnings"] = params["warnings"]
    return result


_GENERATORS: dict[str, Callable[[dict[str, Any], random.Random], Any]] = {
    "flights": _gen_flights,
    "pytest": _gen_pytest,
}
