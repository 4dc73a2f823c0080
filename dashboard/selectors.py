"""Reads for the dashboard pages. Every function runs inside the caller's workspace_context (RLS) and still
filters on workspace_id, so a missing context shows nothing rather than everything."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Count, F, IntegerField, Q, QuerySet, Value, When, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from graphsvc.models import (
    ENTITY_TYPES,
    GraphCommunity,
    GraphCommunityMember,
    GraphEdge,
    GraphEntityAlias,
    GraphNode,
    MemoryNodeLink,
)
from memories.models import Memory, SupersessionDecision
from memories.selectors import decode_cursor, encode_cursor


def node_memories(*, workspace_id: int, node: GraphNode, limit: int) -> list[Memory]:
    """Live memories linked to a node (newest links first); a memory node is linked to itself."""
    if node.node_type == "memory":
        ids = [node.node_key]
    else:
        ids = [
            str(memory_id)
            for memory_id in MemoryNodeLink.objects.filter(workspace_id=workspace_id, node_id=node.id)
            .order_by("-id")
            .values_list("memory_id", flat=True)[:limit]
        ]
    parsed = [value if isinstance(value, uuid.UUID) else _uuid_or_none(value) for value in ids]
    found = Memory.objects.filter(
        workspace_id=workspace_id, id__in=[p for p in parsed if p], deleted_at__isnull=True
    )
    by_id = {memory.id: memory for memory in found}
    return [by_id[p] for p in parsed if p in by_id]


def _uuid_or_none(raw: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        return None


# --- a hub at a glance: what the agent knows about a repo, topic, category, user or entity ------------------

HUB_MEMORIES = 5000
HUB_RULES = 8
HUB_CHIPS = 12
HUB_CONFLICTS = 5
HUB_PER_TYPE = 5
# What a person asks first about a repo: its rules, then what was decided, then the facts, then the rest.
TYPE_ORDER = ("rule", "decision", "fact", "skill", "note")


def hub_summary(*, workspace_id: int, node: GraphNode, per_type: int = HUB_PER_TYPE) -> dict[str, Any]:
    """A non-memory node's summary: its rules and decisions (rules first, the most important first), the
    topics, people and entities its memories mention most (with counts), open conflicts among them with the
    side that holds marked, and its memories grouped by type."""
    memory_ids = list(
        MemoryNodeLink.objects.filter(workspace_id=workspace_id, node_id=node.id)
        .exclude(role="self")
        .order_by("-id")
        .values_list("memory_id", flat=True)[:HUB_MEMORIES]
    )
    live = _live(workspace_id).filter(id__in=memory_ids)
    counts = dict(live.values("type").annotate(n=Count("*")).values_list("type", "n"))
    rank = Case(When(type="rule", then=Value(0)), default=Value(1), output_field=IntegerField())
    rules = list(
        live.filter(type__in=("rule", "decision"))
        .annotate(rank=rank)
        .order_by("rank", "-importance", "-created_at", "-id")[:HUB_RULES]
    )
    groups: list[dict[str, Any]] = []
    for memory_type in [*TYPE_ORDER, *sorted(set(counts) - set(TYPE_ORDER))]:
        if not counts.get(memory_type):
            continue
        groups.append(
            {
                "type": memory_type,
                "count": counts[memory_type],
                "memories": list(live.filter(type=memory_type).order_by("-created_at", "-id")[:per_type]),
            }
        )

    def chips(roles: tuple[str, ...]) -> list[dict[str, Any]]:
        rows = (
            MemoryNodeLink.objects.filter(workspace_id=workspace_id, memory_id__in=memory_ids, role__in=roles)
            .exclude(node_id=node.id)
            .values("node_id")
            .annotate(n=Count("*"))
            .order_by("-n", "node_id")[:HUB_CHIPS]
        )
        counted = {row["node_id"]: row["n"] for row in rows}
        nodes = GraphNode.objects.filter(workspace_id=workspace_id, id__in=counted)
        return sorted(
            ({"node": n, "count": counted[n.id]} for n in nodes), key=lambda c: (-c["count"], c["node"].label)
        )

    flags = conflict_states(workspace_id=workspace_id, memory_ids=[m for m in memory_ids])
    in_conflict = [m for m, state in flags.items() if state]
    conflicts_here = [
        pair
        for pair in _memory_pairs(workspace_id=workspace_id, edge_type="contradicts", limit=200)
        if pair["first"].id in flags or pair["second"].id in flags
    ][:HUB_CONFLICTS]
    for memory in rules:
        setattr(memory, "state", flags.get(memory.id))  # noqa: B010 - a page's annotation
    for group in groups:
        for memory in group["memories"]:
            setattr(memory, "state", flags.get(memory.id))  # noqa: B010 - a page's annotation
    facts: list[GraphEdge] = []
    if node.node_type in ENTITY_TYPES:
        facts = fact_list(workspace_id=workspace_id, node=node, limit=HUB_RULES)
        facts_mark(workspace_id=workspace_id, facts=facts)
    return {
        "total": len(memory_ids),
        "counts": [
            (t, counts[t]) for t in [*TYPE_ORDER, *sorted(set(counts) - set(TYPE_ORDER))] if t in counts
        ],
        "rules": rules,
        "rule_total": counts.get("rule", 0) + counts.get("decision", 0),
        "topics": chips(("tag", "category")),
        "people": chips(("mentions", "subject")),
        "repos": chips(("scope",)) if node.node_type != "repo" else [],
        "conflicts": conflicts_here,
        "conflicted": len(in_conflict),
        "groups": groups,
        "facts": facts,
    }


# --- memories -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryFilters:
    """The memory list's filters: exact userId / projectId ("-" for none), type, layer, tag, sessionId."""

    user_id: str = ""
    project_id: str = ""
    type: str = ""
    layer: str = ""
    tag: str = ""
    session: str = ""

    def any(self) -> bool:
        return any((self.user_id, self.project_id, self.type, self.layer, self.tag, self.session))

    def q(self) -> Q:
        q = Q()
        if self.user_id:
            q &= Q(user_id__isnull=True) if self.user_id == NONE else Q(user_id=self.user_id)
        if self.project_id:
            q &= Q(project_id__isnull=True) if self.project_id == NONE else Q(project_id=self.project_id)
        if self.type:
            q &= Q(type=self.type)
        if self.layer:
            q &= Q(layer=self.layer)
        if self.tag:
            q &= Q(tags__contains=[self.tag])
        if self.session:
            q &= Q(metadata__sessionId=self.session)
        return q

    def matches(self, memory: Memory) -> bool:
        """The same filters in Python, for search results ranked elsewhere."""
        checks = (
            (self.user_id, memory.user_id),
            (self.project_id, memory.project_id),
        )
        for wanted, value in checks:
            if wanted and (value is not None if wanted == NONE else value != wanted):
                return False
        if self.type and memory.type != self.type:
            return False
        if self.layer and memory.layer != self.layer:
            return False
        if self.tag and self.tag not in (memory.tags or []):
            return False
        session = (memory.metadata or {}).get("sessionId") if isinstance(memory.metadata, dict) else None
        return not (self.session and session != self.session)


