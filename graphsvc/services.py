"""Writes on per-workspace graph settings, the supersedes edges of memory consolidation, and an
administrator's corrections of entities (merge, undo a merge, split)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from config.errors import ApiError
from graphsvc.entities import MAX_SUMMARY_CHARS, fact_edge_key, normalise_type, same_claim
from graphsvc.models import ENTITY_TYPES, GraphEntityMerge, GraphSettings
from graphsvc.names import clean_text, normalise_name, truncate_utf8


def graph_settings_update(*, workspace_id: int, llm_daily_token_budget: int | None) -> GraphSettings:
    """Call inside the workspace's RLS context. A workspace may lower its budget but never raise it above the
    operator's ceiling (GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX)."""
    ceiling = settings.GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX
    if ceiling and llm_daily_token_budget is not None and llm_daily_token_budget > ceiling:
        raise ApiError(
            400,
            "TOKEN_BUDGET_ABOVE_CEILING",
            f"dailyTokenBudget may be at most {ceiling:,} tokens on this server; send a lower number.",
            details={"ceiling": ceiling},
        )
    settings_row, _ = GraphSettings.objects.update_or_create(
        workspace_id=workspace_id, defaults={"llm_daily_token_budget": llm_daily_token_budget}
    )
    return settings_row


def supersedes_edges_add(*, workspace_id: int, pairs: list[tuple[uuid.UUID, uuid.UUID]]) -> int:
    """One `supersedes` edge winner → loser per consolidated pair (memories/consolidate); idempotent.

    Call inside the workspace's RLS context. Memories without a graph node (a failed mapping) are skipped.
    """
    if not pairs:
        return 0
    keys = sorted({str(memory_id) for pair in pairs for memory_id in pair})
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT node_key, id FROM graph_nodes WHERE workspace_id = %s AND node_type = 'memory' "
            "AND node_key = ANY(%s)",
            [workspace_id, keys],
        )
        node_by_memory = dict(cursor.fetchall())
        rows = [
            (node_by_memory[str(winner)], node_by_memory[str(loser)], winner)
            for winner, loser in pairs
            if str(winner) in node_by_memory and str(loser) in node_by_memory
        ]
        if not rows:
            return 0
        cursor.execute(
            """
            INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
                weight, confidence, evidence_memory_id, origin, created_at, updated_at, last_observed_at,
                retrieval_count)
            SELECT %s, 'c:supersedes:' || f || ':' || t, f, t, 'supersedes', 'temporal', 1.0, 1.0, w,
                   'consolidation', now(), now(), now(), 0
            FROM unnest(%s::bigint[], %s::bigint[], %s::uuid[]) AS e(f, t, w)
            ON CONFLICT (workspace_id, edge_key) WHERE expired_at IS NULL DO UPDATE
                SET last_observed_at = EXCLUDED.last_observed_at
            """,
            [workspace_id, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]],
        )
    return len(rows)


def graph_reasoning_settings_update(*, workspace_id: int, changes: dict[str, object]) -> GraphSettings:
    """Only the given fields (recall_strategy, decay_rate, max_entities). Call inside the workspace's RLS
    context."""
    allowed = {"recall_strategy", "decay_rate", "max_entities"}
    settings_row, _ = GraphSettings.objects.update_or_create(
        workspace_id=workspace_id, defaults={k: v for k, v in changes.items() if k in allowed}
    )
    return settings_row


def relation_decay_set(*, workspace_id: int, edge_type: str | None, rate: float | None) -> GraphSettings:
    """The decay rate of one relation (None removes its override), or the workspace default when edge_type is
    None."""
    settings_row, _ = GraphSettings.objects.get_or_create(workspace_id=workspace_id)
    if edge_type is None:
        settings_row.decay_rate = rate
    else:
        rates = dict(settings_row.decay_rates or {})
        if rate is None:
            rates.pop(edge_type, None)
        else:
            rates[edge_type] = rate
        settings_row.decay_rates = rates
    settings_row.save()
    return settings_row


# --- fixing entities: merge, undo a merge, split ------------------------------------------------------------
#
# An administrator's corrections of entity resolution. Each runs in one transaction inside the caller's
# workspace context and leaves a GraphEntityMerge record: the history, and for a merge everything undoing it
# needs. Entities are locked as extraction locks them (the advisory lock of each canonical name, in name
# order, then the rows), so a merge and an extraction of the same name never interleave.

