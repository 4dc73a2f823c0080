"""The questions people ask of a memory: what changed (contradictions side by side, replacements, facts on
a timeline, recent memories) and why context/get returned what it did (the trace, drawn)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from pydantic import ValidationError

from config.errors import ApiError
from dashboard import graph, selectors
from dashboard.access import SignedInRequest, workspace_page
from dashboard.views.common import page
from memories import selectors as selectors_memories
from memories import supersession
from memories.selectors import MemoryScope
from retrieval import context as retrieval_context
from retrieval.schemas import ContextIn
from tenancy import policy
from tenancy.models import Workspace
from tenancy.rls import workspace_context

PAIR_LIMIT = 50
RECENT_LIMIT = 20
FACT_LIMIT = 300
TIMELINE_WIDTH = 1000
TIMELINE_LABELS = 330  # the left column: what each bar is
TIMELINE_ROW = 30
TIMELINE_AXIS = 34  # room for the dates under the bars
TIMELINE_TICKS = 6
# The shortest bar drawn, in chart units: a fact that started today is still a bar one can see and point at.
TIMELINE_MIN_BAR = 8.0
LABEL_CHARS = 46


def _timeline(*, workspace_id: int, groups: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """Facts as bars from valid-from to valid-to (or to now), a labelled row each, with a date axis: positions
    as SVG attributes (the CSP allows no inline style)."""
    facts = [fact for group in groups for fact in group["facts"]]
    if not facts:
        return {"rows": [], "height": 0}
    states = selectors.fact_states(workspace_id=workspace_id, facts=facts)
    starts = [f.valid_from or f.created_at for f in facts]
    first = min(min(starts), now - timedelta(days=1))
    # A margin after now, so a bar that started today is not squeezed against the edge.
    span = (now - first).total_seconds()
    last = now + timedelta(seconds=max(span * 0.04, 86_400.0))
    total = max((last - first).total_seconds(), 1.0)
    left, right = TIMELINE_LABELS + 10, TIMELINE_WIDTH - 10

    def x(moment: datetime) -> float:
        share = min(max(0.0, (moment - first).total_seconds()), total) / total
        return round(left + (right - left) * share, 1)

    rows, y = [], 0
    for group in groups:
        for fact in group["facts"]:
            start = fact.valid_from or fact.created_at
            end = fact.valid_to or fact.expired_at
            x1, x2 = x(start), x(end or now)
            width = max(x2 - x1, TIMELINE_MIN_BAR)
            x1 = min(x1, right - width)
            text = fact.fact or f"{group['subject'].label} {fact.edge_type} {fact.to_node.label}"
            label = f"{group['subject'].label}: {text}"
            state = "ended" if end is not None else states.get(fact.id) or "current"
            rows.append(
                {
                    "fact": fact,
                    "subject": group["subject"],
                    "y": y,
                    "text_y": y + 19,
                    "x": x1,
                    "width": round(width, 1),
                    "current": end is None,
                    "state": state,
                    # The mark beside the words: only where the subject has held other values.
                    "mark": states.get(fact.id) if end is None else None,
                    "label": label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…",
                    "full_label": label,
                    "start": start,
                    "end": end,
                }
            )
            y += TIMELINE_ROW
    ticks = []
    for i in range(TIMELINE_TICKS):
        moment = first + (now - first) * (i / (TIMELINE_TICKS - 1))
        ticks.append(
            {"x": x(moment), "label": moment.strftime("%Y-%m-%d" if span < 90 * 86_400 else "%b %Y")}
        )
    return {
        "rows": rows,
        "height": y,
        "axis_y": y + 6,
        "tick_y": y + 26,
        "total_height": y + TIMELINE_AXIS,
        "ticks": ticks,
        "now_x": x(now),
        "left": left,
        "right": right,
        "first": first,
        "now": now,
        "width": TIMELINE_WIDTH,
    }


@workspace_page(policy.READ)
@require_GET
def changes(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    now = timezone.now()
    with workspace_context(workspace.id):
        conflicts = selectors.conflicts(workspace_id=workspace.id, limit=PAIR_LIMIT)
        replaced = selectors.replacements(workspace_id=workspace.id, limit=PAIR_LIMIT)
        duplicates = selectors.duplicates(workspace_id=workspace.id, limit=PAIR_LIMIT)
        facts = selectors.fact_timeline(workspace_id=workspace.id, limit=FACT_LIMIT)
        timeline = _timeline(workspace_id=workspace.id, groups=facts, now=now)
        recent = selectors.recent_memories(workspace_id=workspace.id, limit=RECENT_LIMIT)
    return page(
        request,
        "dashboard/changes.html",
        workspace,
        role,
        {
            "conflicts": conflicts,
            "replaced": replaced,
            "duplicates": duplicates,
            "can_resolve": policy.allows(role, policy.WRITE),
            "timeline": timeline,
            "recent": recent,
        },
        section="changes",
    )


# --- deciding which memory is current -----------------------------------------------------------------------

# What each button asks memories.supersession for: (action, current side, recorded rule).
RESOLUTIONS = {
    "keep_newer": ("supersedes", "newer", "dashboard:keep_newer"),
    "keep_older": ("supersedes", "older", "dashboard:keep_older"),
    "both_stand": ("not_conflict", "newer", "dashboard:both_stand"),
    "merge": ("supersedes", "newer", "dashboard:merge"),
    "undo": ("revert", "newer", "dashboard:undo"),
}
RESOLVED_MESSAGES = {
    "keep_newer": "The newer memory is current; the older one left search and context.",
    "keep_older": "The older memory is current; the newer one left search and context.",
    "both_stand": "Both memories stand: recorded as not in conflict.",
    "merge": "Merged: the newest memory stays, the duplicate left search and context.",
    "undo": "The decision on the pair was undone.",
}


@workspace_page(policy.WRITE)
@require_POST
def conflict_resolve(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """Keep newer / keep older / both stand on a conflict, merge a duplicate, or undo: the same decision as
    memories/resolve (memories.supersession), recorded as this person's."""
    choice = request.POST.get("resolution", "")
    ids = [selectors_memories.parse_memory_id(request.POST.get(name, "")) for name in ("newer", "older")]
    if choice not in RESOLUTIONS or None in ids or ids[0] == ids[1]:
        messages.error(request, "Choose a resolution for two memories of this workspace.")
        return redirect(reverse("dashboard-changes", args=[workspace.id]) + "#conflicts")
    action, current, rule = RESOLUTIONS[choice]
    newer_id, older_id = ids
    with workspace_context(workspace.id):
        # Live memories, superseded ones included (undo and keep older name one).
        found = selectors.memories_by_id(workspace_id=workspace.id, memory_ids=[i for i in ids if i])
        if len(found) != 2:
            messages.error(request, "One of the memories no longer exists.")
            return redirect(reverse("dashboard-changes", args=[workspace.id]) + "#conflicts")
        newer, older = found[newer_id], found[older_id]  # type: ignore[index]
        first, second = (newer, older) if current == "newer" else (older, newer)
        try:
            supersession.memory_resolve(
                workspace_id=workspace.id,
                scope=MemoryScope(user_id=first.user_id, project_id=first.project_id),
                memory_id=str(first.id),
                other_memory_id=str(second.id),
                action=action,
                actor=f"user:{request.user.pk}",
                rule=rule,
            )
        except ApiError as error:
            messages.error(request, f"{error.message} (both memories must belong to the same end user)")
            return redirect(reverse("dashboard-changes", args=[workspace.id]) + "#conflicts")
    messages.success(request, RESOLVED_MESSAGES[choice])
    return redirect(reverse("dashboard-changes", args=[workspace.id]) + "#conflicts")


