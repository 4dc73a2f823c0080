"""An optional reranker for the final candidates: litellm's rerank API (Cohere, Voyage, Jina, or a self-hosted
Text-Embeddings-Inference / Infinity server through RERANK_API_BASE).

Off unless the operator sets RERANK_MODEL; requests never choose it. The operator's key is always passed
explicitly (never litellm's fallback to credentials in the environment). A reranker that is slow
(RERANK_TIMEOUT_SECONDS) or fails leaves the fused order as it was, and the trace says so. Of the multi-hop
evidence hybrid misses on the LoCoMo dev split most is already among its candidates, ranked too low: a
cross-encoder reads query and memory together, which neither BM25 nor a sentence vector does.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from config import tracing
from graphsvc.llm import scrubbed
from memories.models import Memory
from retrieval.embeddings import NO_KEY

logger = logging.getLogger("cairn.rerank")

# A document is a memory's text, cut: rerank models read a few hundred tokens, and a provider bills by size.
MAX_DOCUMENT_CHARS = 2000
MAX_QUERY_CHARS = 500


@dataclass
class Reranked:
    """What the reranker did: its scores (0–1 for the usual models) by memory, and the trace."""

    scores: dict[uuid.UUID, float] = field(default_factory=dict)
    ran: bool = False
    candidates: int = 0
    duration_ms: float = 0.0
    fallback_reason: str | None = None  # rerank_timeout | rerank_error | rerank_invalid_answer

    def trace(self) -> dict[str, Any] | None:
        if not settings.RERANK_MODEL:
            return None
        return {
            "model": settings.RERANK_MODEL,
            "ran": self.ran,
            "candidates": self.candidates,
            "durationMs": round(self.duration_ms, 2),
            "fallbackReason": self.fallback_reason,
        }


def rerank_enabled() -> bool:
    return bool(settings.RERANK_MODEL)


def rerank_scores(*, query: str, memories: list[Memory], max_candidates: int | None = None) -> Reranked:
    """The reranker's relevance of each memory to `query` (one call for all of them), or an empty result with
    the reason when it could not answer in time. Unique memories only; at most `max_candidates`
    (RERANK_CANDIDATES)."""
    cap = max_candidates or settings.RERANK_CANDIDATES
    unique = list({memory.id: memory for memory in memories}.values())[:cap]
    outcome = Reranked(candidates=len(unique))
    if not rerank_enabled() or len(unique) < 2:
        return outcome
    import litellm

    started = time.perf_counter()
    try:
        with tracing.llm_span("rerank", model=settings.RERANK_MODEL, count=len(unique)):
            response = litellm.rerank(
                model=settings.RERANK_MODEL,
                # Scrubbed as every LLM prompt is (graphsvc.llm.scrubbed): the reranker is a service outside
                # the server, and a key in a memory must not leave it, however the model treats the text.
                query=scrubbed(query, limit=MAX_QUERY_CHARS),
                documents=[scrubbed(memory.content, limit=MAX_DOCUMENT_CHARS) for memory in unique],
                top_n=len(unique),
                api_base=settings.RERANK_API_BASE or None,
                # Always the operator's key, never litellm's fallback to the environment's ("" counts as
                # absent).
                api_key=settings.RERANK_API_KEY or NO_KEY,
                timeout=settings.RERANK_TIMEOUT_SECONDS,
            )
        results = _results(response, count=len(unique))
    except Exception as error:  # noqa: BLE001 - the reranker is an addition; the fused order stands without it
        outcome.duration_ms = (time.perf_counter() - started) * 1000
        outcome.fallback_reason = "rerank_timeout" if _is_timeout(error) else "rerank_error"
        logger.warning("rerank failed (%s); the fused order stands", outcome.fallback_reason, exc_info=True)
        return outcome
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    if results is None:
        outcome.fallback_reason = "rerank_invalid_answer"
        logger.warning("rerank answered something other than one score per document; the fused order stands")
        return outcome
    outcome.ran = True
    outcome.scores = {unique[index].id: score for index, score in results.items()}
    return outcome


def _results(response: Any, *, count: int) -> dict[int, float] | None:
    """index → score from litellm's RerankResponse, or None unless every index is a document's and every
    score a finite number."""
    found: dict[int, float] = {}
    for item in getattr(response, "results", None) or []:
        index = item.get("index") if isinstance(item, dict) else getattr(item, "index", None)
        score = (
            item.get("relevance_score") if isinstance(item, dict) else getattr(item, "relevance_score", None)
        )
        if not isinstance(index, int) or not 0 <= index < count or index in found:
            return None
        if not isinstance(score, int | float) or not math.isfinite(score):
            return None
        found[index] = float(score)
    return found or None


def _is_timeout(error: BaseException) -> bool:
    import litellm

    return isinstance(error, litellm.Timeout | TimeoutError) or "timeout" in type(error).__name__.lower()


def reranked_order(
    memories: list[Memory], scores: dict[uuid.UUID, float], reranked: dict[uuid.UUID, float]
) -> tuple[list[Memory], dict[uuid.UUID, float]]:
    """The candidates the reranker scored, best first by its score, then the others in their order; the
    scores that decay and MMR then work with: the reranker's, and for the others a fraction of the lowest of
    them that keeps their order."""
    if not reranked:
        return memories, scores
    head = sorted((m for m in memories if m.id in reranked), key=lambda m: -reranked[m.id])
    tail = [m for m in memories if m.id not in reranked]
    floor = min(reranked.values())
    new_scores = {m.id: reranked[m.id] for m in head}
    for position, memory in enumerate(tail, start=1):
        new_scores[memory.id] = floor - abs(floor) * 0.01 * position - 1e-6 * position
    return head + tail, new_scores