ENTITY_NODE_COLUMNS = (
    "id, node_type, node_key, label, summary, embedding::text, embedding_model, first_seen_at, last_seen_at, "
    "mention_count, metadata, confidence, created_at"
)
MAX_SPLIT_ALIASES = 100
MAX_SPLIT_FACTS = 500


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _entity_rows(cursor: Any, *, workspace_id: int, node_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Lock the entities (advisory lock per name, then the rows) and read them."""
    cursor.execute(
        "SELECT id, node_key FROM graph_nodes WHERE workspace_id = %s AND id = ANY(%s) AND node_type = "
        "ANY(%s)",
        [workspace_id, node_ids, list(ENTITY_TYPES)],
    )
    names = dict(cursor.fetchall())
    missing = [node_id for node_id in node_ids if node_id not in names]
    if missing:
        raise ApiError(404, "ENTITY_NOT_FOUND", "No entity with that id in this workspace.")
    for canonical in sorted(set(names.values())):
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"entity:{workspace_id}:{canonical}"]
        )
    cursor.execute(
        f"SELECT {ENTITY_NODE_COLUMNS} FROM graph_nodes WHERE workspace_id = %s AND id = ANY(%s) "
        "ORDER BY id FOR UPDATE",
        [workspace_id, node_ids],
    )
    columns = [c.strip().split("::")[0] for c in ENTITY_NODE_COLUMNS.split(",")]
    return {row[0]: dict(zip(columns, row, strict=True)) for row in cursor.fetchall()}


def _terms_resync(cursor: Any, *, workspace_id: int, node_id: int) -> None:
    """An entity's search terms from its name, aliases and summary, as the triggers of migration 0007 write
    them (they run on inserts only: an alias taken away must take its words along)."""
    cursor.execute(
        "DELETE FROM graph_entity_terms WHERE workspace_id = %(ws)s AND node_id = %(n)s",
        {"ws": workspace_id, "n": node_id},
    )
    cursor.execute(
        """
        INSERT INTO graph_entity_terms (workspace_id, node_id, term, weight)
        SELECT n.workspace_id, n.id, w, 1 FROM graph_nodes n,
            LATERAL graph_entity_words(n.node_key || ' ' || n.label, 16) w
            WHERE n.workspace_id = %(ws)s AND n.id = %(n)s
        UNION
        SELECT a.workspace_id, a.node_id, w, 1 FROM graph_entity_aliases a, LATERAL
            graph_entity_words(a.alias, 16) w
            WHERE a.workspace_id = %(ws)s AND a.node_id = %(n)s
        UNION
        SELECT n.workspace_id, n.id, w, 2 FROM graph_nodes n, LATERAL graph_entity_words(n.summary, 24) w
            WHERE n.workspace_id = %(ws)s AND n.id = %(n)s
        ON CONFLICT DO NOTHING
        """,
        {"ws": workspace_id, "n": node_id},
    )


def _communities_touch(cursor: Any, *, workspace_id: int, node_ids: list[int]) -> None:
    """The communities of these entities changed: the next full run re-summarises them."""
    cursor.execute(
        """
        UPDATE graph_communities SET fingerprint = '', updated_at = now()
        WHERE workspace_id = %(ws)s AND id IN (
            SELECT community_id FROM graph_community_members WHERE workspace_id = %(ws)s AND node_id =
                ANY(%(ids)s))
        """,
        {"ws": workspace_id, "ids": node_ids},
    )


def _merged_summary(kept: str | None, other: str | None) -> str | None:
    if not other or (kept and other.lower() in kept.lower()):
        return kept
    return truncate_utf8(f"{kept}; {other}" if kept else other, MAX_SUMMARY_CHARS)


def _newer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether fact a is the more recent claim: later valid_from, then later observation, then larger id."""

    def key(fact: dict[str, Any]) -> tuple[Any, ...]:
        floor = datetime.min.replace(tzinfo=UTC)
        return (fact["valid_from"] or floor, fact["last_observed_at"] or floor, fact["id"])

    return key(a) > key(b)


def entity_merge(*, workspace_id: int, survivor_id: int, merged_id: int) -> dict[str, Any]:
    """Fold entity `merged_id` into `survivor_id`: its aliases (its name among them), its mentions and its
    facts move to the survivor, which keeps the higher confidence, both mention counts and both summaries.
    A moved fact that now says what one of the survivor's says is a duplicate, merged by the rules of
    extraction (entities.fact_store): the same claim adds its evidence to the survivor's fact, which keeps the
    higher confidence and the later observation, and the moved copy ends; a different claim (another number,
    version, weekday or month) keeps the more recent one current and ends the other as superseded. A fact
    between the two entities would link the survivor to itself and ends. The merged entity is deleted; the
    record keeps what undoing needs (entity_merge_undo). Call inside the workspace's RLS context."""
    if survivor_id == merged_id:
        raise ApiError(400, "MERGE_SAME_ENTITY", "An entity cannot be merged into itself.")
    with transaction.atomic(using="app"), connections["app"].cursor() as cursor:
        rows = _entity_rows(cursor, workspace_id=workspace_id, node_ids=[survivor_id, merged_id])
        survivor, merged = rows[survivor_id], rows[merged_id]
        cursor.execute(
            "SELECT count(*) FROM (SELECT 1 FROM graph_edges WHERE workspace_id = %(ws)s "
            "AND from_node_id = %(m)s UNION ALL SELECT 1 FROM graph_edges WHERE workspace_id = %(ws)s "
            "AND to_node_id = %(m)s) x",
            {"ws": workspace_id, "m": merged_id},
        )
        if cursor.fetchone()[0] > settings.GRAPH_ENTITY_MERGE_MAX_FACTS:
            raise ApiError(
                400,
                "ENTITY_TOO_LARGE",
                f"{merged['label']!r} has more than {settings.GRAPH_ENTITY_MERGE_MAX_FACTS:,} facts; "
                "merge the other way round (into it) or raise GRAPH_ENTITY_MERGE_MAX_FACTS.",
            )
        snapshot: dict[str, Any] = {
            "node": {key: _iso(value) for key, value in merged.items()},
            "survivor": {
                "summary": survivor["summary"],
                "confidence": survivor["confidence"],
                "mention_count": survivor["mention_count"],
                "first_seen_at": _iso(survivor["first_seen_at"]),
                "last_seen_at": _iso(survivor["last_seen_at"]),
            },
        }
        # Aliases: all of the merged entity's, and its canonical name, now name the survivor too.
        cursor.execute(
            "SELECT alias FROM graph_entity_aliases WHERE workspace_id = %s AND node_id = %s ORDER BY alias",
            [workspace_id, merged_id],
        )
        aliases = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            """
            INSERT INTO graph_entity_aliases (workspace_id, node_id, alias, created_at)
            SELECT %s, %s, a, now() FROM unnest(%s::text[]) AS t(a)
            ON CONFLICT (workspace_id, alias, node_id) DO NOTHING RETURNING alias
            """,
            [workspace_id, survivor_id, sorted({*aliases, merged["node_key"]})],
        )
        snapshot["aliases"] = aliases
        snapshot["aliases_added"] = sorted(row[0] for row in cursor.fetchall())
        # Mentions: the memories that mentioned the merged entity mention the survivor.
        cursor.execute(
            "SELECT memory_id FROM memory_node_links WHERE workspace_id = %s AND node_id = %s AND role = "
            "'mentions'",
            [workspace_id, merged_id],
        )
        mentions = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            """
            INSERT INTO memory_node_links (workspace_id, memory_id, node_id, role, created_at)
            SELECT %s, m, %s, 'mentions', now() FROM unnest(%s::uuid[]) AS t(m)
            ON CONFLICT (workspace_id, memory_id, node_id, role) DO NOTHING RETURNING memory_id
            """,
            [workspace_id, survivor_id, mentions],
        )
        snapshot["mentions"] = [str(m) for m in mentions]
        snapshot["mentions_added"] = [str(row[0]) for row in cursor.fetchall()]
        cursor.execute(
            "DELETE FROM memory_node_links WHERE workspace_id = %s AND node_id = %s",
            [workspace_id, merged_id],
        )
        snapshot["facts"] = _facts_move(
            cursor, workspace_id=workspace_id, survivor_id=survivor_id, merged_id=merged_id
        )
        cursor.execute(
            """
            UPDATE graph_nodes SET mention_count = mention_count + %s, summary = %s,
                confidence = greatest(coalesce(confidence, 0), coalesce(%s, 0)),
                first_seen_at = least(first_seen_at, %s), last_seen_at = greatest(last_seen_at, %s),
                    updated_at = now()
            WHERE workspace_id = %s AND id = %s
            """,
            [
                merged["mention_count"],
                _merged_summary(survivor["summary"], merged["summary"]),
                merged["confidence"],
                merged["first_seen_at"],
                merged["last_seen_at"],
                workspace_id,
                survivor_id,
            ],
        )
        _communities_touch(cursor, workspace_id=workspace_id, node_ids=[survivor_id, merged_id])
        cursor.execute(
            "DELETE FROM graph_nodes WHERE workspace_id = %s AND id = %s", [workspace_id, merged_id]
        )
        record = GraphEntityMerge.objects.create(
            workspace_id=workspace_id,
            kind=GraphEntityMerge.Kind.MERGE,
            survivor_id=survivor_id,
            merged_id=merged_id,
            merged_name=str(merged["label"])[:300],
            snapshot=snapshot,
        )
    return entity_merge_json(record)