# --- why did context/get return this ------------------------------------------------------------------------

STRATEGIES = ("auto", "lexical", "semantic", "hybrid")


def _trace_graph(
    data: dict[str, Any], node_ids: dict[str, int], labels: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    """The trace as nodes and edges for the page's canvas: the query, the baseline seeds it ranked, and for
    each memory graph expansion added, the node it came through and the seed it started from."""
    nodes: list[dict[str, Any]] = [{"id": "query", "label": data["query"] or "(no query)", "kind": "query"}]
    edges: list[dict[str, Any]] = []
    graph_ids = {str(m) for m in data["_graph_ids"]}
    for rank, memory in enumerate(data["memories"], start=1):
        kind = "expanded" if memory["id"] in graph_ids else "baseline"
        nodes.append(
            {
                "id": memory["id"],
                "label": f"{rank}. {memory['content'][:70]}",
                "title": f"{memory.get('type', '')}: {memory['content'][:400]}",
                "kind": kind,
                "nodeId": node_ids.get(memory["id"]),
            }
        )
        if kind == "baseline":
            edges.append({"source": "query", "target": memory["id"], "label": f"rank {rank}", "kind": "seed"})
            continue
        reason = memory.get("graph") or {}
        via = reason.get("linkedViaNode") or "graph"
        if not any(n["id"] == via for n in nodes):
            label, node_type = labels.get(via, (via.split(":", 1)[-1], via.split(":", 1)[0]))
            nodes.append({"id": via, "label": f"{label} ({node_type})", "kind": "via"})
        seed = reason.get("seedMemoryId")
        hop = {"source": seed, "target": via, "label": f"hop {reason.get('hopCount', 1)}", "kind": "hop"}
        if seed and any(n["id"] == seed for n in nodes) and hop not in edges:
            edges.append(hop)  # once per seed and node, however many memories came that way
        edges.append(
            {"source": via, "target": memory["id"], "label": reason.get("edgeType", ""), "kind": "hop"}
        )
    # Rules are in every answer of their scope: listed under the drawing, not drawn.
    return {"nodes": nodes, "edges": edges}


def _trace_explained(
    workspace_id: int, data: dict[str, Any]
) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, str]]]:
    """Per returned memory, what the table says instead of ids: the node it came through by its label and
    type, the seed memory by its words, and whether it was replaced or is the outdated side of a conflict."""
    refs = {
        (m.get("graph") or {}).get("linkedViaNode", "")
        for m in data["memories"]
        if (m.get("graph") or {}).get("linkedViaNode")
    }
    labels = graph.node_labels(workspace_id=workspace_id, refs=sorted(refs))
    returned = {m["id"]: m for m in data["memories"]}
    seed_ids = [
        (m.get("graph") or {}).get("seedMemoryId")
        for m in data["memories"]
        if (m.get("graph") or {}).get("seedMemoryId") not in returned
    ]
    seeds = selectors.memories_by_id(
        workspace_id=workspace_id, memory_ids=[u for u in (graph.uuid_or_none(s) for s in seed_ids) if u]
    )
    ids = [u for u in (graph.uuid_or_none(m["id"]) for m in data["memories"]) if u]
    flags = selectors.memory_flags(workspace_id=workspace_id, memory_ids=ids)
    explained: dict[str, dict[str, Any]] = {}
    for memory in data["memories"]:
        reason = memory.get("graph") or {}
        memory_flags = flags.get(graph.uuid_or_none(memory["id"]) or uuid.UUID(int=0), set())
        entry: dict[str, Any] = {
            "replaced": "replaced" in memory_flags,
            "state": "outdated"
            if "outdated" in memory_flags
            else "current"
            if "current" in memory_flags
            else None,
        }
        if reason:
            via = reason.get("linkedViaNode", "")
            entry["via_label"], entry["via_type"] = labels.get(
                via, (via.split(":", 1)[-1], via.split(":", 1)[0])
            )
            seed = reason.get("seedMemoryId", "")
            seed_memory = returned.get(seed)
            if seed_memory is not None:
                entry["seed_text"] = seed_memory["content"]
            else:
                found = seeds.get(graph.uuid_or_none(seed) or uuid.UUID(int=0))
                entry["seed_text"] = found.content if found is not None else "a memory no longer here"
        explained[memory["id"]] = entry
    return explained, labels