# The filter value for "no userId" / "no projectId".
NONE = "-"


def _live(workspace_id: int) -> QuerySet[Memory]:
    return Memory.objects.filter(workspace_id=workspace_id, deleted_at__isnull=True)


def memory_page(
    *, workspace_id: int, cursor: str | None, limit: int, filters: MemoryFilters | None = None
) -> tuple[list[Memory], str | None]:
    """Every live memory of the workspace, newest first, whoever wrote it (the dashboard sees all users)."""
    rows = _live(workspace_id)
    if filters is not None:
        rows = rows.filter(filters.q())
    if cursor:
        created_at, memory_id = decode_cursor(cursor)
        rows = rows.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=memory_id))
    page = list(rows.order_by("-created_at", "-id")[: limit + 1])
    next_cursor = encode_cursor(page[limit - 1]) if len(page) > limit else None
    return page[:limit], next_cursor


def memory_total(*, workspace_id: int, filters: MemoryFilters | None = None) -> int:
    rows = _live(workspace_id)
    if filters is not None:
        rows = rows.filter(filters.q())
    return rows.count()


def memory_facets(*, workspace_id: int, limit: int) -> dict[str, list[str]]:
    """The values the memory list's filters offer: users, projects and the most used tags."""
    live = _live(workspace_id)
    users = [
        u
        for u in live.exclude(user_id__isnull=True)
        .values_list("user_id", flat=True)
        .distinct()
        .order_by("user_id")[:limit]
        if u
    ]
    projects = [
        p
        for p in live.exclude(project_id__isnull=True)
        .values_list("project_id", flat=True)
        .distinct()
        .order_by("project_id")[:limit]
        if p
    ]
    tags = list(
        GraphNode.objects.filter(workspace_id=workspace_id, node_type="topic")
        .order_by("node_key")
        .values_list("node_key", flat=True)[: limit * 3]
    )
    return {"users": users, "projects": projects, "tags": tags}