def _facts_move(cursor: Any, *, workspace_id: int, survivor_id: int, merged_id: int) -> list[dict[str, Any]]:
    """Point the merged entity's facts at the survivor (entity_merge); returns each moved fact as it was and
    what became of it: moved, duplicate (its evidence went to `into`), superseded (by `by`), superseding (it
    ended the survivor's fact `ended`) or loop."""
    cursor.execute(
        """
        SELECT id, from_node_id, to_node_id, edge_type, edge_class, edge_key, fact, confidence,
            last_observed_at,
               valid_from, valid_to, expired_at, superseded_by_id, origin
        FROM graph_edges WHERE workspace_id = %(ws)s AND (from_node_id = %(m)s OR to_node_id = %(m)s) ORDER
            BY id
        """,
        {"ws": workspace_id, "m": merged_id},
    )
    columns = [
        "id", "from", "to", "relation", "edge_class", "key", "fact", "confidence", "last_observed_at",
        "valid_from", "valid_to", "expired_at", "superseded_by", "origin",
    ]  # fmt: skip
    edges = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    for edge in edges:
        edge["new_from"] = survivor_id if edge["from"] == merged_id else edge["from"]
        edge["new_to"] = survivor_id if edge["to"] == merged_id else edge["to"]
        edge["new_key"] = (
            fact_edge_key(
                source_id=edge["new_from"],
                target_id=edge["new_to"],
                edge_class=edge["edge_class"],
                relation=edge["relation"],
            )
            if edge["origin"] == "llm_entity"
            else edge["key"].replace(f":{merged_id}:", f":{survivor_id}:")
        )
    active = [e for e in edges if e["expired_at"] is None and e["new_from"] != e["new_to"]]
    # The survivor's current facts that say the same thing as a moved one (same ends, class and relation),
    # through the (workspace, from, relation) index.
    cursor.execute(
        """
        SELECT e.id, e.from_node_id, e.to_node_id, e.edge_class, e.edge_type, e.fact, e.confidence,
               e.last_observed_at, e.valid_from
        FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[]) AS t(f, t, c, r)
        JOIN graph_edges e ON e.workspace_id = %s AND e.from_node_id = t.f AND e.edge_type = t.r
             AND e.to_node_id = t.t AND e.edge_class = t.c AND e.expired_at IS NULL
             AND e.origin = 'llm_entity'
        WHERE NOT (e.id = ANY(%s))
        """,
        [
            [e["new_from"] for e in active],
            [e["new_to"] for e in active],
            [e["edge_class"] for e in active],
            [e["relation"] for e in active],
            workspace_id,
            [e["id"] for e in edges],
        ],
    )
    existing = {
        (row[1], row[2], row[3], row[4]): dict(
            zip(
                ["id", "fact", "confidence", "last_observed_at", "valid_from"], row[:1] + row[5:], strict=True
            )
        )
        for row in cursor.fetchall()
    }
    ended: list[tuple[int, int]] = []  # (survivor's fact, the moved fact that supersedes it)
    absorbed: list[tuple[int, int]] = []  # (moved fact, the current fact that takes its evidence)
    moved_ids = {e["id"] for e in edges}
    # Which fact holds each claim as the facts move: the survivor's at first, then a moved one that takes a
    # free claim or supersedes the holder. Moved facts may also repeat each other (the same claim stored
    # under two keys by an import or older code): they are merged among themselves by the same rules.
    holders: dict[tuple[Any, ...], dict[str, Any]] = dict(existing)
    for edge in edges:
        edge["outcome"], edge["expire"], edge["by"] = "moved", False, None
        if edge["new_from"] == edge["new_to"]:
            edge["outcome"], edge["expire"] = "loop", edge["expired_at"] is None
            continue
        if edge["expired_at"] is not None:
            continue
        claim = (edge["new_from"], edge["new_to"], edge["edge_class"], edge["relation"])
        other = holders.get(claim)
        if other is None:
            holders[claim] = edge
            continue
        if same_claim(other["fact"] or "", edge["fact"] or ""):
            edge["outcome"], edge["expire"], edge["by"] = "duplicate", True, other["id"]
            absorbed.append((edge["id"], other["id"]))
            edge["into_before"] = {
                k: _iso(other[k]) for k in ("confidence", "last_observed_at", "valid_from")
            }
        elif _newer(edge, other):
            if other["id"] in moved_ids:
                other["outcome"], other["expire"], other["by"] = "superseded", True, edge["id"]
            else:
                edge["outcome"], edge["ended"] = "superseding", other["id"]
                ended.append((other["id"], edge["id"]))
            holders[claim] = edge
        else:
            edge["outcome"], edge["expire"], edge["by"] = "superseded", True, other["id"]
    for old, new in ended:
        cursor.execute(
            """
            UPDATE graph_edges SET expired_at = now(), updated_at = now(), superseded_by_id = %s,
                valid_to = greatest(coalesce(valid_from, created_at),
                                    coalesce((SELECT valid_from FROM graph_edges
                                              WHERE workspace_id = %s AND id = %s), %s))
            WHERE workspace_id = %s AND id = %s
            """,
            # The time from here: Citus refuses now() inside coalesce in an UPDATE.
            [new, workspace_id, new, timezone.now(), workspace_id, old],
        )
    if edges:
        cursor.execute(
            """
            UPDATE graph_edges g SET from_node_id = x.f, to_node_id = x.t, edge_key = x.k, updated_at = now(),
                expired_at = CASE WHEN x.expire THEN now() ELSE g.expired_at END,
                valid_to = CASE WHEN x.expire THEN greatest(coalesce(g.valid_from, g.created_at), now())
                                ELSE g.valid_to END,
                superseded_by_id = coalesce(x.by, g.superseded_by_id)
            FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[], %s::bool[], %s::bigint[])
                 AS x(id, f, t, k, expire, by)
            WHERE g.workspace_id = %s AND g.id = x.id
            """,
            [
                [e["id"] for e in edges],
                [e["new_from"] for e in edges],
                [e["new_to"] for e in edges],
                [e["new_key"] for e in edges],
                [e["expire"] for e in edges],
                [e["by"] for e in edges],
                workspace_id,
            ],
        )
    added: dict[int, list[str]] = {}
    if absorbed:
        # The same claim, twice: the survivor's fact takes the moved one's evidence, confidence and
        # observation.
        cursor.execute(
            """
            INSERT INTO graph_fact_evidence (workspace_id, edge_id, memory_id, user_id, evidence_text,
                created_at)
            SELECT %s, p.into_id, fe.memory_id, fe.user_id, fe.evidence_text, now()
            FROM unnest(%s::bigint[], %s::bigint[]) AS p(src, into_id)
            JOIN graph_fact_evidence fe ON fe.workspace_id = %s AND fe.edge_id = p.src
            ON CONFLICT (workspace_id, edge_id, memory_id) DO NOTHING RETURNING edge_id, memory_id
            """,
            [workspace_id, [a for a, _ in absorbed], [b for _, b in absorbed], workspace_id],
        )
        for edge_id, memory_id in cursor.fetchall():
            added.setdefault(edge_id, []).append(str(memory_id))
        cursor.execute(
            """
            UPDATE graph_edges g SET confidence = greatest(g.confidence, m.confidence),
                last_observed_at = greatest(g.last_observed_at, m.last_observed_at),
                valid_from = least(g.valid_from, m.valid_from), updated_at = now()
            FROM unnest(%s::bigint[], %s::bigint[]) AS p(src, into_id)
            JOIN graph_edges m ON m.workspace_id = %s AND m.id = p.src
            WHERE g.workspace_id = %s AND g.id = p.into_id
            """,
            [[a for a, _ in absorbed], [b for _, b in absorbed], workspace_id, workspace_id],
        )
    return [
        {
            "id": e["id"],
            "from": e["from"],
            "to": e["to"],
            "key": e["key"],
            "expired_at": _iso(e["expired_at"]),
            "valid_to": _iso(e["valid_to"]),
            "superseded_by": e["superseded_by"],
            "outcome": e["outcome"],
            "by": e["by"],
            "ended": e.get("ended"),
            "evidence_added": added.get(e["by"], []) if e["outcome"] == "duplicate" else [],
        }
        for e in edges
    ]


