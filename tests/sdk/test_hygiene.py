"""cairn_sdk against a live server for the hygiene endpoints: memories/settings, admission on add,
memories/consolidate, importanceWeight and includeSuperseded, and the ranking settings (temporal decay, MMR)
with the search trace's time window."""

from __future__ import annotations

import asyncio

from cairn_sdk import AsyncCairn

from tests.sdk.conftest import LIVE

pytestmark = LIVE


def test_it_manages_settings_admission_and_consolidation(cairn):
    settings = cairn.memories.settings()
    assert settings.admission_enabled is False and settings.importance_weight == 0.15

    updated = cairn.memories.update_settings(admission_enabled=True, importance_weight=0.3)
    assert updated.admission_enabled is True and updated.importance_weight == 0.3
    assert cairn.memories.update_settings(importance_weight=None).importance_weight == 0.15

    first = cairn.memories.add("Deploy day: Monday")
    again = cairn.memories.add("Deploy day: Monday")
    assert again.admitted is False and again.id == first.id
    assert again.admission is not None and again.admission.reason == "NEAR_DUPLICATE"
    newer = cairn.memories.add("Deploy day: Friday")
    assert newer.admitted is True and 0 <= newer.memory.importance <= 1

    preview = cairn.memories.consolidate(dry_run=True)
    assert preview.run_id is None and preview.superseded_memory_ids == [first.id]
    done = cairn.memories.consolidate(model="none")
    assert done.run.superseded_count == 1 and done.winner_memory_ids == [newer.id]

    assert [m.id for m in cairn.memories.search("deploy day").memories] == [newer.id]
    assert [m.id for m in cairn.memories.list(include_superseded=True).memories] == [newer.id, first.id]
    found = cairn.memories.search("deploy day", include_superseded=True, importance_weight=0)
    assert {m.id for m in found.memories} == {first.id, newer.id}
    superseded = next(m for m in found.memories if m.id == first.id)
    assert superseded.superseded_by == newer.id
    assert cairn.graph.status().admission.rejected == 1


def test_it_has_the_same_methods_async(base_url, alice):
    async def run() -> None:
        async with AsyncCairn(alice.key, base_url=base_url, timeout=30) as cairn:
            settings = await cairn.memories.update_settings(scrub_at_rest=True)
            assert settings.scrub_at_rest is True
            added = await cairn.memories.add("ci password = hunter2!x")
            assert added.memory.content == "ci password = [REDACTED:password]"
            result = await cairn.memories.consolidate(dry_run=True)
            assert result.dry_run is True
            assert (await cairn.memories.settings()).scrub_at_rest is True

    asyncio.run(run())


def test_it_sets_the_ranking_settings_and_overrides_them_per_search(cairn):
    settings = cairn.memories.settings()
    assert (settings.half_life_days, settings.mmr_lambda) == (30, 0.7)
    updated = cairn.memories.update_settings(half_life_days=7, mmr_lambda=1)
    assert (updated.half_life_days, updated.mmr_lambda) == (7, 1)
    reset = cairn.memories.update_settings(half_life_days=None)  # back to the default, MMR untouched
    assert (reset.half_life_days, reset.mmr_lambda) == (30, 1)

    cairn.memories.add("We moved the staging cluster to Frankfurt")
    found = cairn.memories.search("staging cluster", strategy="lexical", half_life_days=0, mmr_lambda=0.5)
    assert found.count == 1 and found.trace.time_window is None and found.trace.reranker is None
    dated = cairn.memories.search("what changed in staging last week", strategy="lexical")
    window = dated.trace.time_window
    assert window is not None and window.expression == "last week"
    assert window.start is not None and window.end is not None and window.start < window.end
    context = cairn.context.get("what changed in staging last week", half_life_days=0, mmr_lambda=1)
    assert context.trace.time_window is not None and context.trace.time_window.expression == "last week"
