"""Ranking that prefers the current side, as pure functions over memories of different ages: importance
re-sorts the decayed score (not the raw one), the newer of two near-duplicates goes first before MMR picks,
and a superseded memory never ranks above its successor."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import numpy as np

from memories.models import Memory
from retrieval import search

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)


def memory(
    name: str, *, days: float, importance: float = 0.5, superseded_by: uuid.UUID | None = None
) -> Memory:
    return Memory(
        id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
        content=name,
        created_at=NOW - timedelta(days=days),
        importance=importance,
        superseded_by=superseded_by,
    )


def test_it_blends_importance_with_the_decayed_score(settings):
    settings.SEARCH_DECAY_FLOOR = 0.5
    stale = memory("deploys on Friday", days=60, importance=0.6)
    fresh = memory("deploys moved to Tuesday", days=1, importance=0.5)
    scores = {stale.id: 1.0, fresh.id: 0.95}  # the stale one matches the query a little better
    decayed: dict[uuid.UUID, float] = {}
    ordered = search.decay_and_diversify(
        workspace_id=0,
        memories=[stale, fresh],
        scores=scores,
        limit=2,
        half_life_days=30,
        mmr_lambda=1.0,
        now=NOW,
        decayed=decayed,
    )
    assert [m.content for m in ordered] == ["deploys moved to Tuesday", "deploys on Friday"]
    assert decayed[stale.id] < decayed[fresh.id] < scores[fresh.id]
    # On the raw scores importance would undo the decay (stale first); on the decayed ones it does not.
    raw = search.importance_rerank(memories=ordered, scores=scores, weight=0.15)
    assert raw[0] is stale
    kept = search.importance_rerank(memories=ordered, scores=decayed, weight=0.15)
    assert kept[0] is fresh
    # Without decay (0 days) the order is the raw one, and so is what importance re-sorts.
    same: dict[uuid.UUID, float] = {}
    flat = search.decay_and_diversify(
        workspace_id=0, memories=[stale, fresh], scores=scores, limit=2, half_life_days=0, mmr_lambda=1.0,
        now=NOW, decayed=same,
    )  # fmt: skip
    assert flat[0] is stale and same == scores


def test_it_puts_the_newer_of_two_near_duplicates_first(settings):
    settings.SEARCH_DUPLICATE_SIMILARITY = 0.8
    old = memory("deploy day is Friday", days=30)
    other = memory("the rollback runbook", days=10)
    new = memory("deploy day is now Tuesday", days=2)
    ordered = [old, other, new]
    similarity = np.array([[1.0, 0.1, 0.9], [0.1, 1.0, 0.1], [0.9, 0.1, 1.0]])
    relevance = {old.id: 0.9, other.id: 0.8, new.id: 0.75}
    order = search.newer_of_duplicates_first(ordered, similarity=similarity, relevance=relevance)
    assert [ordered[i].content for i in order] == [
        "deploy day is now Tuesday",
        "the rollback runbook",
        "deploy day is Friday",
    ]
    assert relevance[new.id] == 0.9 and relevance[old.id] == 0.75  # they swap places and relevance
    # A newer one that answers much worse is not the same statement restated: nothing moves.
    weaker = {old.id: 0.9, other.id: 0.8, new.id: 0.5}
    assert search.newer_of_duplicates_first(ordered, similarity=similarity, relevance=weaker) is None
    # Nothing alike enough, or the newer already first: nothing moves.
    assert (
        search.newer_of_duplicates_first([new, other, old], similarity=similarity, relevance=relevance)
        is None
    )
    settings.SEARCH_DUPLICATE_SIMILARITY = 1.0
    assert search.newer_of_duplicates_first(ordered, similarity=similarity, relevance=relevance) is None


def test_it_never_ranks_a_superseded_memory_above_its_successor():
    newest = memory("c", days=1)
    middle = memory("b", days=5, superseded_by=newest.id)
    oldest = memory("a", days=9, superseded_by=middle.id)
    unrelated = memory("x", days=3)
    gone = memory("y", days=4, superseded_by=uuid.uuid4())  # its successor is not in the list: stays
    ranked = search.successors_first([oldest, unrelated, middle, gone, newest])
    assert [m.content for m in ranked] == ["x", "y", "c", "b", "a"]
    assert search.successors_first([newest, unrelated]) == [newest, unrelated]
