"""memories/search ranking: lexical (Postgres FTS), semantic (pgvector kNN in scope) and hybrid (reciprocal-rank
fusion, k = 60). Search keeps answering when embeddings are down: it falls back to lexical and says why
(memories-sh.md §4.1 / §4.6 reasons)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from memories import selectors, vectors
from memories.embeddings import get_embedder
from memories.models import Memory, PipelineJob
from memories.selectors import MemoryScope

logger = logging.getLogger("cairn.search")

RRF_K = 60
STRATEGY_ALIASES = {"baseline": "lexical", "hybrid_graph": "hybrid"}


@dataclass
class SearchOutcome:
    memories: list[Memory]
    requested: str
    applied: str
    lexical_candidates: int = 0
    semantic_candidates: int = 0
    fallback_reason: str | None = None
    fallback_triggered: bool = False
    scores: dict[uuid.UUID, float] = field(default_factory=dict)

    def trace(self) -> dict[str, Any]:
        return {
            "requestedStrategy": self.requested,
            "appliedStrategy": self.applied,
            "lexicalCandidates": self.lexical_candidates,
            "semanticCandidates": self.semantic_candidates,
            "fallbackTriggered": self.fallback_triggered,
            "fallbackReason": self.fallback_reason,
        }


def normalise_strategy(strategy: str | None) -> str:
    name = strategy or "lexical"
    return STRATEGY_ALIASES.get(name, name)


def embed_query(query: str) -> Any:
    """The query vector, or None when the embedder cannot answer now (not loaded yet, provider down)."""
    embedder = get_embedder()
    if hasattr(embedder, "ready") and not embedder.ready(load_in_background=True):
        return None
    try:
        return embedder.embed([query])[0]
    except Exception:  # noqa: BLE001 - search must answer anyway
        logger.warning("query embedding failed", exc_info=True)
        return None


def memory_search(
    *,
    workspace_id: int,
    scope: MemoryScope,
    query: str,
    type: str | None = None,
    layer: str | None = None,
    limit: int = 10,
    strategy: str | None = None,
    query_vector: Any = None,
    exclude_rules: bool = False,
    importance_weight: float = 0.0,
) -> SearchOutcome:
    """Rank memories for `query`. `query_vector` lets a caller ranking several tiers embed the query once.

    `importance_weight` > 0 re-orders the top `limit` by relevance (max-normalised) + weight · importance, as Zeph
    does after MMR: importance changes the order of what was found, never what is found."""
    outcome = _ranked(workspace_id=workspace_id, scope=scope, query=query, type=type, layer=layer, limit=limit,
                      strategy=strategy, query_vector=query_vector, exclude_rules=exclude_rules)
    if importance_weight > 0:
        outcome.memories = importance_rerank(memories=outcome.memories, scores=outcome.scores,
                                             weight=importance_weight)
    return outcome


def importance_rerank(*, memories: list[Memory], scores: dict[uuid.UUID, float], weight: float) -> list[Memory]:
    """Zeph: score = relevance / max relevance + weight · importance, then re-sort (ties keep their order).

    Lexical ranking has no score: its rank stands in, as a reciprocal-rank score (1 / (60 + rank))."""
    if weight <= 0 or len(memories) < 2:
        return memories
    relevance = {m.id: scores.get(m.id, 1.0 / (RRF_K + rank)) for rank, m in enumerate(memories, start=1)}
    top = max(relevance.values()) or 1.0
    blended = {m.id: relevance[m.id] / top + weight * float(m.importance) for m in memories}
    return sorted(memories, key=lambda m: -blended[m.id])


def _ranked(
    *,
    workspace_id: int,
    scope: MemoryScope,
    query: str,
    type: str | None,
    layer: str | None,
    limit: int,
    strategy: str | None,
    query_vector: Any,
    exclude_rules: bool,
) -> SearchOutcome:
    requested = normalise_strategy(strategy)
    depth = limit if requested == "lexical" else max(limit * 4, 40)
    lexical = selectors.memory_search_lexical(
        workspace_id=workspace_id, scope=scope, query=query, type=type, layer=layer, limit=depth
    )
    if exclude_rules:
        lexical = [memory for memory in lexical if memory.type != Memory.Type.RULE]
    outcome = SearchOutcome(memories=lexical[:limit], requested=requested, applied="lexical",
                            lexical_candidates=len(lexical))
    if requested == "lexical":
        return outcome

    def fall_back(reason: str) -> SearchOutcome:
        outcome.fallback_reason, outcome.fallback_triggered = reason, True
        return outcome

    if query_vector is None:
        query_vector = embed_query(query)
    if query_vector is None:
        return fall_back("query_embedding_unavailable")
    neighbours = vectors.nearest(
        workspace_id=workspace_id,
        model=settings.EMBEDDING_MODEL,
        query=query_vector,
        scope=vectors.VectorScope(user_id=scope.user_id, project_id=scope.project_id),
        limit=depth,
    )
    if not neighbours:
        return fall_back("vectors_unavailable")
    semantic = _load_in_order(workspace_id=workspace_id, scope=scope, ids=[mid for mid, _ in neighbours],
                              type=type, layer=layer)
    if exclude_rules:
        semantic = [memory for memory in semantic if memory.type != Memory.Type.RULE]
    outcome.semantic_candidates = len(semantic)
    cosine = dict(neighbours)
    partial = _has_unembedded_memories(workspace_id)

    if requested == "semantic" and not partial:
        outcome.memories, outcome.applied = semantic[:limit], "semantic"
        outcome.scores = {memory.id: cosine[memory.id] for memory in outcome.memories}
        return outcome

    fused = reciprocal_rank_fusion([lexical, semantic])
    if not fused:
        return fall_back("hybrid_fusion_empty")
    outcome.memories, outcome.applied = [memory for memory, _ in fused[:limit]], "hybrid"
    outcome.scores = {memory.id: score for memory, score in fused[:limit]}
    if partial:
        # Some memories have no vector yet: hybrid still finds them by their words.
        outcome.fallback_reason = "partial_vector_coverage"
        outcome.fallback_triggered = requested == "semantic"
    return outcome


def reciprocal_rank_fusion(rankings: list[list[Memory]], k: int = RRF_K) -> list[tuple[Memory, float]]:
    scores: dict[uuid.UUID, float] = {}
    by_id: dict[uuid.UUID, Memory] = {}
    for ranking in rankings:
        for rank, memory in enumerate(ranking, start=1):
            scores[memory.id] = scores.get(memory.id, 0.0) + 1.0 / (k + rank)
            by_id.setdefault(memory.id, memory)
    ordered = sorted(scores.items(), key=lambda item: (-item[1], -by_id[item[0]].created_at.timestamp()))
    return [(by_id[memory_id], score) for memory_id, score in ordered]


def _load_in_order(
    *, workspace_id: int, scope: MemoryScope, ids: list[uuid.UUID], type: str | None, layer: str | None
) -> list[Memory]:
    queryset = selectors.memories_readable(workspace_id=workspace_id, scope=scope).filter(pk__in=ids)
    if type:
        queryset = queryset.filter(type=type)
    if layer:
        queryset = queryset.filter(layer=layer)
    found = {memory.id: memory for memory in queryset}
    return [found[memory_id] for memory_id in ids if memory_id in found]


def _has_unembedded_memories(workspace_id: int) -> bool:
    return PipelineJob.objects.filter(
        workspace_id=workspace_id, kind="embed", status__in=["queued", "processing", "dead_letter"]
    ).exists()