def memory_get(*, workspace_id: int, memory_id: uuid.UUID) -> Memory | None:
    return _live(workspace_id).filter(id=memory_id).first()


def memories_by_id(*, workspace_id: int, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, Memory]:
    if not memory_ids:
        return {}
    return {m.id: m for m in _live(workspace_id).filter(id__in=memory_ids)}


def memory_graph_links(*, workspace_id: int, memory_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    links = (
        MemoryNodeLink.objects.select_related("node")
        .filter(workspace_id=workspace_id, memory_id=memory_id)
        .exclude(role="self")
        .order_by("role", "id")[:limit]
    )
    return [{"role": link.role, "node": link.node} for link in links]


def memory_evidence_edges(*, workspace_id: int, memory_id: uuid.UUID, limit: int) -> list[GraphEdge]:
    return list(
        GraphEdge.objects.select_related("from_node", "to_node")
        .filter(workspace_id=workspace_id, evidence_memory_id=memory_id, expired_at__isnull=True)
        .order_by("edge_type", "id")[:limit]
    )


def memory_session(*, workspace_id: int, memory: Memory, limit: int) -> list[Memory]:
    """The other memories of the memory's session (metadata.sessionId), in the order they were written."""
    session = memory.metadata.get("sessionId") if isinstance(memory.metadata, dict) else None
    if not isinstance(session, str) or not session:
        return []
    return list(_live(workspace_id).filter(metadata__sessionId=session).order_by("created_at", "id")[:limit])


def node_memory_total(*, workspace_id: int, node: GraphNode) -> int:
    if node.node_type == "memory":
        return 1
    return (
        MemoryNodeLink.objects.filter(workspace_id=workspace_id, node_id=node.id).exclude(role="self").count()
    )


# --- what changed: contradictions, replacements, facts over time --------------------------------------------


def _active_edges() -> Q:
    return Q(expired_at__isnull=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))


def memory_flags(*, workspace_id: int, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, set[str]]:
    """Per memory: "replaced" when a newer memory supersedes it (or consolidation did), "contradicted" when
    another memory contradicts it: the list's badges."""
    flags: dict[uuid.UUID, set[str]] = {}
    if not memory_ids:
        return flags
    rows = (
        GraphEdge.objects.filter(_active_edges(), workspace_id=workspace_id)
        .filter(edge_type__in=("supersedes", "contradicts"), to_node__node_type="memory")
        .filter(to_node__node_key__in=[str(m) for m in memory_ids])
        .values_list("to_node__node_key", "edge_type")
    )
    for key, edge_type in rows:
        memory_id = _uuid_or_none(key)
        if memory_id:
            flags.setdefault(memory_id, set()).add(
                "replaced" if edge_type == "supersedes" else "contradicted"
            )
    for memory_id in (
        _live(workspace_id)
        .filter(id__in=memory_ids, superseded_by__isnull=False)
        .values_list("id", flat=True)
    ):
        flags.setdefault(memory_id, set()).add("replaced")
    for memory_id, state in conflict_states(workspace_id=workspace_id, memory_ids=memory_ids).items():
        flags.setdefault(memory_id, set()).add(state)
    return flags


# A side of a disagreement as the pages mark it: the newer memory of a contradiction is likely current, the
# older likely outdated; a replaced memory is outdated whatever else it is in.
CURRENT, OUTDATED = "current", "outdated"


