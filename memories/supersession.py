"""Which of two memories is current: writes (call inside tenancy.rls.workspace_context).

A *supersedes* decision marks the older memory superseded (Memory.superseded_by: it leaves retrieval unless
a read asks for superseded memories), writes a `supersedes` edge newer → older with the decision's origin,
confidence and evidence, and ends the older memory's facts that the newer one restates with another object
(facts follow). *restates* and *not_conflict* are recorded and change nothing else, except that they undo a
supersession of the same pair. Every decision is a row of SupersessionDecision; a new decision on a pair
reverts the one before it, and a revert undoes what the decision did, so nothing is lost either way.

The update detector (memories.updates) decides at write time in the similarity step; a model confirms or
overrules it when one is configured (pipeline.services); people decide through memories/resolve, the MCP tool
and the dashboard. A person's decision on a pair is final: neither the detector nor a model overrides it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import Q
from django.utils import timezone

from memories.models import Memory, SupersessionDecision

Decision = SupersessionDecision.Decision
Origin = SupersessionDecision.Origin
# The graph edge origin of each decision origin (graphsvc.models.GraphEdge.Origin).
_EDGE_ORIGIN = {Origin.HEURISTIC: "heuristic", Origin.LLM: "llm_pairwise", Origin.MANUAL: "manual"}
SYSTEM_ACTOR = "system:update-detector"
MODEL_ACTOR = "system:model"


@dataclass(frozen=True)
class Proposal:
    """What a rule or model proposes about (newer, older)."""

    decision: str
    origin: str
    confidence: float
    rule: str | None = None
    model: str | None = None
    evidence: dict[str, Any] | None = None


def _active_on_pair(*, workspace_id: int, a: uuid.UUID, b: uuid.UUID) -> list[SupersessionDecision]:
    return list(
        SupersessionDecision.objects.filter(
            workspace_id=workspace_id,
            reverted_at__isnull=True,
            newer_id__in=[a, b],
            older_id__in=[a, b],
        ).select_for_update()
    )


def decided_by_person(*, workspace_id: int, a: uuid.UUID, b: uuid.UUID) -> bool:
    """Whether a person has an active decision on the pair (the detector and models then leave it alone)."""
    return SupersessionDecision.objects.filter(
        workspace_id=workspace_id,
        reverted_at__isnull=True,
        origin=Origin.MANUAL,
        newer_id__in=[a, b],
        older_id__in=[a, b],
    ).exists()


def decision_record(
    *, workspace_id: int, newer: Memory, older: Memory, proposal: Proposal, actor: str
) -> SupersessionDecision:
    """Record `proposal` on the pair, reverting (and undoing) the active decisions on it first."""
    now = timezone.now()
    for previous in _active_on_pair(workspace_id=workspace_id, a=newer.id, b=older.id):
        _undo(workspace_id=workspace_id, decision=previous, actor=actor, at=now)
    record = SupersessionDecision.objects.create(
        workspace_id=workspace_id,
        newer_id=newer.id,
        older_id=older.id,
        decision=proposal.decision,
        origin=proposal.origin,
        rule=(proposal.rule or "")[:200] or None,
        model=proposal.model,
        confidence=round(float(proposal.confidence), 4),
        evidence=proposal.evidence,
        actor=actor[:200],
        created_at=now,
    )
    if proposal.decision == Decision.SUPERSEDES:
        _supersede(workspace_id=workspace_id, newer=newer, older=older, record=record)
    return record


def decision_revert(
    *, workspace_id: int, a: uuid.UUID, b: uuid.UUID, actor: str
) -> list[SupersessionDecision]:
    """Revert the active decisions on the pair (either direction) and undo what they did."""
    now = timezone.now()
    reverted = _active_on_pair(workspace_id=workspace_id, a=a, b=b)
    for decision in reverted:
        _undo(workspace_id=workspace_id, decision=decision, actor=actor, at=now)
    return reverted


def _undo(*, workspace_id: int, decision: SupersessionDecision, actor: str, at: Any) -> None:
    decision.reverted_at, decision.reverted_by = at, actor[:200]
    decision.save(update_fields=["reverted_at", "reverted_by"])
    if decision.decision != Decision.SUPERSEDES:
        return
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "UPDATE memories SET superseded_by = NULL, updated_at = %s "
            "WHERE workspace_id = %s AND id = %s AND superseded_by = %s",
            [at, workspace_id, decision.older_id, decision.newer_id],
        )
        cursor.execute(
            """
            UPDATE graph_edges SET expired_at = %s, updated_at = %s
            WHERE workspace_id = %s AND edge_key = %s AND expired_at IS NULL
            """,
            [at, at, workspace_id, _edge_key(decision)],
        )
        ended = [int(i) for i in (decision.evidence or {}).get("endedFactIds", []) if isinstance(i, int)]
        if ended:
            # Reopen the facts this supersession ended, unless a newer version of the same key is active.
            cursor.execute(
                """
                UPDATE graph_edges f SET valid_to = NULL, expired_at = NULL, superseded_by_id = NULL,
                    updated_at = %s
                WHERE f.workspace_id = %s AND f.id = ANY(%s)
                  AND NOT EXISTS (SELECT 1 FROM graph_edges o WHERE o.workspace_id = f.workspace_id
                                  AND o.edge_key = f.edge_key AND o.expired_at IS NULL)
                """,
                [at, workspace_id, ended],
            )


def _edge_key(decision: SupersessionDecision) -> str:
    return f"s:supersedes:{decision.newer_id}:{decision.older_id}"


def _supersede(*, workspace_id: int, newer: Memory, older: Memory, record: SupersessionDecision) -> None:
    now = record.created_at
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "UPDATE memories SET superseded_by = %s, updated_at = %s "
            "WHERE workspace_id = %s AND id = %s AND deleted_at IS NULL",
            [newer.id, now, workspace_id, older.id],
        )
        older.superseded_by = newer.id
        evidence = record.evidence or {}
        cursor.execute(
            """
            INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
                weight, confidence, evidence_memory_id, evidence_text, origin, metadata, created_at,
                updated_at, last_observed_at, retrieval_count)
            SELECT f.workspace_id, %s, f.id, t.id, 'supersedes', 'temporal', 1.0, %s, %s, %s, %s, %s::jsonb,
                %s, %s, %s, 0
            FROM graph_nodes f, graph_nodes t
            WHERE f.workspace_id = %s AND f.node_type = 'memory' AND f.node_key = %s
              AND t.workspace_id = f.workspace_id AND t.workspace_id = %s AND t.node_type = 'memory'
              AND t.node_key = %s
            ON CONFLICT (workspace_id, edge_key) WHERE expired_at IS NULL DO UPDATE
                SET confidence = EXCLUDED.confidence, origin = EXCLUDED.origin, metadata = EXCLUDED.metadata,
                    evidence_text = EXCLUDED.evidence_text, updated_at = EXCLUDED.updated_at
            """,
            # The workspace from the selected rows: Citus inserts a SELECT's rows on their own shard only
            # when the distribution column comes from them.
            [
                _edge_key(record),
                record.confidence,
                newer.id,
                (str(evidence.get("cue") or "") + " " + str(evidence.get("newSpan") or "")).strip()[:500]
                or None,
                _EDGE_ORIGIN[Origin(record.origin)],
                json.dumps(
                    {
                        "decisionId": record.id,
                        "cue": evidence.get("cue"),
                        "rule": record.rule,
                        "model": record.model,
                        "explanation": evidence.get("explanation"),
                        "oldSpan": evidence.get("oldSpan"),
                        "newSpan": evidence.get("newSpan"),
                    }
                ),
                now,
                now,
                now,
                workspace_id,
                str(newer.id),
                workspace_id,
                str(older.id),
            ],
        )
    ended = facts_follow(workspace_id=workspace_id, newer_id=newer.id, older_id=older.id, at=now)
    if ended:
        record.evidence = {**(record.evidence or {}), "endedFactIds": ended}
        record.save(update_fields=["evidence"])


def facts_follow(*, workspace_id: int, newer_id: uuid.UUID, older_id: uuid.UUID, at: Any) -> list[int]:
    """End the active facts whose only evidence is the older memory when the newer memory supports a fact
    with the same subject and relation and another object ("deploys on Friday" → "deploys on Tuesday"). The
    ended fact keeps its valid_from, so a point-in-time read before `at` still finds it. Returns their ids."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            WITH newer AS (
                SELECT e.id, e.from_node_id, e.to_node_id, e.edge_type, e.edge_class
                FROM graph_fact_evidence v
                JOIN graph_edges e ON e.id = v.edge_id AND e.workspace_id = v.workspace_id
                WHERE v.workspace_id = %(ws)s AND v.memory_id = %(newer)s AND e.origin = 'llm_entity'
                  AND e.expired_at IS NULL AND e.valid_to IS NULL
            ), ended AS (
                SELECT DISTINCT ON (o.id) o.id, n.id AS by_id
                FROM graph_fact_evidence v
                JOIN graph_edges o ON o.id = v.edge_id AND o.workspace_id = v.workspace_id
                JOIN newer n ON n.from_node_id = o.from_node_id AND n.edge_type = o.edge_type
                                AND n.edge_class = o.edge_class AND n.to_node_id <> o.to_node_id
                WHERE v.workspace_id = %(ws)s AND v.memory_id = %(older)s AND o.origin = 'llm_entity'
                  AND o.expired_at IS NULL AND o.valid_to IS NULL
                  AND NOT EXISTS (SELECT 1 FROM graph_fact_evidence w WHERE w.workspace_id = %(ws)s
                                  AND w.edge_id = o.id AND w.memory_id <> %(older)s)
                ORDER BY o.id, n.id
            )
            UPDATE graph_edges g
            SET valid_to = greatest(coalesce(g.valid_from, g.created_at), %(at)s), expired_at = %(at)s,
                superseded_by_id = ended.by_id, updated_at = %(at)s
            FROM ended
            WHERE g.workspace_id = %(ws)s AND g.id = ended.id
            RETURNING g.id
            """,
            {"ws": workspace_id, "newer": newer_id, "older": older_id, "at": at},
        )
        return sorted(row[0] for row in cursor.fetchall())


def facts_follow_memory(*, workspace_id: int, memory: Memory) -> list[int]:
    """After a memory's facts were extracted: end what it supersedes, and its own facts when it is
    superseded already (extraction and supersession run in either order). The ended facts are kept on the
    pair's active decision, so reverting it reopens them."""
    ended: list[int] = []
    now = timezone.now()
    memory.refresh_from_db(fields=["superseded_by"])
    pairs = [(memory.superseded_by, memory.id)] if memory.superseded_by is not None else []
    pairs += [
        (memory.id, older_id)
        for older_id in Memory.objects.filter(
            workspace_id=workspace_id, superseded_by=memory.id, deleted_at__isnull=True
        ).values_list("id", flat=True)
    ]
    for newer_id, older_id in pairs:
        found = facts_follow(workspace_id=workspace_id, newer_id=newer_id, older_id=older_id, at=now)
        if not found:
            continue
        ended += found
        decision = (
            SupersessionDecision.objects.filter(
                workspace_id=workspace_id,
                newer_id=newer_id,
                older_id=older_id,
                decision=Decision.SUPERSEDES,
                reverted_at__isnull=True,
            )
            .order_by("-id")
            .first()
        )
        if decision is not None:
            evidence = dict(decision.evidence or {})
            evidence["endedFactIds"] = sorted({*evidence.get("endedFactIds", []), *found})
            decision.evidence = evidence
            decision.save(update_fields=["evidence"])
    return ended


