"""Time expressions only when they are time: a list of phrases a coding agent asks, both kinds. A date, a
relative time or one past event becomes a window; a habit, a rule or a procedure ("before a release",
"before I push", "what should I run after the migration") does not, and the trace says why."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from retrieval import temporal
from tests.memories.helpers import backdate

NOW = datetime(2026, 11, 27, 9, 30, tzinfo=UTC)

# (query, what it becomes: "date" a window from a date or relative time, "event" a window bounded by an
# event a memory must tell of, or the reason it is no window at all).
PHRASES = [
    # Not time: habits, rules and procedures.
    ("what do we run before a release", "indefinite_event"),
    ("checks before a release", "indefinite_event"),
    ("what to do after a deploy fails", "indefinite_event"),
    ("rotate the keys after an incident", "indefinite_event"),
    ("what should I run before I push a change", "habitual_clause"),
    ("tests to run before I push", "habitual_clause"),
    ("lint before we merge", "habitual_clause"),
    ("what happens after we deploy the api", "habitual_clause"),
    ("notify the channel before you deploy", "habitual_clause"),
    ("clean up after they finish the migration", "habitual_clause"),
    ("wait until we get approval", "habitual_clause"),
    ("what should I check after the migration", "procedural_question"),
    ("what must run before the deploy", "procedural_question"),
    ("do I need a review before the merge", "procedural_question"),
    ("how to roll back after the release", "procedural_question"),
    ("steps before the cutover", "procedural_question"),
    ("do we always tag before the release", "procedural_question"),
    ("can I deploy after the freeze", "procedural_question"),
    ("what is required before the launch", "procedural_question"),
    ("never merge before the CI run", "procedural_question"),
    # Not time: no boundary word or no point in time at all.
    ("the step before deploying", None),
    ("two weeks of vacation", None),
    ("may I deploy on friday", None),
    ("billing cron", None),
    ("how do deploys work", None),
    # Time: dates and relative times.
    ("what did we decide yesterday", "date"),
    ("what did we ship last week", "date"),
    ("incidents since March 2024", "date"),
    ("what broke before May 2023", "date"),
    ("errors from 2023-05-03", "date"),
    ("2 weeks ago we moved the db", "date"),
    ("deploys in May", "date"),
    ("what changed this month", "date"),
    ("what did Lena say on 16 November, 2023", "date"),
    ("outages in 2025", "date"),
    # Time: one past event, resolved by the memory that tells of it.
    ("how long did deploys take before the migration", "event"),
    ("what broke after the outage", "event"),
    ("who owned billing before the reorg", "event"),
    ("what did we change since we moved to Postgres", "event"),
    ("how did CI feel after the sharding", "event"),
    ("what did Marcus decide after our offsite", "event"),
    ("which tools did we drop after the audit", "event"),
]


def test_it_has_a_long_list_of_both_kinds():
    assert len(PHRASES) >= 40
    kinds = {expected in ("date", "event") for _, expected in PHRASES}
    assert kinds == {True, False}


@pytest.mark.parametrize(("query", "expected"), PHRASES)
def test_it_makes_a_window_only_of_time(query, expected):
    found = temporal.time_query(query, now=NOW)
    if expected == "date":
        assert found.window is not None and found.window.anchor_query is None, found
        assert found.window.start is not None or found.window.end is not None
    elif expected == "event":
        assert found.window is not None and found.window.anchor_query, found
        assert found.rejected is None
    else:
        assert found.window is None, found
        assert found.text == query
        assert (found.rejected[1] if found.rejected else None) == expected


@pytest.mark.parametrize(
    ("event", "content", "matches"),
    [
        ("the migration", "We migrated the database to Postgres 16 over the weekend", True),
        ("the outage", "Outage: the payment webhook was down for an hour", True),
        ("the reorg", "Deploys take 40 minutes end to end", False),
        ("the migration", "Run the migration checks before the release", True),
        ("the zeppelin launch", "We launched the new pricing page", False),
        ("the", "anything", False),
    ],
)
def test_it_anchors_an_event_only_on_a_memory_that_tells_of_it(event, content, matches):
    assert temporal.event_matches(event, content) is matches


def test_it_says_in_the_trace_when_a_window_applied_and_why(alice_api, ws):
    rule = alice_api.add("Run the smoke tests and tag the commit before a release.", type="rule")
    release = alice_api.add("The 2.0 release went out with the new billing page.")
    backdate(ws, release["id"], days=5)
    habit = alice_api.ok("memories/search", {"query": "what do we run before a release"})
    assert habit["trace"]["timeWindow"] == {
        "expression": "before a release",
        "start": None,
        "end": None,
        "anchorMemoryId": None,
        "applied": False,
        "reason": "indefinite_event",
        "inWindow": 0,
    }
    assert rule["id"] in [
        m["id"] for m in alice_api.ok("context/get", {"query": "what do we run before a release"})["rules"]
    ]
    dated = alice_api.ok("memories/search", {"query": "what shipped last week"})["trace"]["timeWindow"]
    assert dated["applied"] is True and dated["reason"] == "date"
    event = alice_api.ok("memories/search", {"query": "what broke after the 2.0 release"})["trace"][
        "timeWindow"
    ]
    assert (
        event["applied"] is True and event["reason"] == "event" and event["anchorMemoryId"] == release["id"]
    )
    context = alice_api.ok("context/get", {"query": "what should I check before the release"})
    assert context["trace"]["timeWindow"]["reason"] == "procedural_question"
    assert context["trace"]["timeWindow"]["applied"] is False
