"""Time-aware recall: a query's time expression leaves its text and becomes a window on the memory's time
(metadata.sessionTime, else createdAt); memories in the window get a boost, memories written in it join the
candidates, and the trace says which window was applied."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from memories.models import Memory
from retrieval import temporal
from tenancy.rls import workspace_context
from tests.memories.helpers import backdate, ids

NOW = datetime(2026, 11, 27, 9, 30, tzinfo=UTC)  # a Friday


def day(year: int, month: int, dd: int) -> datetime:
    return datetime(year, month, dd, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "text", "start", "end"),
    [
        ("what did we decide yesterday", "what did we decide", day(2026, 11, 26), day(2026, 11, 27)),
        ("What did we ship last week?", "What did we ship", day(2026, 11, 16), day(2026, 11, 23)),
        ("deploys in May", "deploys", day(2026, 5, 1), day(2026, 6, 1)),
        ("What did Maria do on May 3, 2023?", "What did Maria do", day(2023, 5, 3), day(2023, 5, 4)),
        ("What did Tim say on 16 November, 2023?", "What did Tim say", day(2023, 11, 16), day(2023, 11, 17)),
        ("Which book did Tim read on 8th December, 2023?", "Which book did Tim read", day(2023, 12, 8), None),
        ("Which country did James visit in 2021?", "Which country did James visit", day(2021, 1, 1), None),
        ("errors from 2023-05-03", "errors", day(2023, 5, 3), day(2023, 5, 4)),
        ("2 weeks ago we moved the db", "we moved the db", day(2026, 11, 9), day(2026, 11, 16)),
        ("what broke before May 2023", "what broke", None, day(2023, 5, 1)),
        ("incidents since March 2024", "incidents", day(2024, 3, 1), None),
        ("what did John do the week before August 3, 2023?", "what did John do the", day(2023, 7, 27), None),
        ("her puppy, two weeks before August 11, 2023", "her puppy,", day(2023, 7, 28), day(2023, 8, 11)),
    ],
)
def test_it_turns_time_expressions_into_windows(query, text, start, end):
    found = temporal.time_query(query, now=NOW)
    assert found.text == text
    assert found.window is not None
    assert found.window.start == start
    if end is not None or start is None:
        assert found.window.end == end


@pytest.mark.parametrize(
    "query",
    [
        "billing cron",
        "may I deploy on friday",  # "may" is a verb here
        "the step before deploying",  # a step, not a point in time
        "two weeks of vacation",  # a length of time, not a point in it
        "How long ago was the 18th release?",
        "year",
    ],
)
def test_it_leaves_queries_without_a_point_in_time_alone(query):
    found = temporal.time_query(query, now=NOW)
    assert found.text == query and found.window is None


def test_it_reads_an_event_as_the_bound_of_a_window():
    found = temporal.time_query("how long did deploys take before the migration?", now=NOW)
    # The event's words stay: they may be what the question is about ("how did she feel after the accident").
    assert found.text == "how long did deploys take the migration?"
    assert found.window is not None and found.window.anchor_query == "the migration"
    assert found.window.boundary == "before"
    event_time = day(2026, 11, 1)
    window = temporal.anchored(found.window, event_time)
    assert (window.start, window.end) == (None, event_time)


def test_it_parses_dates_only_for_queries_with_a_time_word():
    """The word check keeps the date parser off the path of ordinary queries."""
    temporal._parse_span.cache_clear()
    for query in ("billing cron", "what did we decide about the cache", "src/billing/api.py"):
        assert not temporal.has_time_cue(query)
        temporal.time_query(query, now=NOW)
    assert temporal._parse_span.cache_info().misses == 0
    temporal.time_query("what did we decide yesterday", now=NOW)
    assert temporal._parse_span.cache_info().misses == 1


def test_it_reads_a_memorys_time_from_its_session_time():
    at = timezone.now()
    memory = Memory(created_at=at, metadata={"sessionTime": "2023-05-08T13:56:00+00:00"})
    assert temporal.memory_time(memory) == day(2023, 5, 8).replace(hour=13, minute=56)
    naive = Memory(created_at=at, metadata={"sessionTime": "2023-05-08T13:56:00"})
    assert temporal.memory_time(naive).tzinfo is not None
    invalid = ({"sessionTime": "not a time"}, {"sessionTime": 12}, {"sessionTime": "2" * 500})
    for metadata in (None, {}, *invalid):
        assert temporal.memory_time(Memory(created_at=at, metadata=metadata)) == at


def search(api, query, **fields):
    return api.ok("memories/search", {"query": query, **fields})


def test_it_ranks_yesterdays_memory_first_and_says_which_window_it_applied(alice_api, ws):
    yesterday = alice_api.add("We decided to drop the Redis cache from the checkout path")
    backdate(ws, yesterday["id"], days=1)
    today = alice_api.add("We decided to keep the Redis cache for sessions")
    older = alice_api.add("We decided on the Redis cache eviction policy: allkeys-lru")
    backdate(ws, older["id"], days=9)
    plain = search(alice_api, "what did we decide about the redis cache")
    assert ids(plain["memories"])[0] == today["id"] and plain["trace"]["timeWindow"] is None

    data = search(alice_api, "what did we decide about the redis cache yesterday")
    assert ids(data["memories"])[0] == yesterday["id"]
    window = data["trace"]["timeWindow"]
    start = (timezone.now() - timedelta(days=1)).date()
    assert window["expression"] == "yesterday" and window["anchorMemoryId"] is None
    assert window["start"].startswith(start.isoformat()) and window["inWindow"] == 1
    # context/get applies the same window and says so.
    context = alice_api.ok("context/get", {"query": "what did we decide about the redis cache yesterday"})
    assert ids(context["memories"])[0] == yesterday["id"]
    assert context["trace"]["timeWindow"]["expression"] == "yesterday"


def test_it_finds_what_was_written_in_the_window_even_without_shared_words(alice_api, ws):
    written = alice_api.add("Postmortem: the payment webhook timed out for an hour")
    backdate(ws, written["id"], days=1)
    alice_api.add("The quarterly roadmap review is today")
    data = search(alice_api, "what happened yesterday")
    assert ids(data["memories"])[:1] == [written["id"]]


def test_it_uses_the_session_time_of_imported_conversations(alice_api):
    may = alice_api.add(
        "Maria said she had dinner with her mother", metadata={"sessionTime": "2023-05-03T19:00:00+00:00"}
    )
    june = alice_api.add(
        "Maria said she had dinner with her friends from the gym",
        metadata={"sessionTime": "2023-06-16T19:00:00+00:00"},
    )
    data = search(alice_api, "Who did Maria have dinner with on May 3, 2023?")
    assert ids(data["memories"])[:2] == [may["id"], june["id"]]
    window = data["trace"]["timeWindow"]
    assert window["start"].startswith("2023-05-03") and window["end"].startswith("2023-05-04")


def test_it_bounds_a_window_by_the_event_a_query_names(alice_api, ws):
    migration = alice_api.add("We migrated the database to Postgres 16 over the weekend")
    backdate(ws, migration["id"], days=10)
    slow = alice_api.add("Deploys take 40 minutes end to end")
    backdate(ws, slow["id"], days=20)
    fast = alice_api.add("Deploys take 5 minutes end to end now")
    backdate(ws, fast["id"], days=2)
    assert ids(search(alice_api, "how long do deploys take")["memories"])[0] == fast["id"]
    data = search(alice_api, "how long did deploys take before the migration")
    assert ids(data["memories"])[0] == slow["id"]
    assert data["trace"]["timeWindow"]["anchorMemoryId"] == migration["id"]
    assert data["trace"]["timeWindow"]["start"] is None


def test_it_keeps_the_expression_out_of_the_text_when_no_memory_names_the_event(alice_api):
    alice_api.add("Deploys take 5 minutes end to end now")
    data = search(alice_api, "how long did deploys take before the zeppelin launch")
    assert data["trace"]["timeWindow"] == {
        "expression": "before the zeppelin launch",
        "start": None,
        "end": None,
        "anchorMemoryId": None,
        "inWindow": 0,
        "applied": False,
        "reason": "anchor_not_found",
    }
    assert data["count"] == 1


def test_it_can_be_turned_off(alice_api, ws, settings):
    settings.SEARCH_TIME_WINDOW_BOOST = 0
    yesterday = alice_api.add("We decided to drop the Redis cache")
    backdate(ws, yesterday["id"], days=1)
    alice_api.add("We decided to keep the Redis cache")
    data = search(alice_api, "what did we decide about the redis cache yesterday")
    assert data["trace"]["timeWindow"] is None


def test_it_counts_window_memories_through_the_read_rule(alice_api, ws):
    """Memories written in the window join the candidates only when the caller may read them."""
    mine = alice_api.add("Nightly export finished", scope={"userId": "u1"})
    theirs = alice_api.add("Nightly export failed", scope={"userId": "u2"})
    for memory in (mine, theirs):
        backdate(ws, memory["id"], days=1)
    data = search(alice_api, "what happened yesterday", scope={"userId": "u1"})
    assert ids(data["memories"]) == [mine["id"]]
    with workspace_context(ws):
        assert Memory.objects.filter(pk=theirs["id"]).exists()


def test_it_names_the_date_parsers_cost_once_per_phrase_and_day():
    temporal._parse_span.cache_clear()
    for _ in range(3):
        temporal.time_query("what shipped in May 2023", now=NOW)
    info = temporal._parse_span.cache_info()
    assert (info.misses, info.hits) == (1, 2)
    temporal.time_query("what shipped in May 2023", now=NOW + timedelta(days=1))  # the next day: parsed again
    assert temporal._parse_span.cache_info().misses == 2


@pytest.mark.parametrize(
    "query",
    [
        "on 31 february 2023",  # no such day: no window, the words stay
        "may 32",
        "ago " * 125,
        "before the " * 50,
        "in may 2023, " * 40,
        "12 " * 166,
        "last " + "week " * 99,
    ],
)
def test_it_copes_with_hostile_time_words_quickly(query):
    """Every query up to the 500 characters a request may hold: an answer, never an error, and fast (only
    short spans reach the date parser)."""
    import time

    started = time.perf_counter()
    found = temporal.time_query(query[:500], now=NOW)
    assert time.perf_counter() - started < 0.5
    assert found.text
    if found.window is not None and found.window.anchor_query is None:
        assert found.window.start is not None or found.window.end is not None