def entity_merge_undo(*, workspace_id: int, merge_id: int) -> dict[str, Any]:
    """Undo a merge: the merged entity comes back with its id, name, aliases, mentions and facts (those that
    still exist), the survivor's facts it had ended or absorbed are as they were, and the aliases and mentions
    the merge gave the survivor are taken back. What was learnt since the merge stays with the survivor.
    409 MERGE_NOT_UNDOABLE when it was undone already, the survivor is gone, or another entity took the
    merged one's name. Call inside the workspace's RLS context."""
    with transaction.atomic(using="app"), connections["app"].cursor() as cursor:
        record = (
            GraphEntityMerge.objects.select_for_update()
            .filter(workspace_id=workspace_id, id=merge_id, kind=GraphEntityMerge.Kind.MERGE)
            .first()
        )
        if record is None:
            raise ApiError(404, "MERGE_NOT_FOUND", "No merge with that id in this workspace.")

        def refuse(why: str) -> ApiError:
            return ApiError(409, "MERGE_NOT_UNDOABLE", f"This merge cannot be undone: {why}")

        if record.undone_at is not None:
            raise refuse("it was undone already.")
        node, snap = record.snapshot["node"], record.snapshot
        try:
            _entity_rows(cursor, workspace_id=workspace_id, node_ids=[record.survivor_id])
        except ApiError:
            raise refuse("the entity it was merged into no longer exists.") from None
        cursor.execute(
            "SELECT 1 FROM graph_nodes WHERE workspace_id = %s AND (id = %s OR (node_type = %s AND "
            "node_key = %s))",
            [workspace_id, record.merged_id, node["node_type"], node["node_key"]],
        )
        if cursor.fetchone():
            raise refuse(f"another entity is named {node['label']!r} now; rename or merge it first.")
        cursor.execute(
            """
            INSERT INTO graph_nodes (id, workspace_id, node_type, node_key, label, summary, embedding,
                embedding_model,
                first_seen_at, last_seen_at, mention_count, metadata, confidence, created_at, updated_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s::vector, %s, %s, %s, %s, %s::jsonb, %s, %s, now())
            """,
            [
                record.merged_id,
                workspace_id,
                node["node_type"],
                node["node_key"],
                node["label"],
                node["summary"],
                node["embedding"],
                node["embedding_model"],
                node["first_seen_at"],
                node["last_seen_at"],
                node["mention_count"],
                json.dumps(node["metadata"]) if node["metadata"] is not None else None,
                node["confidence"],
                node["created_at"],
            ],
        )
        cursor.execute(
            """
            INSERT INTO graph_entity_aliases (workspace_id, node_id, alias, created_at)
            SELECT %s, %s, a, now() FROM unnest(%s::text[]) AS t(a) ON CONFLICT DO NOTHING
            """,
            [workspace_id, record.merged_id, snap["aliases"]],
        )
        cursor.execute(
            "DELETE FROM graph_entity_aliases WHERE workspace_id = %s AND node_id = %s AND alias = ANY(%s)",
            [workspace_id, record.survivor_id, snap["aliases_added"]],
        )
        _facts_restore(cursor, workspace_id=workspace_id, facts=snap["facts"])
        cursor.execute(
            """
            INSERT INTO memory_node_links (workspace_id, memory_id, node_id, role, created_at)
            SELECT %s, m.id, %s, 'mentions', now() FROM memories m
            WHERE m.workspace_id = %s AND m.id = ANY(%s::uuid[]) AND m.deleted_at IS NULL
            ON CONFLICT (workspace_id, memory_id, node_id, role) DO NOTHING
            """,
            [workspace_id, record.merged_id, workspace_id, snap["mentions"]],
        )
        cursor.execute(
            "DELETE FROM memory_node_links WHERE workspace_id = %s AND node_id = %s AND role = 'mentions' "
            "AND memory_id = ANY(%s::uuid[])",
            [workspace_id, record.survivor_id, snap["mentions_added"]],
        )
        before = snap["survivor"]
        cursor.execute(
            """
            UPDATE graph_nodes SET mention_count = greatest(1, mention_count - %s), summary = %s,
                confidence = %s,
                first_seen_at = %s, updated_at = now()
            WHERE workspace_id = %s AND id = %s
            """,
            [
                node["mention_count"],
                before["summary"],
                before["confidence"],
                before["first_seen_at"],
                workspace_id,
                record.survivor_id,
            ],
        )
        _terms_resync(cursor, workspace_id=workspace_id, node_id=record.survivor_id)
        _communities_touch(cursor, workspace_id=workspace_id, node_ids=[record.survivor_id])
        record.undone_at = timezone.now()
        record.save(update_fields=["undone_at"])
    return entity_merge_json(record)


