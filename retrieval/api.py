"""SDK routes that read: memories/search, context/get and graph/trace (thin: resolve the workspace, open its
RLS transaction, rank or assemble)."""

from __future__ import annotations

import functools
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router
from pydantic import TypeAdapter

from config import tracing
from config.errors import envelope_response, envelope_response_spliced, success_envelope
from config.schemas import Envelope
from memories.selectors import memory_scope
from retrieval import context, search
from retrieval.schemas import (
    ContextIn,
    ContextMemoryOut,
    ContextOut,
    SearchIn,
    SearchOut,
    TraceIn,
    TraceOut,
)
from tenancy.access import request_workspace_id
from tenancy.auth import SdkKeyAuth
from tenancy.policy import READ, requires
from tenancy.rls import workspace_context

router = Router(tags=["memories"], auth=SdkKeyAuth())


@router.post("/memories/search", response=Envelope[SearchOut], summary="Search memories")
@requires(READ)
def memories_search(request: HttpRequest, payload: SearchIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    scope = memory_scope(payload.scope, include_superseded=payload.includeSuperseded)
    with workspace_context(workspace_id):
        answer = search.memory_search_answer(workspace_id=workspace_id, scope=scope, body=payload)
    return success_envelope(request, answer)


@router.post(
    "/context/get",
    response=Envelope[ContextOut],
    tags=["context"],
    summary="The memories (and rules, conflicts) to put in front of the next model call",
    description="Rules, then working and long-term tiers ranked by the strategy; with hybrid and the "
    "workspace's rollout in canary, graph expansion appends memories reached through the graph, each with "
    "its provenance in `graph`. Every call records one retrieval metric for the rollout quality gate.",
)
@requires(READ)
def context_get(request: HttpRequest, payload: ContextIn) -> HttpResponse:
    with tracing.span("context.scope") as span:
        workspace_id = request_workspace_id(request, payload.scope)
        scope = memory_scope(payload.scope)
        tracing.span_set(span, {"cairn.workspace_id": workspace_id})
    with workspace_context(workspace_id):
        asked = context.context_request_from(payload, endpoint="context/get")
        data = context.context_get(workspace_id=workspace_id, scope=scope, request=asked)
    data.pop("_graph_ids")
    data.pop("_tiers")
    rules: context.Rules = data.pop("_rules")
    with tracing.span("context.answer"):
        if rules.rendered is None:
            rules.rendered = _rules_rendered(rules)
        return envelope_response_spliced(
            request, data, ContextOut, field="rules", rendered=rules.rendered, before="memories"
        )


@functools.cache
def _rules_adapter() -> TypeAdapter[list[ContextMemoryOut]]:
    return TypeAdapter(list[ContextMemoryOut])


@functools.cache
def _rule_adapter() -> TypeAdapter[ContextMemoryOut]:
    return TypeAdapter(ContextMemoryOut)


def _rules_rendered(rules: context.Rules) -> bytes:
    """The rules as JSON: a whole cached list at once; a query's selection (context.rules_for_query) from
    its list's rules, each serialised once per cached list."""
    parent, indexes = rules.parent, rules.indexes
    if parent is None or indexes is None:
        adapter = _rules_adapter()
        return adapter.dump_json(adapter.validate_python(rules.payloads))
    if parent.pieces is None:
        one = _rule_adapter()
        parent.pieces = [one.dump_json(one.validate_python(payload)) for payload in parent.payloads]
    return b"[" + b",".join(parent.pieces[index] for index in indexes) + b"]"


@router.post(
    "/graph/trace",
    response=Envelope[TraceOut],
    tags=["graph"],
    summary="context/get with a per-memory account of where each result came from",
)
@requires(READ)
def graph_trace(request: HttpRequest, payload: TraceIn) -> HttpResponse:
    workspace_id = request_workspace_id(request, payload.scope)
    scope = memory_scope(payload.scope)
    with workspace_context(workspace_id):
        asked = context.context_request_from(payload, endpoint="graph/trace")
        data = context.context_get(workspace_id=workspace_id, scope=scope, request=asked)
    graph_ids = {str(memory_id) for memory_id in data["_graph_ids"]}
    recall = [
        {
            "rank": rank,
            "memoryId": memory["id"],
            "layer": memory["layer"],
            "type": memory["type"],
            "scope": memory["scope"],
            "projectId": memory["projectId"],
            "source": "graph_expansion" if memory["id"] in graph_ids else "baseline",
            "graph": memory.get("graph"),
        }
        for rank, memory in enumerate(data["memories"], start=1)
    ]
    return envelope_response(
        request,
        {
            "mode": data["mode"],
            "includeRules": payload.includeRules,
            "query": data["query"],
            "strategy": {
                "requested": data["trace"]["requestedStrategy"],
                "applied": data["trace"]["strategy"],
            },
            "trace": data["trace"],
            "tiers": data["_tiers"],
            "recall": recall,
            "rules": data["rules"],
            "memories": data["memories"],
        },
        TraceOut,
    )
