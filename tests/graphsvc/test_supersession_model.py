"""With a model configured (the local fake OpenAI server through litellm), the model confirms or overrules
the update detector and supersedes where no cue shows the change; facts follow a supersession on the model
path, and a point-in-time read still finds the old fact at its time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import connections

from memories.models import Memory, SupersessionDecision
from tenancy.rls import workspace_context
from tests.graphsvc.conftest import script_for
from tests.memories.helpers import backdate, run_jobs, stored

OLD = "We deploy the api to production every Friday afternoon."
NEW = "Lena moved production deploys from Friday to Tuesday."


def decisions(workspace_id: int) -> list[tuple[str, str, str | None]]:
    with workspace_context(workspace_id):
        return list(SupersessionDecision.objects.order_by("id").values_list("origin", "decision", "rule"))


def answer(relationship: str, confidence: float = 0.9) -> dict[str, object]:
    return {"relationship": relationship, "confidence": confidence, "explanation": "why", "evidence": "quote"}


def test_it_lets_the_model_confirm_the_detector(alice_api, alice_ws, local_embedder, fake_llm):
    fake_llm.answers["pairwise"] = answer("refines")
    old = alice_api.add(OLD, type="decision")
    backdate(alice_ws, old["id"], days=3)
    new = alice_api.add(NEW, type="decision")
    run_jobs(alice_ws)
    assert decisions(alice_ws) == [
        ("heuristic", "supersedes", "cue:moved+left:friday"),
        ("llm", "supersedes", "confirms:refines"),
    ]
    assert str(stored(alice_ws, old["id"]).superseded_by) == new["id"]
    # The pair was asked about although the detector had decided it (the prompt holds both notes).
    assert any(OLD in prompt and NEW in prompt for prompt in fake_llm.calls_for("pairwise"))


def test_it_lets_the_model_overrule_the_detector(alice_api, alice_ws, local_embedder, fake_llm):
    fake_llm.answers["pairwise"] = answer("unrelated", 0.95)
    old = alice_api.add(OLD, type="decision")
    backdate(alice_ws, old["id"], days=3)
    alice_api.add(NEW, type="decision")
    run_jobs(alice_ws)
    assert [d[:2] for d in decisions(alice_ws)] == [("heuristic", "supersedes"), ("llm", "not_conflict")]
    assert stored(alice_ws, old["id"]).superseded_by is None
    with workspace_context(alice_ws):
        heuristic = SupersessionDecision.objects.get(origin="heuristic")
    assert heuristic.reverted_at is not None and heuristic.reverted_by == "system:model"


def test_it_lets_a_low_confidence_answer_change_nothing(alice_api, alice_ws, local_embedder, fake_llm):
    fake_llm.answers["pairwise"] = answer("unrelated", 0.3)
    old = alice_api.add(OLD, type="decision")
    backdate(alice_ws, old["id"], days=3)
    new = alice_api.add(NEW, type="decision")
    run_jobs(alice_ws)
    assert [d[:2] for d in decisions(alice_ws)] == [("heuristic", "supersedes")]
    assert str(stored(alice_ws, old["id"]).superseded_by) == new["id"]


def test_it_lets_the_model_find_what_no_cue_shows(alice_api, alice_ws, local_embedder, fake_llm, settings):
    settings.GRAPH_LLM_AMBIGUOUS_SIMILARITY_MIN = 0.0
    fake_llm.answers["pairwise"] = answer("refines", 0.85)
    old = alice_api.add("The design review happens on Thursdays.", type="decision")
    backdate(alice_ws, old["id"], days=3)
    new = alice_api.add("Design reviews are held on Mondays at ten.", type="decision")
    run_jobs(alice_ws)
    assert decisions(alice_ws) == [("llm", "supersedes", "finds:refines")]
    assert str(stored(alice_ws, old["id"]).superseded_by) == new["id"]


def _deploy_fact(day: str) -> dict[str, object]:
    return {
        "entities": [
            {"name": "Api Service", "type": "project", "summary": None},
            {"name": day, "type": "event", "summary": None},
        ],
        "facts": [
            {
                "source": "Api Service",
                "target": day,
                "relation": "deploys on",
                "fact": f"The api service deploys on {day}.",
                "edge_class": "semantic",
                "confidence": 0.9,
                "temporal_hint": None,
                "valid_from": None,
                "replaces_previous": False,
            }
        ],
    }


def _facts_at(workspace_id: int, at: datetime) -> set[str]:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT fact FROM graph_edges WHERE origin = 'llm_entity' AND valid_from <= %s "
            "AND (valid_to IS NULL OR valid_to > %s)",
            [at, at],
        )
        return {row[0] for row in cursor.fetchall()}


def test_it_ends_the_older_fact_when_its_memory_is_superseded(alice_api, alice_ws, local_embedder, fake_llm):
    # The model names another object and does not say it replaces the old one: the supersession does.
    fake_llm.answers["pairwise"] = answer("refines")
    fake_llm.answers["entity_extraction"] = script_for(
        {"from Friday to Tuesday": _deploy_fact("Tuesday"), "*": _deploy_fact("Friday")}
    )
    alice_api.add(OLD, type="decision")
    run_jobs(alice_ws)
    before = datetime.now(UTC)
    assert _facts_at(alice_ws, before) == {"The api service deploys on Friday."}
    alice_api.add(NEW, type="decision")
    run_jobs(alice_ws)
    later = datetime.now(UTC) + timedelta(seconds=1)
    assert _facts_at(alice_ws, later) == {"The api service deploys on Tuesday."}
    assert _facts_at(alice_ws, before) == {"The api service deploys on Friday."}
    with workspace_context(alice_ws):
        old = Memory.objects.get(content=OLD)
        ended = SupersessionDecision.objects.filter(older_id=old.id, reverted_at__isnull=True).first()
    # Undoing the supersession brings the old fact back.
    alice_api.ok(
        "memories/resolve",
        {"action": "not_conflict", "memoryId": str(ended.newer_id), "otherMemoryId": str(old.id)},
    )
    assert _facts_at(alice_ws, datetime.now(UTC) + timedelta(seconds=1)) == {
        "The api service deploys on Friday.",
        "The api service deploys on Tuesday.",
    }


def test_it_ends_the_older_fact_when_consolidation_supersedes(alice_api, alice_ws, local_embedder, fake_llm):
    # The upsert-key path: no cue, no model decision (a weak answer), consolidation keeps the newest.
    fake_llm.answers["pairwise"] = answer("unrelated", 0.2)
    fake_llm.answers["entity_extraction"] = script_for(
        {"Tuesday": _deploy_fact("Tuesday"), "*": _deploy_fact("Friday")}
    )
    old = alice_api.add("Deploy day: Friday")
    backdate(alice_ws, old["id"], days=2)
    alice_api.add("Deploy day: Tuesday")
    run_jobs(alice_ws)
    now = datetime.now(UTC)
    assert _facts_at(alice_ws, now) == {
        "The api service deploys on Friday.",
        "The api service deploys on Tuesday.",
    }
    assert alice_api.ok("memories/consolidate", {})["run"]["supersededCount"] == 1
    assert _facts_at(alice_ws, datetime.now(UTC) + timedelta(seconds=1)) == {
        "The api service deploys on Tuesday."
    }
    assert "The api service deploys on Friday." in _facts_at(alice_ws, now)