# --- detection at write time --------------------------------------------------------------------------------

# Types that can change one another: a decision can replace a fact or a rule, a note (a session's record) a
# decision; a skill (a procedure) only another skill.
_TYPE_FAMILY = {"rule": "claim", "decision": "claim", "fact": "claim", "note": "claim", "skill": "skill"}


def comparable(newer: Memory, older: Memory) -> bool:
    """Whether the detector may compare the pair: the same visibility (workspace, project, end user: one
    memory never hides another that someone else sees), compatible types and layers, live and current,
    and `older` written first. Not the same speaker: a decision Priya records changes the one Lena did."""
    return (
        newer.id != older.id
        and newer.workspace_id == older.workspace_id
        and newer.user_id == older.user_id
        and newer.project_id == older.project_id
        and newer.scope == older.scope
        and older.deleted_at is None
        and older.superseded_by is None
        and newer.superseded_by is None
        and (older.created_at, str(older.id)) < (newer.created_at, str(newer.id))
        and _TYPE_FAMILY.get(newer.type) == _TYPE_FAMILY.get(older.type)
        and (newer.layer == Memory.Layer.WORKING) == (older.layer == Memory.Layer.WORKING)
    )


def updates_detect(
    *, workspace_id: int, memory: Memory, neighbours: list[tuple[Memory, float]], threshold: float
) -> list[SupersessionDecision]:
    """Classify `memory` against its nearest comparable neighbours (memories.updates) and record what the
    detector finds: *updates* supersedes the older memory, *restates* is recorded. Pairs a person or a model
    decided are left alone."""
    from memories import updates

    recorded: list[SupersessionDecision] = []
    for older, similarity in neighbours:
        if not comparable(memory, older):
            continue
        decision = updates.classify(older=older.content, newer=memory.content, threshold=threshold)
        if decision.relation == updates.UNRELATED:
            continue
        wanted = Decision.SUPERSEDES if decision.relation == updates.UPDATES else Decision.RESTATES
        active = _active_on_pair(workspace_id=workspace_id, a=memory.id, b=older.id)
        if any(d.origin != Origin.HEURISTIC or d.decision == wanted for d in active):
            continue
        proposal = Proposal(
            decision=wanted,
            origin=Origin.HEURISTIC,
            confidence=decision.confidence,
            rule=decision.rule,
            evidence={**decision.evidence(), "similarity": round(similarity, 4)},
        )
        recorded.append(
            decision_record(
                workspace_id=workspace_id, newer=memory, older=older, proposal=proposal, actor=SYSTEM_ACTOR
            )
        )
        if proposal.decision == Decision.SUPERSEDES:
            memory.refresh_from_db(fields=["superseded_by"])
    return recorded