def _facts_restore(cursor: Any, *, workspace_id: int, facts: list[dict[str, Any]]) -> None:
    """The moved facts back on the merged entity, as they were; the survivor's facts the merge ended back to
    current (unless a fact with their key is current again), and the evidence it copied to them removed."""
    if not facts:
        return
    for fact in facts:
        if fact["outcome"] == "superseding" and fact.get("ended"):
            cursor.execute(
                """
                UPDATE graph_edges g SET expired_at = NULL, valid_to = NULL, superseded_by_id = NULL,
                    updated_at = now()
                WHERE g.workspace_id = %s AND g.id = %s AND g.superseded_by_id = %s
                  AND NOT EXISTS (SELECT 1 FROM graph_edges o WHERE o.workspace_id = g.workspace_id
                                  AND o.edge_key = g.edge_key AND o.expired_at IS NULL AND o.id <> %s)
                """,
                [workspace_id, fact["ended"], fact["id"], fact["id"]],
            )
        if fact["outcome"] == "duplicate" and fact["evidence_added"]:
            cursor.execute(
                "DELETE FROM graph_fact_evidence WHERE workspace_id = %s AND edge_id = %s AND memory_id = "
                "ANY(%s::uuid[])",
                [workspace_id, fact["by"], fact["evidence_added"]],
            )
    # First take every moved fact off its current key (ended while it moves), then give each its old state:
    # a fact the merge left current may hold a key another restored fact needs for a moment.
    ids = [f["id"] for f in facts]
    cursor.execute(
        "UPDATE graph_edges SET expired_at = coalesce(expired_at, now()) WHERE workspace_id = %s AND id = "
        "ANY(%s)",
        [workspace_id, ids],
    )
    cursor.execute(
        """
        UPDATE graph_edges g SET from_node_id = x.f, to_node_id = x.t, edge_key = x.k, expired_at = x.expired,
            valid_to = x.valid_to, superseded_by_id = x.by, updated_at = now()
        FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[], %s::timestamptz[],
            %s::timestamptz[],
                    %s::bigint[]) AS x(id, f, t, k, expired, valid_to, by)
        WHERE g.workspace_id = %s AND g.id = x.id
        """,
        [
            ids,
            [f["from"] for f in facts],
            [f["to"] for f in facts],
            [f["key"] for f in facts],
            [f["expired_at"] for f in facts],
            [f["valid_to"] for f in facts],
            [f["superseded_by"] for f in facts],
            workspace_id,
        ],
    )


