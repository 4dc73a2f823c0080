"""Temporal decay and MMR diversity: on by default (memories/settings halfLifeDays 30, mmrLambda 0.7),
applied to memories/search and context/get alike, turned off per workspace (0 days, λ 1) or per request."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Memory
from pipeline import services as pipeline
from tenancy.rls import workspace_context
from tests.memories.helpers import backdate, ids


def search(api, query, **fields):
    return ids(api.ok("memories/search", {"query": query, **fields})["memories"])


def context(api, query, **fields):
    body = {"query": query, "includeRules": False, "mode": "long_term", **fields}
    return ids(api.ok("context/get", body)["memories"])


def settings_patch(api, **fields):
    response = api.client.patch(
        "/api/sdk/v1/memories/settings",
        data=fields,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )
    assert response.status_code == 200, response.content


@pytest.fixture
def old_and_new(alice_api, ws):
    """Two near-equal memories: the old one says "deploy" once more, so it ranks first without decay."""
    old = alice_api.add("deploy checklist: deploy the canary, then deploy the rest")
    new = alice_api.add("deploy checklist: the canary, then the rest")
    backdate(ws, old["id"], days=120)
    return old["id"], new["id"]


def test_it_lets_a_new_memory_beat_an_old_equal_one(alice_api, old_and_new):
    old, new = old_and_new
    # Relevance alone (decay off by request) puts the old one first...
    assert search(alice_api, "deploy checklist", halfLifeDays=0, limit=2) == [old, new]
    assert context(alice_api, "deploy checklist", halfLifeDays=0, limit=2) == [old, new]
    # ...the default decay (30 days) the new one, on both routes.
    assert search(alice_api, "deploy checklist", limit=2) == [new, old]
    assert context(alice_api, "deploy checklist", limit=2) == [new, old]


def test_it_follows_the_workspace_setting_unless_the_request_overrides_it(alice_api, old_and_new):
    old, new = old_and_new
    settings_patch(alice_api, halfLifeDays=0)
    assert search(alice_api, "deploy checklist", limit=2) == [old, new]
    assert context(alice_api, "deploy checklist", limit=2) == [old, new]
    assert search(alice_api, "deploy checklist", limit=2, halfLifeDays=30) == [new, old]
    assert context(alice_api, "deploy checklist", limit=2, halfLifeDays=30) == [new, old]


def test_it_keeps_an_old_memory_that_is_clearly_more_relevant(alice_api, ws):
    """Decay has a floor (SEARCH_DECAY_FLOOR): a year-old decision that answers the query still beats a new
    memory that barely mentions it."""
    decision = alice_api.add("Decision: invoices are archived for ten years, invoices in euros")
    alice_api.add("lunch order for friday; someone mentioned invoices")
    backdate(ws, decision["id"], days=365)
    assert search(alice_api, "archived invoices euros", limit=1) == [decision["id"]]


@pytest.fixture
def near_duplicates(alice_api, ws, local_embedder):
    """Two near-duplicates about retries, a different memory on the same subject, and unrelated ones (so the
    scaled scores have a floor far below the subject's)."""
    first = alice_api.add("The billing service retries failed invoice payments every night at two")
    twin = alice_api.add("The billing service retries failed invoice payments every night at 2 am")
    other = alice_api.add("Failed invoice payments of the billing service page the on-call engineer")
    for text in ("Lunch is at noon", "The office plants need water", "Parking is behind the building"):
        alice_api.add(text)
    pipeline.jobs_run_pending(workspace_id=ws)
    return first["id"], twin["id"], other["id"]


def test_it_gives_a_near_duplicates_slot_to_a_different_memory(alice_api, near_duplicates):
    first, twin, other = near_duplicates
    query = "failed invoice payments in the billing service"
    # Relevance alone: the twins take both slots.
    assert set(search(alice_api, query, limit=2, mmrLambda=1, strategy="hybrid")) == {first, twin}
    assert set(context(alice_api, query, limit=2, mmrLambda=1, strategy="hybrid")) == {first, twin}
    # MMR (the default 0.7): the second slot goes to the memory that says something else.
    found = search(alice_api, query, limit=2)
    assert len(found) == 2 and found[0] in (first, twin) and found[1] == other
    found = context(alice_api, query, limit=2)
    assert len(found) == 2 and found[0] in (first, twin) and found[1] == other


def test_it_uses_the_session_time_in_metadata_for_decay(alice_api, ws):
    """A memory written now about a session held long ago (metadata.sessionTime) is as old as the session."""
    long_ago = (timezone.now() - timedelta(days=200)).isoformat()
    imported = alice_api.add(
        "deploy checklist: deploy the canary, then deploy the rest", metadata={"sessionTime": long_ago}
    )
    fresh = alice_api.add("deploy checklist: the canary, then the rest")
    assert search(alice_api, "deploy checklist", limit=2) == [fresh["id"], imported["id"]]
    with workspace_context(ws):
        assert Memory.objects.get(pk=imported["id"]).created_at > timezone.now() - timedelta(minutes=5)