# --- people and agents: memories/resolve, the MCP tool, the dashboard ---------------------------------------

_ACTIONS = {
    "supersedes": Decision.SUPERSEDES,
    "not_conflict": Decision.NOT_CONFLICT,
    "restates": Decision.RESTATES,
}


@dataclass
class Resolution:
    decision: SupersessionDecision | None
    reverted: list[SupersessionDecision]
    memories: list[Memory]


def memory_resolve(
    *,
    workspace_id: int,
    scope: Any,
    memory_id: str,
    other_memory_id: str,
    action: str,
    actor: str,
    rule: str | None = None,
    note: str | None = None,
) -> Resolution:
    """A person's (or an agent's) decision on a pair of memories the caller may write: `memory_id` is
    current for supersedes. 404 when either is not the caller's to write, 400 for a memory paired with
    itself. Call inside the workspace's context."""
    from memories import selectors, services

    current = selectors.memory_get_writable(workspace_id=workspace_id, scope=scope, memory_id=memory_id)
    if current is None:
        raise services.memory_not_found(memory_id)
    other = selectors.memory_get_writable(workspace_id=workspace_id, scope=scope, memory_id=other_memory_id)
    if other is None:
        raise services.memory_not_found(other_memory_id)
    if current.id == other.id:
        from config.errors import ApiError

        raise ApiError(
            400, "VALIDATION_ERROR", "memoryId and otherMemoryId name the same memory: name two memories."
        )
    if action == "revert":
        reverted = decision_revert(workspace_id=workspace_id, a=current.id, b=other.id, actor=actor)
        decision = None
    else:
        before = _active_on_pair(workspace_id=workspace_id, a=current.id, b=other.id)
        if action != "supersedes" and other.created_at > current.created_at:
            current, other = other, current  # a pair without a direction is stored newer first
        if action == "supersedes" and current.superseded_by is not None:
            # The current side was itself superseded by the other: that decision is what this one replaces.
            current.superseded_by = None
        decision = decision_record(
            workspace_id=workspace_id,
            newer=current,
            older=other,
            proposal=Proposal(
                decision=_ACTIONS[action],
                origin=Origin.MANUAL,
                confidence=1.0,
                rule=rule or action,
                evidence={"note": note} if note else None,
            ),
            actor=actor,
        )
        reverted = before
    for memory in (current, other):
        memory.refresh_from_db()
    return Resolution(decision, reverted, [current, other])