@workspace_page(policy.READ)
@require_GET
def trace(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """Run context/get as an agent with the given userId / projectId would (the same code, recorded like
    graph/trace) and show where each returned memory came from."""
    query = request.GET.get("q", "").strip()
    form = {
        "q": query,
        "user_id": request.GET.get("user_id", "").strip(),
        "project_id": request.GET.get("project_id", "").strip(),
        "strategy": request.GET.get("strategy", "hybrid"),
        "limit": request.GET.get("limit", "8"),
    }
    context: dict[str, Any] = {"form": form, "strategies": STRATEGIES, "result": None, "error": None}
    if query:
        try:
            # The SDK's request schema validates the dashboard's input: one validation path.
            payload = ContextIn.model_validate(
                {
                    "query": query,
                    "limit": int(form["limit"]) if form["limit"].isdigit() else form["limit"],
                    "strategy": form["strategy"] if form["strategy"] in STRATEGIES else None,
                    "graphDepth": 2,
                    "scope": {"userId": form["user_id"] or None, "projectId": form["project_id"] or None},
                }
            )
        except ValidationError as error:
            context["error"] = "; ".join(
                f"{'.'.join(str(p) for p in problem['loc'])}: {problem['msg']}" for problem in error.errors()
            )
        else:
            request_ = retrieval_context.ContextRequest(
                query=payload.query,
                limit=payload.limit,
                include_rules=payload.includeRules,
                strategy=payload.strategy,
                graph_depth=payload.graphDepth,
                graph_limit=payload.graphLimit,
                endpoint="graph/trace",
            )
            scope = MemoryScope(user_id=payload.scope.userId, project_id=payload.scope.projectId)
            try:
                with workspace_context(workspace.id):
                    data = retrieval_context.context_get(
                        workspace_id=workspace.id, scope=scope, request=request_
                    )
                    node_ids = graph.memory_nodes_for(
                        workspace_id=workspace.id,
                        memory_ids=[m["id"] for m in data["memories"]],
                    )
            except ApiError as error:
                context["error"] = error.message
            else:
                graph_ids = {str(m) for m in data["_graph_ids"]}
                with workspace_context(workspace.id):
                    explained, labels = _trace_explained(workspace.id, data)
                context["result"] = {
                    "trace": data["trace"],
                    "memories": [
                        {
                            **m,
                            "source": "graph expansion" if m["id"] in graph_ids else "baseline",
                            "rank": i,
                            **explained.get(m["id"], {}),
                        }
                        for i, m in enumerate(data["memories"], start=1)
                    ],
                    "rules": data["rules"],
                    "conflicts": data["conflicts"],
                    "facts": data["facts"],
                    "drawing": {
                        **_trace_graph(data, node_ids, labels),
                        "memoryBase": f"/w/{workspace.id}/memories/",
                    },
                    "context_text": data["context"],
                }
    return page(request, "dashboard/trace.html", workspace, role, context, section="trace")
