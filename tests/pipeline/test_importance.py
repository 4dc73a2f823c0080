"""Write-time importance (a heuristic of markers, length and role) and its blend into ranking
(importanceWeight per request or per workspace)."""

from __future__ import annotations

import json

import pytest

from memories.hygiene import importance_score
from memories.models import Memory
from retrieval.search import importance_rerank
from tenancy.rls import workspace_context
from tests.conftest import API
from tests.memories.helpers import ids, personal_workspace_id, stored


@pytest.mark.parametrize(
    ("content", "memory_type", "role", "expected"),
    [
        # 0.5·marker + 0.3·x/(1+x) (x = chars/300) + 0.2·prior
        ("x" * 300, "note", None, 0.3 * 0.5 + 0.2 * 0.5),
        (
            "important: the release train leaves at 10",
            "note",
            None,
            0.5 + 0.3 * (42 / 300) / (1 + 42 / 300) + 0.1,
        ),
        (
            "context\nnever forget: prod is eu-west-1",
            "note",
            None,
            0.5 + 0.3 * (38 / 300) / (1 + 38 / 300) + 0.1,
        ),
        ("y" * 300, "note", "user", 0.15 + 0.14),
        ("y" * 300, "note", "assistant", 0.15 + 0.08),
        ("y" * 300, "decision", None, 0.15 + 0.14),
    ],
)
def test_it_scores_importance_from_markers_length_and_role(content, memory_type, role, expected):
    assert importance_score(content=content, memory_type=memory_type, role=role) == pytest.approx(
        expected, abs=1e-3
    )


def test_it_only_counts_markers_at_the_start_of_a_line():
    plain = importance_score(content="xx important: sometimes", memory_type="note", role=None)
    marked = importance_score(content="Important: sometimes xx", memory_type="note", role=None)
    assert marked - plain == pytest.approx(0.5, abs=1e-3)


def test_it_stores_importance_on_write_and_edit(alice_api, personas):
    memory = alice_api.add("remember: the billing cron runs at 02:00 UTC", metadata={"role": "user"})
    assert memory["importance"] > 0.6
    edited = alice_api.ok("memories/edit", {"id": memory["id"], "content": "billing cron at 02:00"})
    assert edited["memory"]["importance"] < 0.3
    assert (
        stored(personal_workspace_id(personas.alice), memory["id"]).importance
        == edited["memory"]["importance"]
    )


def test_it_reorders_within_what_was_found():
    memories = [Memory(content=str(i), importance=value) for i, value in enumerate([0.0, 0.0, 1.0])]
    scores = {m.id: score for m, score in zip(memories, [1.0, 0.95, 0.9], strict=True)}
    assert importance_rerank(memories=memories, scores=scores, weight=0.0) == memories
    assert [m.content for m in importance_rerank(memories=memories, scores=scores, weight=0.15)] == [
        "2",
        "0",
        "1",
    ]
    assert [m.content for m in importance_rerank(memories=memories, scores=scores, weight=0.06)] == [
        "0",
        "2",
        "1",
    ]


def _boost(workspace_id: int, memory_id: str, importance: float) -> None:
    with workspace_context(workspace_id):
        Memory.objects.filter(pk=memory_id).update(importance=importance)


def test_it_blends_importance_into_search_and_context(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    for text in ("deploy runbook step one", "deploy runbook step two", "deploy runbook step three"):
        api.add(text)
    plain = ids(api.ok("memories/search", {"query": "deploy runbook", "importanceWeight": 0})["memories"])
    _boost(workspace_id, plain[-1], 1.0)
    for other in plain[:-1]:
        _boost(workspace_id, other, 0.0)

    weighted = ids(api.ok("memories/search", {"query": "deploy runbook", "importanceWeight": 1})["memories"])
    assert weighted[0] == plain[-1] and sorted(weighted) == sorted(plain)
    # The workspace default (0.15) applies when a request gives none; a rank-3 lexical hit is within reach.
    by_default = ids(api.ok("memories/search", {"query": "deploy runbook"})["memories"])
    assert by_default[0] == plain[-1]
    context = api.ok("context/get", {"query": "deploy runbook", "importanceWeight": 0})
    assert ids(context["memories"]) == plain
    context = api.ok("context/get", {"query": "deploy runbook", "importanceWeight": 1})
    assert ids(context["memories"])[0] == plain[-1]

    api.client.patch(
        f"{API}/memories/settings",
        data=json.dumps({"importanceWeight": 0}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )
    assert ids(api.ok("memories/search", {"query": "deploy runbook"})["memories"]) == plain


def test_it_refuses_a_weight_out_of_range(alice_api):
    error = alice_api.error(
        "memories/search", {"query": "x", "importanceWeight": 2}, status=400, code="INVALID_REQUEST"
    )
    assert "importanceWeight" in error["message"]