# --- a model confirms or overrules --------------------------------------------------------------------------


def heuristic_pairs(*, workspace_id: int, memory_id: uuid.UUID) -> list[uuid.UUID]:
    """The other memories of the detector's active supersessions of or by `memory_id` (what hides a memory:
    the model is asked about them)."""
    rows = SupersessionDecision.objects.filter(
        Q(newer_id=memory_id) | Q(older_id=memory_id),
        workspace_id=workspace_id,
        reverted_at__isnull=True,
        origin=Origin.HEURISTIC,
        decision=Decision.SUPERSEDES,
    ).values_list("newer_id", "older_id")
    return [older if newer == memory_id else newer for newer, older in rows]


# The classifier's answer → the decision it makes on the pair (the newer memory refines the older: it
# supersedes it; agrees: they restate each other; unrelated: no conflict). contradicts confirms a detected
# supersession (the newer side wins) and proposes nothing on its own: the conflict is listed instead.
_MODEL_DECISION = {
    "refines": Decision.SUPERSEDES,
    "agrees": Decision.RESTATES,
    "unrelated": Decision.NOT_CONFLICT,
}


def model_decisions_apply(
    *,
    workspace_id: int,
    memory: Memory,
    neighbours: dict[uuid.UUID, Memory],
    answers: list[Any],
    model: str,
) -> list[SupersessionDecision]:
    """Record what the model said about `memory` and its neighbours: it confirms or overrules the detector's
    decision on a pair, and supersedes on its own where no cue showed the change ("refines"). Answers below
    GRAPH_LLM_RELATIONSHIP_CONFIDENCE_THRESHOLD change nothing; a person's decision is never overridden."""
    from django.conf import settings

    recorded = []
    for answer in answers:
        other = neighbours.get(answer.other_id)
        if other is None or answer.confidence < settings.GRAPH_LLM_RELATIONSHIP_CONFIDENCE_THRESHOLD:
            continue
        active = _active_on_pair(workspace_id=workspace_id, a=memory.id, b=other.id)
        if any(d.origin == Origin.MANUAL for d in active):
            continue
        detected = next((d for d in active if d.origin == Origin.HEURISTIC), None)
        wanted = _MODEL_DECISION.get(answer.relationship)
        if answer.relationship == "contradicts":
            wanted = Decision.SUPERSEDES if detected and detected.decision == Decision.SUPERSEDES else None
        if wanted is None:
            continue
        newer, older = (
            (memory, other)
            if (other.created_at, str(other.id)) < (memory.created_at, str(memory.id))
            else (other, memory)
        )
        if wanted == Decision.SUPERSEDES and not (
            newer.user_id == older.user_id
            and newer.project_id == older.project_id
            and newer.scope == older.scope
        ):
            continue  # one memory never hides another that someone else sees
        if detected is None and wanted != Decision.SUPERSEDES:
            continue  # nothing to confirm or overrule: the edges already say it
        if any(d.origin == Origin.LLM and d.decision == wanted for d in active):
            continue
        verdict = (
            "confirms" if detected and detected.decision == wanted else ("overrules" if detected else "finds")
        )
        recorded.append(
            decision_record(
                workspace_id=workspace_id,
                newer=newer,
                older=older,
                proposal=Proposal(
                    decision=wanted,
                    origin=Origin.LLM,
                    confidence=answer.confidence,
                    rule=f"{verdict}:{answer.relationship}",
                    model=model or None,
                    evidence={
                        "explanation": answer.explanation,
                        "quote": answer.evidence,
                        "newSpan": answer.evidence,
                        "heuristic": detected.evidence if detected else None,
                    },
                ),
                actor=MODEL_ACTOR,
            )
        )
    return recorded


def resolution_answer(*, workspace_id: int, resolution: Resolution) -> dict[str, Any]:
    """memories/resolve's answer, for the SDK route and the MCP tool."""
    from memories import selectors

    return {
        "decision": selectors.decision_payload(resolution.decision) if resolution.decision else None,
        "reverted": [selectors.decision_payload(d) for d in resolution.reverted],
        "memories": selectors.memory_payloads(workspace_id=workspace_id, memories=resolution.memories),
    }