def conflict_states(*, workspace_id: int, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Per memory in a contradiction or a replacement: CURRENT or OUTDATED, from what the data holds (the
    contradicts and supersedes edges, superseded_by, and which side was written later)."""
    states: dict[uuid.UUID, str] = {}
    if not memory_ids:
        return states
    keys = [str(m) for m in memory_ids]
    edges = list(
        GraphEdge.objects.filter(_active_edges(), workspace_id=workspace_id)
        .filter(edge_type__in=("supersedes", "contradicts"))
        .filter(from_node__node_type="memory", to_node__node_type="memory")
        .filter(Q(from_node__node_key__in=keys) | Q(to_node__node_key__in=keys))
        .values_list("from_node__node_key", "to_node__node_key", "edge_type")[:2000]
    )
    ends = {u for row in edges for u in (_uuid_or_none(row[0]), _uuid_or_none(row[1])) if u}
    written = dict(_live(workspace_id).filter(id__in=ends).values_list("id", "created_at"))
    outdated: set[uuid.UUID] = set()
    current: set[uuid.UUID] = set()
    for source, target, edge_type in edges:
        first, second = _uuid_or_none(source), _uuid_or_none(target)
        if first not in written or second not in written:
            continue  # one side forgotten: nothing left to disagree with
        assert first is not None and second is not None
        if edge_type == "supersedes":
            newer, older = first, second
        else:
            newer, older = (
                (first, second)
                if (written[first], str(first)) > (written[second], str(second))
                else (
                    second,
                    first,
                )
            )
        current.add(newer)
        outdated.add(older)
    outdated.update(
        _live(workspace_id)
        .filter(id__in=memory_ids, superseded_by__isnull=False)
        .values_list("id", flat=True)
    )
    wanted = set(memory_ids)
    for memory_id in current & wanted:
        states[memory_id] = CURRENT
    for memory_id in outdated & wanted:
        states[memory_id] = OUTDATED
    return states


def conflict_count(*, workspace_id: int) -> int:
    """Memory pairs with an active contradicts edge (stored both ways: counted once)."""
    return (
        GraphEdge.objects.filter(_active_edges(), workspace_id=workspace_id, edge_type="contradicts")
        .filter(from_node__node_type="memory", from_node_id__lt=F("to_node_id"))
        .count()
    )


def _memory_pairs(*, workspace_id: int, edge_type: str, limit: int) -> list[dict[str, Any]]:
    edges = GraphEdge.objects.select_related("from_node", "to_node").filter(
        _active_edges(),
        workspace_id=workspace_id,
        edge_type=edge_type,
        from_node__node_type="memory",
        to_node__node_type="memory",
    )
    if edge_type == "contradicts":
        edges = edges.filter(from_node_id__lt=F("to_node_id"))
    rows = list(edges.order_by("-created_at", "-id")[:limit])
    ids = [_uuid_or_none(k) for e in rows for k in (e.from_node.node_key, e.to_node.node_key)]
    found = memories_by_id(workspace_id=workspace_id, memory_ids=[i for i in ids if i])
    pairs = []
    for edge in rows:
        first = found.get(_uuid_or_none(edge.from_node.node_key))  # type: ignore[arg-type]
        second = found.get(_uuid_or_none(edge.to_node.node_key))  # type: ignore[arg-type]
        if first is None or second is None:
            continue
        if edge_type == "contradicts" and first.created_at > second.created_at:
            first, second = second, first  # older on the left
        pairs.append(
            {
                "edge": edge,
                "first": first,
                "second": second,
                "explanation": _edge_explanation(edge),
            }
        )
    return pairs


def _edge_explanation(edge: GraphEdge) -> str | None:
    """The model's explanation; for the update detector's edges the cue and what changed."""
    metadata = edge.metadata if isinstance(edge.metadata, dict) else {}
    if metadata.get("explanation"):
        return str(metadata["explanation"])
    if edge.origin == "heuristic":
        change = f"{metadata.get('oldSpan')} → {metadata.get('newSpan')}"
        cue = metadata.get("cue")
        return (
            f"Update detected (the newer memory says “{cue}”): {change}."
            if cue
            else f"Update detected: {change}."
        )
    if edge.origin == "manual":
        return "A person decided which memory is current."
    return None


def conflicts(*, workspace_id: int, limit: int) -> list[dict[str, Any]]:
    """Contradicting memory pairs, newest first: the older memory as `first`, with the model's
    explanation and quote, and which side is current (`current`: the successor when one side superseded
    the other, else the newer; `current_because`: superseded | newer | both_stand)."""
    pairs = _memory_pairs(workspace_id=workspace_id, edge_type="contradicts", limit=limit)
    standing = _both_stand(workspace_id=workspace_id, pairs=[(p["first"].id, p["second"].id) for p in pairs])
    for pair in pairs:
        first, second = pair["first"], pair["second"]
        if first.superseded_by == second.id or second.superseded_by == first.id:
            pair["current"] = second if first.superseded_by == second.id else first
            pair["current_because"] = "superseded"
        elif frozenset((first.id, second.id)) in standing:
            pair["current"], pair["current_because"] = None, "both_stand"
        else:
            pair["current"], pair["current_because"] = second, "newer"
    return pairs


def _both_stand(*, workspace_id: int, pairs: list[tuple[uuid.UUID, uuid.UUID]]) -> set[frozenset[uuid.UUID]]:
    ids = {memory_id for pair in pairs for memory_id in pair}
    if not ids:
        return set()
    rows = SupersessionDecision.objects.filter(
        workspace_id=workspace_id,
        reverted_at__isnull=True,
        decision=SupersessionDecision.Decision.NOT_CONFLICT,
        newer_id__in=ids,
        older_id__in=ids,
    ).values_list("newer_id", "older_id")
    return {frozenset(row) for row in rows}


def duplicates(*, workspace_id: int, limit: int) -> list[list[Memory]]:
    """Groups of memories that restate each other (active *restates* decisions of the update detector, a
    model or a person), newest first in each group; groups with the newest activity first."""
    rows = list(
        SupersessionDecision.objects.filter(
            workspace_id=workspace_id,
            reverted_at__isnull=True,
            decision=SupersessionDecision.Decision.RESTATES,
        )
        .order_by("-created_at", "-id")
        .values_list("newer_id", "older_id")[: limit * 4]
    )
    parent: dict[uuid.UUID, uuid.UUID] = {}

    def root(node: uuid.UUID) -> uuid.UUID:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for newer, older in rows:
        parent[root(newer)] = root(older)
    found = memories_by_id(workspace_id=workspace_id, memory_ids=list(parent))
    groups: dict[uuid.UUID, list[Memory]] = {}
    for memory_id, memory in found.items():
        if memory.superseded_by is None:
            groups.setdefault(root(memory_id), []).append(memory)
    ordered = [
        sorted(group, key=lambda m: (m.created_at, str(m.id)), reverse=True)
        for group in groups.values()
        if len(group) > 1
    ]
    ordered.sort(key=lambda group: group[0].created_at, reverse=True)
    return ordered[:limit]


def replacements(*, workspace_id: int, limit: int) -> list[dict[str, Any]]:
    """Memories replaced by newer ones (supersedes: `first` is the newer, `second` the replaced memory),
    and the ones consolidation superseded."""
    pairs = _memory_pairs(workspace_id=workspace_id, edge_type="supersedes", limit=limit)
    consolidated = list(
        Memory.objects.filter(
            workspace_id=workspace_id, deleted_at__isnull=True, superseded_by__isnull=False
        ).order_by("-updated_at")[:limit]
    )
    newer = memories_by_id(
        workspace_id=workspace_id, memory_ids=[m.superseded_by for m in consolidated if m.superseded_by]
    )
    listed = {(pair["first"].id, pair["second"].id) for pair in pairs}
    for old in consolidated:
        new = newer.get(old.superseded_by)  # type: ignore[arg-type]
        if new is not None and (new.id, old.id) not in listed:
            pairs.append({"edge": None, "first": new, "second": old, "explanation": "Consolidated."})
    return pairs[:limit]


def recent_memories(*, workspace_id: int, limit: int) -> list[Memory]:
    return list(_live(workspace_id).order_by("-created_at", "-id")[:limit])


def memory_changes(*, workspace_id: int, memory: Memory) -> dict[str, list[dict[str, Any]]]:
    """What replaced or contradicts this memory, and what it replaces, with the model's explanation."""
    node = GraphNode.objects.filter(
        workspace_id=workspace_id, node_type="memory", node_key=str(memory.id)
    ).first()
    result: dict[str, list[dict[str, Any]]] = {"replaced_by": [], "replaces": [], "contradicted_by": []}
    if node is not None:
        edges = list(
            GraphEdge.objects.select_related("from_node", "to_node")
            .filter(_active_edges(), workspace_id=workspace_id, edge_type__in=("supersedes", "contradicts"))
            .filter(Q(from_node_id=node.id) | Q(to_node_id=node.id))
            .order_by("-created_at", "id")[:50]
        )
        others = memories_by_id(
            workspace_id=workspace_id,
            memory_ids=[
                u
                for e in edges
                for u in (_uuid_or_none(e.from_node.node_key), _uuid_or_none(e.to_node.node_key))
                if u and u != memory.id
            ],
        )
        seen: set[tuple[str, uuid.UUID]] = set()
        for edge in edges:
            outgoing = edge.from_node_id == node.id
            other_id = _uuid_or_none((edge.to_node if outgoing else edge.from_node).node_key)
            other = others.get(other_id) if other_id else None
            if other is None:
                continue
            if edge.edge_type == "contradicts":
                kind = "contradicted_by"
            else:
                kind = "replaces" if outgoing else "replaced_by"
            if (kind, other.id) in seen:
                continue
            seen.add((kind, other.id))
            explanation = (
                (edge.metadata or {}).get("explanation") if isinstance(edge.metadata, dict) else None
            )
            result[kind].append(
                {"memory": other, "edge": edge, "explanation": explanation, "evidence": edge.evidence_text}
            )
    if memory.superseded_by:
        newer = memory_get(workspace_id=workspace_id, memory_id=memory.superseded_by)
        if newer is not None:
            result["replaced_by"].append(
                {
                    "memory": newer,
                    "edge": None,
                    "explanation": "Consolidated into a newer memory.",
                    "evidence": None,
                }
            )
    return result


def fact_timeline(*, workspace_id: int, limit: int) -> list[dict[str, Any]]:
    """Entity facts over time, current and ended, grouped by subject and relation so a replaced value is
    followed by what replaced it."""
    facts = list(
        GraphEdge.objects.select_related("from_node", "to_node")
        .filter(workspace_id=workspace_id, origin=GraphEdge.Origin.LLM_ENTITY)
        .order_by("from_node__label", "edge_type", F("valid_from").asc(nulls_first=True), "created_at")[
            :limit
        ]
    )
    groups: dict[tuple[int, str], list[GraphEdge]] = {}
    for fact in facts:
        groups.setdefault((fact.from_node_id, fact.edge_type), []).append(fact)
    return [
        {"subject": rows[0].from_node, "relation": relation, "facts": rows}
        for (_, relation), rows in groups.items()
    ]


def fact_states(*, workspace_id: int, facts: list[GraphEdge]) -> dict[int, str]:
    """Per still-valid fact whose subject has held more than one value of the same relation ("deploys on
    Friday", later "deploys on Tuesday"): CURRENT for the value that became true last, OUTDATED for other
    values still stated. Ended facts get no mark: the page says when they ended."""
    keys = {(f.from_node_id, f.edge_type) for f in facts}
    if not keys:
        return {}
    rivals = (
        GraphEdge.objects.filter(
            workspace_id=workspace_id,
            origin=GraphEdge.Origin.LLM_ENTITY,
            from_node_id__in={k[0] for k in keys},
            edge_type__in={k[1] for k in keys},
        )
        .order_by("id")
        .values_list(
            "id",
            "from_node_id",
            "edge_type",
            "to_node_id",
            "valid_from",
            "created_at",
            "valid_to",
            "expired_at",
        )[:5000]
    )
    groups: dict[tuple[int, str], list[tuple[Any, ...]]] = {}
    for row in rivals:
        if (row[1], row[2]) in keys:
            groups.setdefault((row[1], row[2]), []).append(row)
    states: dict[int, str] = {}
    for rows in groups.values():
        live = [row for row in rows if row[6] is None and row[7] is None]
        if not live or len({row[3] for row in rows}) < 2:
            continue  # one value, however many times it was said
        latest = max(live, key=lambda row: (row[4] or row[5], row[5], row[0]))
        for row in live:
            states[row[0]] = CURRENT if row[3] == latest[3] else OUTDATED
    return states


def facts_mark(*, workspace_id: int, facts: list[GraphEdge]) -> None:
    """Set `state` (CURRENT, OUTDATED or None) on each fact, for the templates."""
    states = fact_states(workspace_id=workspace_id, facts=facts)
    for fact in facts:
        setattr(fact, "state", states.get(fact.id))  # noqa: B010 - not a model field: a page's annotation


# --- entities, facts, communities ---------------------------------------------------------------------------


def entity_list(*, workspace_id: int, query: str, entity_type: str | None, limit: int) -> list[GraphNode]:
    entities = GraphNode.objects.filter(workspace_id=workspace_id, node_type__in=ENTITY_TYPES)
    if entity_type:
        entities = entities.filter(node_type=entity_type)
    if query:
        alias_nodes = GraphEntityAlias.objects.filter(
            workspace_id=workspace_id, alias__icontains=query.lower()
        )
        entities = entities.filter(Q(label__icontains=query) | Q(id__in=alias_nodes.values("node_id")))
    return list(entities.order_by("-mention_count", "label", "id")[:limit])


def entity_get(*, workspace_id: int, node_id: int) -> GraphNode | None:
    return GraphNode.objects.filter(workspace_id=workspace_id, id=node_id, node_type__in=ENTITY_TYPES).first()


def entity_aliases(*, workspace_id: int, node: GraphNode, limit: int) -> list[str]:
    return list(
        GraphEntityAlias.objects.filter(workspace_id=workspace_id, node_id=node.id)
        .order_by("alias")
        .values_list("alias", flat=True)[:limit]
    )


def fact_list(
    *,
    workspace_id: int,
    node: GraphNode | None = None,
    query: str = "",
    include_invalid: bool = False,
    limit: int,
) -> list[GraphEdge]:
    """Entity facts (llm_entity edges), current ones first; invalidated ones only when asked for."""
    facts = GraphEdge.objects.select_related("from_node", "to_node").filter(
        workspace_id=workspace_id, origin=GraphEdge.Origin.LLM_ENTITY
    )
    if node is not None:
        facts = facts.filter(Q(from_node_id=node.id) | Q(to_node_id=node.id))
    if not include_invalid:
        facts = facts.filter(expired_at__isnull=True, valid_to__isnull=True)
    if query:
        facts = facts.filter(Q(fact__icontains=query) | Q(edge_type__icontains=query))
    return list(facts.order_by("expired_at", "-valid_from", "-id")[:limit])


def community_list(*, workspace_id: int, limit: int, member_limit: int) -> list[dict[str, Any]]:
    communities = list(GraphCommunity.objects.filter(workspace_id=workspace_id).order_by("name")[:limit])
    ids = [community.id for community in communities]
    members = GraphCommunityMember.objects.filter(workspace_id=workspace_id, community_id__in=ids)
    sizes = dict(members.values("community_id").annotate(size=Count("*")).values_list("community_id", "size"))
    # The first members by id of each community, labels joined in: one statement however large the
    # communities.
    firsts = (
        members.annotate(
            rank=Window(RowNumber(), partition_by=F("community_id"), order_by=F("node_id").asc())
        )
        .filter(rank__lte=member_limit)
        .order_by("community_id", "node_id")
        .values_list("community_id", "node__label")
    )
    labels: dict[int, list[str]] = {}
    for community_id, label in firsts:
        labels.setdefault(community_id, []).append(label)
    return [
        {
            "community": community,
            # Stored names end in a fingerprint that keeps them unique ("Ada, api, Lena [3fa8c2d10]"): people
            # read the member names.
            "name": community.name.rsplit(" [", 1)[0] or community.name,
            "size": sizes.get(community.id, 0),
            "members": labels.get(community.id, []),
        }
        for community in communities
    ]