def entity_split(
    *,
    workspace_id: int,
    node_id: int,
    name: str,
    entity_type: str | None,
    aliases: list[str],
    fact_ids: list[int],
) -> dict[str, Any]:
    """A new entity `name` (of `entity_type`, else the entity's own) takes the chosen aliases and facts of
    entity `node_id`; the memories supporting the moved facts now mention it too. For a wrong merge made by
    resolution rather than by hand. Recorded as a split. Call inside the workspace's RLS context."""
    canonical = normalise_name(name)
    if canonical is None:
        raise ApiError(400, "INVALID_ENTITY_NAME", "name must have at least 3 bytes once trimmed.")
    if not aliases and not fact_ids:
        raise ApiError(
            400, "INVALID_REQUEST", "A split moves at least one alias or fact: send aliases or factIds."
        )
    wanted_aliases = sorted({a for a in (normalise_name(raw) for raw in aliases) if a})
    with transaction.atomic(using="app"), connections["app"].cursor() as cursor:
        entity = _entity_rows(cursor, workspace_id=workspace_id, node_ids=[node_id])[node_id]
        kind = normalise_type(entity_type) if entity_type else entity["node_type"]
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"entity:{workspace_id}:{canonical}"]
        )
        cursor.execute(
            "SELECT 1 FROM graph_nodes WHERE workspace_id = %s AND node_type = %s AND node_key = %s",
            [workspace_id, kind, canonical],
        )
        if cursor.fetchone():
            raise ApiError(
                409,
                "ENTITY_EXISTS",
                f"A {kind} named {name!r} exists already; merge into it instead of splitting.",
            )
        cursor.execute(
            "SELECT alias FROM graph_entity_aliases WHERE workspace_id = %s AND node_id = %s AND alias = "
            "ANY(%s)",
            [workspace_id, node_id, wanted_aliases],
        )
        found_aliases = sorted(row[0] for row in cursor.fetchall())
        if found_aliases != wanted_aliases:
            raise ApiError(
                400,
                "ALIAS_NOT_FOUND",
                f"{entity['label']!r} has no alias {sorted(set(wanted_aliases) - set(found_aliases))}.",
                details={"missing": sorted(set(wanted_aliases) - set(found_aliases))},
            )
        cursor.execute(
            """
            SELECT id, from_node_id, to_node_id, edge_type, edge_class, edge_key, origin FROM graph_edges
            WHERE workspace_id = %(ws)s AND id = ANY(%(ids)s) AND (from_node_id = %(n)s OR to_node_id = %(n)s)
            ORDER BY id
            """,
            {"ws": workspace_id, "ids": fact_ids, "n": node_id},
        )
        facts = cursor.fetchall()
        missing = sorted(set(fact_ids) - {row[0] for row in facts})
        if missing:
            raise ApiError(
                400,
                "FACT_NOT_FOUND",
                f"{entity['label']!r} has no fact with id {missing}.",
                details={"missing": [str(m) for m in missing]},
            )
        cursor.execute(
            """
            INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, first_seen_at, last_seen_at,
                mention_count, confidence, created_at, updated_at)
            VALUES (%s, %s, %s, %s, %s, %s, 1, %s, now(), now()) RETURNING id
            """,
            [
                workspace_id,
                kind,
                canonical,
                " ".join(clean_text(name).split())[:300],
                entity["first_seen_at"],
                entity["last_seen_at"],
                entity["confidence"],
            ],
        )
        new_id = cursor.fetchone()[0]
        cursor.execute(
            """
            INSERT INTO graph_entity_aliases (workspace_id, node_id, alias, created_at)
            SELECT %s, %s, a, now() FROM unnest(%s::text[]) AS t(a) ON CONFLICT DO NOTHING
            """,
            [workspace_id, new_id, sorted({canonical, *found_aliases})],
        )
        cursor.execute(
            "DELETE FROM graph_entity_aliases WHERE workspace_id = %s AND node_id = %s AND alias = ANY(%s)",
            [workspace_id, node_id, found_aliases],
        )
        moved = []
        for fact_id, source, target, relation, edge_class, key, origin in facts:
            new_from = new_id if source == node_id else source
            new_to = new_id if target == node_id else target
            new_key = (
                fact_edge_key(source_id=new_from, target_id=new_to, edge_class=edge_class, relation=relation)
                if origin == "llm_entity"
                else key
            )
            moved.append(
                {"id": fact_id, "from": source, "to": target, "key": key, "new": [new_from, new_to, new_key]}
            )
        if moved:
            cursor.execute(
                """
                UPDATE graph_edges g SET from_node_id = x.f, to_node_id = x.t, edge_key = x.k, updated_at =
                    now()
                FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[]) AS x(id, f, t, k)
                WHERE g.workspace_id = %s AND g.id = x.id
                """,
                [
                    [m["id"] for m in moved],
                    [m["new"][0] for m in moved],
                    [m["new"][1] for m in moved],
                    [m["new"][2] for m in moved],
                    workspace_id,
                ],
            )
        # The memories behind the moved facts mention the new entity.
        cursor.execute(
            """
            WITH linked AS (
                INSERT INTO memory_node_links (workspace_id, memory_id, node_id, role, created_at)
                SELECT DISTINCT %(ws)s, fe.memory_id, %(n)s, 'mentions', now() FROM graph_fact_evidence fe
                JOIN memories m ON m.workspace_id = fe.workspace_id AND m.id = fe.memory_id AND
                    m.deleted_at IS NULL
                WHERE fe.workspace_id = %(ws)s AND fe.edge_id = ANY(%(ids)s)
                ON CONFLICT (workspace_id, memory_id, node_id, role) DO NOTHING RETURNING 1
            )
            UPDATE graph_nodes SET mention_count = greatest(1, (SELECT count(*) FROM linked))
            WHERE workspace_id = %(ws)s AND id = %(n)s
            """,
            {"ws": workspace_id, "n": new_id, "ids": [m["id"] for m in moved]},
        )
        _terms_resync(cursor, workspace_id=workspace_id, node_id=node_id)
        _communities_touch(cursor, workspace_id=workspace_id, node_ids=[node_id])
        record = GraphEntityMerge.objects.create(
            workspace_id=workspace_id,
            kind=GraphEntityMerge.Kind.SPLIT,
            survivor_id=node_id,
            merged_id=new_id,
            merged_name=" ".join(clean_text(name).split())[:300],
            snapshot={
                "aliases": found_aliases,
                "facts": [{k: v for k, v in m.items() if k != "new"} for m in moved],
            },
        )
    return entity_merge_json(record)


def entity_merge_json(record: GraphEntityMerge) -> dict[str, Any]:
    return {
        "id": str(record.id),
        "kind": record.kind,
        "survivorId": str(record.survivor_id),
        "mergedId": str(record.merged_id),
        "mergedName": clean_text(record.merged_name),
        "createdAt": record.created_at,
        "undoneAt": record.undone_at,
    }
