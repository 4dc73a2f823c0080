"""memories/search ranking: lexical (BM25 over Postgres lexemes), semantic (pgvector kNN in scope) and hybrid
(score fusion of the two, then the conversation rules: lifts from a turn's session neighbours, speakers and
questions, which apply to conversation turns only). Search keeps answering when embeddings are
down: it falls back to lexical and says why (the trace's fallbackReason)."""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
from django.conf import settings
from django.db import connections
from django.utils import timezone

from config import tracing
from memories import selectors
from memories.models import Memory
from memories.selectors import MemoryScope
from retrieval import lexical as lexical_search
from retrieval import rerank, temporal, vectors
from retrieval.embeddings import embed_query

if TYPE_CHECKING:
    from retrieval.schemas import SearchIn

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
    # The query's time window (temporal.TimeWindow.trace, with how many results fall in it), or None.
    time_window: dict[str, Any] | None = None
    reranker: dict[str, Any] | None = None  # rerank.Reranked.trace(): None while no reranker is configured
    # The vector side's candidates' vectors when asked for (MMR); None when it did not run or was not asked.
    vectors: dict[uuid.UUID, np.ndarray] | None = None

    def trace(self) -> dict[str, Any]:
        return {
            "requestedStrategy": self.requested,
            "appliedStrategy": self.applied,
            "lexicalCandidates": self.lexical_candidates,
            "semanticCandidates": self.semantic_candidates,
            "fallbackTriggered": self.fallback_triggered,
            "fallbackReason": self.fallback_reason,
            "timeWindow": self.time_window,
            "reranker": self.reranker,
        }


def normalise_strategy(strategy: str | None) -> str:
    """The strategy asked for, aliases mapped; none asked for means hybrid (the default of memories/search and
    of context/get's baseline)."""
    name = strategy or DEFAULT_STRATEGY
    return STRATEGY_ALIASES.get(name, name)


# Hybrid ranks well ahead of lexical on LoCoMo (bench/results/locomo-*.json, in-sample and cross-validated),
# so it is what a caller gets without asking; a workspace without vectors of the current model answers
# lexically and says so (fallbackReason vectors_unavailable) without embedding the query.
DEFAULT_STRATEGY = "hybrid"
# The newer of two near-duplicates takes the older's place only when it answers nearly as well (this share of
# the older's relevance): in a conversation, alike turns are rarely the same statement restated.
DUPLICATE_RELEVANCE_RATIO = 0.8
# How many of the ranked candidates decay and MMR choose the results from, per result wanted.
REORDER_POOL_FACTOR = 4


def memory_search(
    *,
    workspace_id: int,
    scope: MemoryScope,
    query: str,
    type: str | None = None,
    layer: str | None = None,
    limit: int = 10,
    strategy: str | None = None,
    exclude_rules: bool = False,
    importance_weight: float = 0.0,
    half_life_days: float = 0.0,
    mmr_lambda: float = 1.0,
    now: datetime | None = None,
) -> SearchOutcome:
    """Rank memories for `query`; `strategy` None is the default (DEFAULT_STRATEGY). A time expression in the
    query ("last week", "in May 2023", "before the migration") leaves the text and becomes a window on the
    memory's time (TimedQuery); relative ones count from `now` (default: the current time).

    With temporal decay (`half_life_days` > 0) or diversity (`mmr_lambda` < 1), the results are chosen from
    the best REORDER_POOL_FACTOR × `limit` candidates (decay_and_diversify). `importance_weight` > 0 then
    re-orders them by relevance (max-normalised) + weight · importance, as Zeph does after MMR: importance
    changes the order of what was found, never what is found."""
    reorders = half_life_days > 0 or mmr_lambda < 1
    reranking = rerank.rerank_enabled()
    keep = limit * REORDER_POOL_FACTOR if reorders else limit
    outcome = _ranked(
        workspace_id=workspace_id,
        scope=scope,
        query=query,
        type=type,
        layer=layer,
        limit=limit,
        keep=max(keep, settings.RERANK_CANDIDATES) if reranking else keep,
        strategy=strategy,
        exclude_rules=exclude_rules,
        now=now or timezone.now(),
        with_vectors=mmr_lambda < 1,
    )
    if reranking:
        reranked = rerank.rerank_scores(query=query, memories=outcome.memories)
        outcome.memories, outcome.scores = rerank.reranked_order(
            outcome.memories, outcome.scores, reranked.scores
        )
        outcome.reranker = reranked.trace()
    if reorders:
        outcome.memories = decay_and_diversify(
            workspace_id=workspace_id,
            memories=outcome.memories,
            scores=outcome.scores,
            limit=limit,
            half_life_days=half_life_days,
            mmr_lambda=mmr_lambda,
            now=now,
            stored=outcome.vectors,
            decayed=outcome.scores,
        )
    outcome.memories = outcome.memories[:limit]
    count_in_window(outcome)
    if importance_weight > 0:
        outcome.memories = importance_rerank(
            memories=outcome.memories, scores=outcome.scores, weight=importance_weight
        )
    outcome.memories = successors_first(outcome.memories)
    return outcome


@dataclass(frozen=True)
class RankingOptions:
    importance_weight: float
    half_life_days: float
    mmr_lambda: float


def ranking_options(
    *,
    workspace_id: int,
    importance_weight: float | None,
    half_life_days: float | None,
    mmr_lambda: float | None,
) -> RankingOptions:
    """memory_search's importance_weight, half_life_days and mmr_lambda: a request's values, else the
    workspace's settings (memories/settings, cached per process), else the server defaults. The same for the
    SDK route and the MCP tool."""
    workspace = selectors.memory_settings_cached(workspace_id=workspace_id)
    return RankingOptions(
        importance_weight=workspace.importance_weight if importance_weight is None else importance_weight,
        half_life_days=workspace.half_life_days if half_life_days is None else half_life_days,
        mmr_lambda=workspace.mmr_lambda if mmr_lambda is None else mmr_lambda,
    )


def importance_rerank(
    *, memories: list[Memory], scores: dict[uuid.UUID, float], weight: float
) -> list[Memory]:
    """Zeph: score = relevance / max relevance + weight · importance, then re-sort (ties keep their order).

    Lexical ranking has no score: its rank stands in, as a reciprocal-rank score (1 / (60 + rank))."""
    if weight <= 0 or len(memories) < 2:
        return memories
    relevance = {m.id: scores.get(m.id, 1.0 / (RRF_K + rank)) for rank, m in enumerate(memories, start=1)}
    top = max(relevance.values()) or 1.0
    blended = {m.id: relevance[m.id] / top + weight * float(m.importance) for m in memories}
    return sorted(memories, key=lambda m: -blended[m.id])


def _relevance(memory: Memory, rank: int, scores: dict[uuid.UUID, float]) -> float:
    """A candidate's relevance: its fused or cosine score; for a lexical ranking its BM25 score (the gap
    between a memory holding every rare word and one holding one of them is what decay must weigh against
    age); 1 / (60 + rank) where there is neither (substring matches)."""
    score = scores.get(memory.id)
    if score is not None:
        return score
    bm25 = float(getattr(memory, "lexical_rank", 0.0) or 0.0)
    return bm25 if bm25 > 0 else 1.0 / (RRF_K + rank)


def candidate_vectors(
    *, workspace_id: int, memories: list[Memory], known: dict[uuid.UUID, np.ndarray] | None
) -> dict[uuid.UUID, np.ndarray]:
    """The vectors of `memories` for MMR: those `known` (the vector search's neighbours), and the rest read in
    one statement, only when some are missing (candidates only BM25 found). Counting those as unlike every
    other candidate was measured wrong: in a conversation every turn is somewhat like the others (MiniLM
    cosine 0.3–0.6), so a similarity of 0 lifted weak lexical-only candidates over the evidence (LoCoMo dev
    R@20 0.873 → 0.794)."""
    found = dict(known or {})
    missing = [memory.id for memory in memories if memory.id not in found]
    if missing:
        model = settings.EMBEDDING_MODEL
        found.update(vectors.stored_vectors(workspace_id=workspace_id, memory_ids=missing, model=model))
    return found


def decay_and_diversify(
    *,
    workspace_id: int,
    memories: list[Memory],
    scores: dict[uuid.UUID, float],
    limit: int,
    half_life_days: float,
    mmr_lambda: float,
    now: datetime | None = None,
    stored: dict[uuid.UUID, np.ndarray] | None = None,
    decayed: dict[uuid.UUID, float] | None = None,
) -> list[Memory]:
    """The best `limit` of ranked candidates after temporal decay and MMR (maximal marginal relevance).

    `decayed`, when given, receives each candidate's relevance after decay: the importance re-sort that
    follows must weigh what decay weighed, or an old memory's raw score undoes its decay. Among
    near-duplicates (cosine ≥ SEARCH_DUPLICATE_SIMILARITY) the newer one takes the better place before MMR
    picks: MMR then keeps the newer and lets the older yield its slot (newer_of_duplicates_first).

    Decay multiplies a memory's relevance by floor + (1 − floor) · 2^(−age / half-life), the age taken from
    the memory's time (temporal.memory_time: a session time in its metadata, else createdAt) and floor =
    SEARCH_DECAY_FLOOR. Between equals the newer wins; an old memory keeps at least `floor` of its score,
    because a year-old decision is often still the one in force (a plain exponential over 30 days would
    bury it under any newer candidate). Then MMR picks one memory at a time by λ · relevance / best −
    (1 − λ) · its highest cosine to those already picked, so a near-duplicate yields its slot to a
    different memory; a memory without a vector counts as unlike the others. Relevance: _relevance.
    `stored`: the vectors the caller read already (the vector search returns its neighbours'); the others'
    are read here (candidate_vectors)."""
    if not memories:
        return memories
    relevance = {m.id: _relevance(m, rank, scores) for rank, m in enumerate(memories, start=1)}
    if half_life_days > 0:
        moment = now or timezone.now()
        floor = settings.SEARCH_DECAY_FLOOR
        for memory in memories:
            age_days = max(0.0, (moment - temporal.memory_time(memory)).total_seconds() / 86400)
            relevance[memory.id] *= floor + (1 - floor) * math.pow(2.0, -age_days / half_life_days)
    ordered = sorted(memories, key=lambda m: -relevance[m.id])  # stable: ties keep the ranking's order
    if mmr_lambda >= 1 or len(ordered) <= 1:
        if decayed is not None:
            decayed.update(relevance)
        return ordered[:limit]
    stored = candidate_vectors(workspace_id=workspace_id, memories=ordered, known=stored)
    dimension = next((len(v) for v in stored.values()), 0)
    matrix = np.zeros((len(ordered), dimension), dtype=np.float32)
    for index, memory in enumerate(ordered):
        vector = stored.get(memory.id)
        if vector is not None and len(vector) == dimension:
            matrix[index] = vector
    similarity = matrix @ matrix.T
    permutation = newer_of_duplicates_first(ordered, similarity=similarity, relevance=relevance)
    if permutation is not None:
        ordered = [ordered[index] for index in permutation]
        similarity = similarity[np.ix_(permutation, permutation)]
    if decayed is not None:
        decayed.update(relevance)
    top = max(relevance.values()) or 1.0
    gain = np.asarray([mmr_lambda * relevance[m.id] / top for m in ordered])
    closest = np.zeros(len(ordered))
    available = np.ones(len(ordered), dtype=bool)
    picked: list[Memory] = []
    while len(picked) < min(limit, len(ordered)):
        value = np.where(available, gain - (1 - mmr_lambda) * closest, -np.inf)
        best = int(np.argmax(value))  # the first of equals: the ranking's order breaks ties
        picked.append(ordered[best])
        available[best] = False
        closest = np.maximum(closest, similarity[best])
    return picked


def newer_of_duplicates_first(
    ordered: list[Memory], *, similarity: np.ndarray, relevance: dict[uuid.UUID, float]
) -> list[int] | None:
    """The order (indexes into `ordered`) in which each near-duplicate pair (cosine ≥
    SEARCH_DUPLICATE_SIMILARITY) has its newer memory first: the two swap places and relevance. An update
    often repeats most of what it changes ("deploys moved from Friday to Tuesday"), so the older one matches
    the query as well or better, and MMR would keep it and drop the correction as its duplicate. None when
    nothing moves."""
    threshold = settings.SEARCH_DUPLICATE_SIMILARITY
    if threshold >= 1 or len(ordered) < 2:
        return None
    pairs = np.argwhere(np.triu(similarity >= threshold, k=1))
    if not len(pairs):
        return None
    order = list(range(len(ordered)))
    position = list(range(len(ordered)))  # position[index]: where ordered[index] stands now
    moved = False
    for first, second in pairs.tolist():
        a, b = (first, second) if position[first] < position[second] else (second, first)
        upper, lower = ordered[a], ordered[b]
        if (lower.created_at, str(lower.id)) <= (upper.created_at, str(upper.id)):
            continue
        if relevance[lower.id] < DUPLICATE_RELEVANCE_RATIO * relevance[upper.id]:
            continue  # the newer one is a weaker answer, not the same one restated
        order[position[a]], order[position[b]] = b, a
        position[a], position[b] = position[b], position[a]
        relevance[upper.id], relevance[lower.id] = relevance[lower.id], relevance[upper.id]
        moved = True
    return order if moved else None


def successors_first(memories: list[Memory]) -> list[Memory]:
    """The ranking with every superseded memory moved right after its successor when the successor is in it
    and ranked lower (only reads with includeSuperseded see superseded memories at all): what is current
    always comes first. Chains keep their order (c, then b it replaced, then a that b replaced)."""
    if not any(m.superseded_by is not None for m in memories):
        return memories
    present = {m.id for m in memories}
    waiting: dict[uuid.UUID, list[Memory]] = {}
    emitted: set[uuid.UUID] = set()
    result: list[Memory] = []

    def emit(memory: Memory) -> None:
        result.append(memory)
        emitted.add(memory.id)
        for follower in waiting.pop(memory.id, []):
            emit(follower)

    for memory in memories:
        successor = memory.superseded_by
        if (
            successor is not None
            and successor in present
            and successor not in emitted
            and successor != memory.id
        ):
            waiting.setdefault(successor, []).append(memory)
            continue
        emit(memory)
    for followers in waiting.values():  # a cycle of supersessions: keep what is left in its order
        for memory in followers:
            if memory.id not in emitted:
                emit(memory)
    return result


@dataclass(frozen=True)
class TierQuery:
    """One tier of context/get: its layer, how many memories it ranks, whether rules are left out, and how
    many of the ranked candidates it keeps for decay and MMR to choose from (at least `limit`)."""

    layer: str
    limit: int
    exclude_rules: bool
    keep: int = 0


def memory_search_tiers(
    *,
    workspace_id: int,
    scope: MemoryScope,
    query: str,
    tiers: list[TierQuery],
    strategy: str | None,
    now: datetime | None = None,
    with_vectors: bool = False,
) -> list[SearchOutcome]:
    """memory_search(layer=…) for each tier, ranked exactly as one call per tier would rank it, from
    candidates fetched once: one BM25 statement for all layers, one vector search, one load of the vector
    candidates and one check for unembedded memories, instead of one of each per tier."""
    requested = normalise_strategy(strategy)
    timed, in_window = TimedQuery.of(
        workspace_id=workspace_id, scope=scope, query=query, now=now or timezone.now()
    ).with_candidates(
        workspace_id=workspace_id, scope=scope, type=None, layers=[tier.layer for tier in tiers]
    )
    query = timed.text
    vectorless = _default_without_vectors(workspace_id, strategy)
    depths = {
        tier.layer: _depth("lexical" if vectorless else requested, tier.limit, _keep(tier)) for tier in tiers
    }
    with tracing.span("context.lexical") as span:
        lexical = lexical_search.memory_search_lexical_layers(
            workspace_id=workspace_id, scope=scope, query=query, depths=depths
        )
        tracing.span_set(span, {"cairn.candidates": sum(len(found) for found in lexical.values())})
    semantic: Candidates | None = None
    if vectorless:
        semantic = Candidates([], [], False, {})
    elif requested != "lexical":
        with tracing.span("context.vectors") as span:
            query_vector = _vector_for(query=query, requested=requested, lexical=_flatten(lexical.values()))
            semantic = _semantic_candidates(
                workspace_id=workspace_id,
                scope=scope,
                query_vector=query_vector,
                depths=depths,
                with_vectors=with_vectors,
            )
            tracing.span_set(span, {"cairn.candidates": len(semantic.neighbours or ())})
    with tracing.span("context.fusion", {"cairn.strategy": requested}):
        return _ranked_tiers(
            workspace_id=workspace_id,
            scope=scope,
            query=query,
            requested=requested,
            tiers=tiers,
            lexical=lexical,
            semantic=semantic,
            timed=timed,
            in_window=in_window,
        )


def _ranked_tiers(
    *,
    workspace_id: int,
    scope: MemoryScope,
    query: str,
    requested: str,
    tiers: list[TierQuery],
    lexical: dict[str, list[Memory]],
    semantic: Candidates | None,
    timed: TimedQuery,
    in_window: list[Memory],
) -> list[SearchOutcome]:
    return [
        _rank(
            workspace_id=workspace_id,
            scope=scope,
            query=query,
            requested=requested,
            limit=tier.limit,
            keep=_keep(tier),
            type=None,
            layer=tier.layer,
            lexical=lexical[tier.layer],
            semantic=semantic,
            exclude_rules=tier.exclude_rules,
            timed=timed,
            in_window=in_window,
        )
        for tier in tiers
    ]


def _keep(tier: TierQuery) -> int:
    return max(tier.keep, tier.limit)


def _default_without_vectors(workspace_id: int, strategy: str | None) -> bool:
    """Whether a request that named no strategy goes lexical at once: the workspace has no vector of the
    current model, so the vector side could find nothing and the query need not be embedded."""
    return strategy is None and not vectors.workspace_has_vectors(
        workspace_id=workspace_id, model=settings.EMBEDDING_MODEL
    )


def _flatten(groups: Any) -> list[Memory]:
    return [memory for group in groups for memory in group]


def _vector_for(*, query: str, requested: str, lexical: list[Memory]) -> Any:
    """The vector the semantic side searches with: the query's, or for hybrid the query's without the names of
    the speakers it names (query_without_speakers). embed_query caches either per process."""
    if requested == "hybrid" and settings.SEARCH_EMBED_WITHOUT_SPEAKERS:
        return embed_query(query_without_speakers(query, speakers=named_speakers(query, lexical)))
    return embed_query(query)


@dataclass
class Candidates:
    """What the vector side found: (memory id, cosine) best first, the memories loaded in that order (every
    layer asked for), and whether some memories still wait for their vector. `neighbours` is None when the
    query could not be embedded."""

    neighbours: list[tuple[uuid.UUID, float]] | None
    memories: list[Memory]
    partial: bool
    # The neighbours' stored vectors, when asked for (MMR): read by the vector search itself.
    vectors: dict[uuid.UUID, np.ndarray] | None = None


def _depth(requested: str, limit: int, keep: int) -> int:
    """Candidates each side fetches: hybrid and semantic max(4 × limit, 40) (and at least what is kept)."""
    return keep if requested == "lexical" else max(limit * 4, 40, keep)


def _semantic_candidates(
    *,
    workspace_id: int,
    scope: MemoryScope,
    query_vector: Any,
    depths: dict[str, int] | dict[str | None, int],  # layer → depth; the layer None: every layer
    type: str | None = None,
    with_vectors: bool = False,
) -> Candidates:
    if query_vector is None:
        return Candidates(None, [], False)
    statement = vectors.nearest_statement(
        workspace_id=workspace_id,
        model=settings.EMBEDDING_MODEL,
        query=query_vector,
        scope=vectors.VectorScope(
            user_id=scope.user_id, project_id=scope.project_id, workspace_wide=scope.workspace_wide
        ),
        limit=max(depths.values()),
        with_vectors=with_vectors,
    )
    layers = [layer for layer in depths if layer]
    neighbours, memories, found_vectors = _nearest_loaded(
        workspace_id=workspace_id,
        scope=scope,
        statement=statement,
        type=type,
        layers=layers,
        with_vectors=with_vectors,
    )
    if not neighbours:
        return Candidates([], [], False, found_vectors)
    # The load answers the unembedded-memories question on every row (an uncorrelated EXISTS, evaluated once);
    # only when it loaded nothing does that take a query of its own.
    partial = (
        cast(_NearestLoadedColumns, memories[0]).embed_pending
        if memories
        else _has_unembedded_memories(workspace_id)
    )
    return Candidates(neighbours, memories, partial, found_vectors)


# The vector search and the load of the memories it found, in one round trip: every neighbour comes back (its
# id and similarity, for the tiers' depths and the cosine scores), with its memory's columns when the caller
# may read it in the layers asked for (NULLs otherwise). The lookup is a LATERAL subquery with a LIMIT (which
# keeps the planner from turning it into a plain join) so that it is one primary-key probe per neighbour
# whatever the plan expects: a prepared generic plan does not know the search's LIMIT, expected thousands of
# neighbours, and joined them by hashing the workspace's memories instead (79-94 ms instead of 4.5 on the 100k
# bench).
_NEAREST_LOADED_SQL = """
WITH near AS MATERIALIZED ({nearest})
SELECT {columns}, n.memory_id AS near_id, n.similarity AS near_similarity,
       EXISTS ({unembedded}) AS embed_pending{vector}
FROM near n LEFT JOIN LATERAL (
    SELECT {columns} FROM memories m WHERE m.id = n.memory_id AND {readable} {condition} LIMIT 1
) m ON true
ORDER BY n.distance, n.memory_id
"""


class _NearestLoadedColumns(Protocol):
    """The columns _NEAREST_LOADED_SQL selects after a memory's own (set as attributes by
    memories_from_sql)."""

    near_id: uuid.UUID
    near_similarity: float
    embed_pending: bool
    near_vector: bytes  # only when asked for: pgvector's binary form (vectors.vector_from_binary)


def _nearest_loaded(
    *,
    workspace_id: int,
    scope: MemoryScope,
    statement: vectors.NearestStatement,
    type: str | None,
    layers: list[str],
    with_vectors: bool = False,
) -> tuple[list[tuple[uuid.UUID, float]], list[Memory], dict[uuid.UUID, np.ndarray] | None]:
    """The neighbours (id, cosine) best first, the readable memories among them in that order, and (when
    asked for) every neighbour's vector."""
    params: dict[str, Any] = {**statement.params, "workspace_id": workspace_id}
    condition = ""
    if type:
        condition, params["type"] = condition + " AND m.type = %(type)s", type
    if layers:
        condition, params["layers"] = condition + " AND m.layer = ANY(%(layers)s::text[])", list(layers)
    sql = _NEAREST_LOADED_SQL.format(
        nearest=statement.sql,
        columns=selectors.MEMORY_COLUMNS,
        unembedded=_UNEMBEDDED_SQL,
        readable=selectors.readable_sql(scope, params),
        condition=condition,
        vector=", vector_send(n.embedding) AS near_vector" if with_vectors else "",
    )
    rows = selectors.memories_from_sql(sql, params, prepared=statement.prepared)
    columns = cast(list[_NearestLoadedColumns], rows)
    neighbours = [(column.near_id, float(column.near_similarity)) for column in columns]
    found = (
        {column.near_id: vectors.vector_from_binary(column.near_vector) for column in columns}
        if with_vectors
        else None
    )
    return neighbours, [row for row in rows if row.id is not None], found


def _ranked(
    *,
    workspace_id: int,
    scope: MemoryScope,
    query: str,
    type: str | None,
    layer: str | None,
    limit: int,
    keep: int,
    strategy: str | None,
    exclude_rules: bool,
    now: datetime,
    with_vectors: bool = False,
) -> SearchOutcome:
    requested = normalise_strategy(strategy)
    timed, in_window = TimedQuery.of(
        workspace_id=workspace_id, scope=scope, query=query, now=now
    ).with_candidates(workspace_id=workspace_id, scope=scope, type=type, layers=[layer] if layer else None)
    query = timed.text
    vectorless = _default_without_vectors(workspace_id, strategy)
    depth = _depth("lexical" if vectorless else requested, limit, keep)
    lexical = lexical_search.memory_search_lexical(
        workspace_id=workspace_id, scope=scope, query=query, type=type, layer=layer, limit=depth
    )
    semantic: Candidates | None = None
    if vectorless:
        semantic = Candidates([], [], False, {})
    elif requested != "lexical":
        query_vector = _vector_for(query=query, requested=requested, lexical=lexical)
        semantic = _semantic_candidates(
            workspace_id=workspace_id,
            scope=scope,
            query_vector=query_vector,
            depths={layer: depth},
            type=type,
            with_vectors=with_vectors,
        )
    return _rank(
        workspace_id=workspace_id,
        scope=scope,
        query=query,
        requested=requested,
        limit=limit,
        keep=keep,
        type=type,
        layer=layer,
        lexical=lexical,
        semantic=semantic,
        exclude_rules=exclude_rules,
        timed=timed,
        in_window=in_window,
    )


def _rank(
    *,
    workspace_id: int,
    scope: MemoryScope,
    query: str,
    requested: str,
    limit: int,
    keep: int,
    type: str | None,
    layer: str | None,
    lexical: list[Memory],
    semantic: Candidates | None,
    exclude_rules: bool,
    timed: TimedQuery | None = None,
    in_window: list[Memory] | None = None,
) -> SearchOutcome:
    """One ranking from fetched candidates, its best `keep` (≥ `limit`) in outcome.memories. With several
    tiers, `semantic` holds every tier's vector candidates: this tier takes the first `depth` neighbours, as a
    search with its own limit would have found them. With a time window (`timed`), the memories written in it
    (`in_window`) join the candidates and every candidate whose time falls in it gets
    SEARCH_TIME_WINDOW_BOOST (time_boost)."""
    lexical = lexical[: _depth(requested, limit, keep)]
    if exclude_rules:
        lexical = [memory for memory in lexical if memory.type != Memory.Type.RULE]
    window = timed.window if timed is not None else None
    extra = [
        memory
        for memory in in_window or []
        if (layer is None or memory.layer == layer)
        and not (exclude_rules and memory.type == Memory.Type.RULE)
    ]
    outcome = SearchOutcome(
        memories=lexical[:keep], requested=requested, applied="lexical", lexical_candidates=len(lexical)
    )
    if timed is not None:
        outcome.time_window = timed.trace()

    def lexical_outcome() -> SearchOutcome:
        if window is not None:
            # Relative to the best match, not min-max: with few candidates min-max puts the last at 0, and
            # a memory in the window that matched nearly as well would need the whole boost to catch up.
            bm25 = {m.id: float(getattr(m, "lexical_rank", 0.0) or 0.0) for m in lexical}
            top = max(bm25.values(), default=0.0) or 1.0
            scaled = {memory_id: value / top for memory_id, value in bm25.items()}
            boosted = time_boost([(m, scaled[m.id]) for m in lexical], window=window, extra=extra)
            outcome.memories = [memory for memory, _ in boosted[:keep]]
            outcome.scores = {memory.id: score for memory, score in boosted[:keep]}
        return outcome

    if semantic is None:
        return lexical_outcome()
    outcome.vectors = semantic.vectors

    def fall_back(reason: str) -> SearchOutcome:
        outcome.fallback_reason, outcome.fallback_triggered = reason, True
        return lexical_outcome()

    if semantic.neighbours is None:
        return fall_back("query_embedding_unavailable")
    if not semantic.neighbours:
        return fall_back("vectors_unavailable")
    in_depth = {mid for mid, _ in semantic.neighbours[: _depth(requested, limit, keep)]}
    semantic_memories = [
        m for m in semantic.memories if m.id in in_depth and (layer is None or m.layer == layer)
    ]
    if exclude_rules:
        semantic_memories = [memory for memory in semantic_memories if memory.type != Memory.Type.RULE]
    outcome.semantic_candidates = len(semantic_memories)
    cosine = dict(semantic.neighbours)
    partial = semantic.partial

    if requested == "semantic" and not partial:
        ranked = [(memory, cosine[memory.id]) for memory in semantic_memories]
        if window is not None:
            ranked = time_boost(ranked, window=window, extra=extra)
        outcome.memories, outcome.applied = [memory for memory, _ in ranked[:keep]], "semantic"
        outcome.scores = {memory.id: score for memory, score in ranked[:keep]}
        return outcome

    fused = hybrid_fusion(lexical=lexical, semantic=semantic_memories, cosine=cosine)
    fused = session_neighbour_lift(
        fused, workspace_id=workspace_id, scope=scope, type=type, layer=layer, exclude_rules=exclude_rules
    )
    fused = question_damping(fused)
    fused = speaker_boost(fused, query=query)
    if window is not None:
        fused = time_boost(fused, window=window, extra=extra)
    if not fused:
        return fall_back("hybrid_fusion_empty")
    outcome.memories, outcome.applied = [memory for memory, _ in fused[:keep]], "hybrid"
    outcome.scores = {memory.id: score for memory, score in fused[:keep]}
    if partial:
        # Some memories have no vector yet: hybrid still finds them by their words.
        outcome.fallback_reason = "partial_vector_coverage"
        outcome.fallback_triggered = requested == "semantic"
    return outcome


@dataclass(frozen=True)
class TimedQuery:
    """A query's text for the ranking and its time window (temporal.time_query), with the event of a "before
    the migration" window found: the best lexical match of its words, whose time bounds the window."""

    text: str
    window: temporal.TimeWindow | None
    expression: str | None = None  # what the query said, also when no window could be made of it
    anchor_id: uuid.UUID | None = None
    original: str = ""  # the query as asked
    # Why the window was applied (date, event) or not (indefinite_event, habitual_clause,
    # procedural_question, anchor_not_found): the trace says so.
    reason: str | None = None

    @classmethod
    def of(cls, *, workspace_id: int, scope: MemoryScope, query: str, now: datetime) -> TimedQuery:
        if settings.SEARCH_TIME_WINDOW_BOOST <= 0:
            return cls(query, None, original=query)
        parsed = temporal.time_query(query, now=now)
        window = parsed.window
        if window is None:
            if parsed.rejected is not None:
                expression, reason = parsed.rejected
                return cls(parsed.text, None, expression, original=query, reason=reason)
            return cls(parsed.text, None, original=query)
        if window.anchor_query is None:
            return cls(parsed.text, window, window.expression, original=query, reason="date")
        found = lexical_search.memory_search_lexical(
            workspace_id=workspace_id, scope=scope, query=window.anchor_query, type=None, layer=None, limit=1
        )
        if not found or not temporal.event_matches(window.anchor_query, found[0].content):
            # No memory tells of the event (a best match that misses its words is another event): no window.
            return cls(parsed.text, None, window.expression, original=query, reason="anchor_not_found")
        event = found[0]
        anchored = temporal.anchored(window, temporal.memory_time(event))
        return cls(parsed.text, anchored, window.expression, event.id, original=query, reason="event")

    def with_candidates(
        self, *, workspace_id: int, scope: MemoryScope, type: str | None, layers: list[str] | None
    ) -> tuple[TimedQuery, list[Memory]]:
        """The memories written in the window (candidates), and the query to rank with: when nothing was
        written in the window ("one year ago" in a workspace that began last month, a day with no memory),
        its words may be what the question is about, so the text keeps them (the boost still applies to
        memories whose metadata.sessionTime is in the window)."""
        found = self.candidates(workspace_id=workspace_id, scope=scope, type=type, layers=layers)
        if self.window is not None and not found and settings.SEARCH_TIME_WINDOW_CANDIDATES > 0:
            return dataclasses.replace(self, text=self.original or self.text), found
        return self, found

    def candidates(
        self, *, workspace_id: int, scope: MemoryScope, type: str | None, layers: list[str] | None
    ) -> list[Memory]:
        """The memories written in the window, newest first (SEARCH_TIME_WINDOW_CANDIDATES of them): they
        join the ranking even when the query's words and meaning miss them ("what did we decide
        yesterday")."""
        limit = settings.SEARCH_TIME_WINDOW_CANDIDATES
        if self.window is None or limit <= 0:
            return []
        return temporal.memories_in_window(
            workspace_id=workspace_id, scope=scope, window=self.window, type=type, layers=layers, limit=limit
        )

    def trace(self) -> dict[str, Any] | None:
        if self.window is None:
            if self.expression is None:
                return None
            return {
                "expression": self.expression,
                "start": None,
                "end": None,
                "anchorMemoryId": None,
                "applied": False,
                "reason": self.reason,
            }
        return {
            **self.window.trace(anchor_id=str(self.anchor_id) if self.anchor_id else None),
            "applied": True,
            "reason": self.reason,
        }


def time_boost(
    ranked: list[tuple[Memory, float]], *, window: temporal.TimeWindow, extra: list[Memory]
) -> list[tuple[Memory, float]]:
    """Add SEARCH_TIME_WINDOW_BOOST to the score of every candidate whose time (temporal.memory_time) falls in
    the window; `extra` (memories written in the window that the ranking did not find) join at 0 first.
    A boost rather than a filter: a memory written a little outside the window (the decision recorded the
    morning after) still ranks, only after those inside it."""
    boost = settings.SEARCH_TIME_WINDOW_BOOST
    scores = {memory.id: score for memory, score in ranked}
    by_id = {memory.id: memory for memory, _ in ranked}
    for memory in extra:
        if memory.id not in by_id:
            by_id[memory.id], scores[memory.id] = memory, 0.0
    for memory_id, memory in by_id.items():
        if window.contains(temporal.memory_time(memory)):
            scores[memory_id] += boost
    return _ordered(scores, by_id)


def count_in_window(outcome: SearchOutcome) -> None:
    """The trace's timeWindow.inWindow: how many of the results fall in the window."""
    if outcome.time_window is None:
        return
    start, end = outcome.time_window["start"], outcome.time_window["end"]
    window = temporal.TimeWindow(start, end, outcome.time_window["expression"])
    outcome.time_window["inWindow"] = (
        sum(1 for memory in outcome.memories if window.contains(temporal.memory_time(memory)))
        if start is not None or end is not None
        else 0
    )


def _min_max(values: dict[uuid.UUID, float]) -> dict[uuid.UUID, float]:
    """Scale one ranking's scores to 0–1 over its own candidates (a lone candidate gets 1)."""
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    if high - low < 1e-12:
        return dict.fromkeys(values, 1.0)
    return {key: (value - low) / (high - low) for key, value in values.items()}


def hybrid_fusion(
    *,
    lexical: list[Memory],
    semantic: list[Memory],
    cosine: dict[uuid.UUID, float],
    lexical_weight: float | None = None,
) -> list[tuple[Memory, float]]:
    """Weighted sum of the min-max-scaled BM25 and cosine scores of each side's candidates.

    Scores rather than ranks (RRF): BM25 knows when one memory holds the rare words and the rest do not, which
    ranks alone throw away. On LoCoMo dev, BM25 fused this way gave R@10 0.67 where RRF of the same rankings
    gave 0.60 (bench/README.md). A memory only one side found gets nothing from the other."""
    weight = settings.SEARCH_HYBRID_LEXICAL_WEIGHT if lexical_weight is None else lexical_weight
    lexical_scores = _min_max({m.id: float(getattr(m, "lexical_rank", 0.0) or 0.0) for m in lexical})
    semantic_scores = _min_max({m.id: float(cosine.get(m.id, 0.0)) for m in semantic})
    by_id: dict[uuid.UUID, Memory] = {m.id: m for m in semantic}
    by_id.update({m.id: m for m in lexical})
    scores = {
        memory_id: weight * lexical_scores.get(memory_id, 0.0)
        + (1 - weight) * semantic_scores.get(memory_id, 0.0)
        for memory_id in by_id
    }
    return _ordered(scores, by_id)


def session_neighbour_lift(
    fused: list[tuple[Memory, float]],
    *,
    workspace_id: int,
    scope: MemoryScope,
    type: str | None,
    layer: str | None,
    exclude_rules: bool,
    weights: tuple[float, ...] | None = None,
    reply_weight: float | None = None,
) -> list[tuple[Memory, float]]:
    """Lift each memory by weights[d - 1] × the best score among the memories d turns before or after it in
    its session, for each distance d; the scores lifted from are the fused ones, before any lift.

    A conversation turn often only makes sense with its neighbours ("Yes, since 2016" answers the turn
    before), so the turn next to a strong match is a good candidate even when it shares no words with the
    query; the neighbours of the candidates join the ranking this way. Only conversation turns have
    neighbours: the turns of the same session (sessions/checkpoint, sessions/turns), in turn order; any other
    memory is neither lifted nor lifts. The turn right after a question, said by someone else, is lifted by
    `reply_weight` instead (SEARCH_REPLY_LIFT) when that is larger. Measured effect: docs/search-ranking.md
    (conversation settings)."""
    weights = settings.SEARCH_SESSION_NEIGHBOUR_WEIGHTS if weights is None else weights
    if not fused or not any(w > 0 for w in weights):
        return fused
    # Only memories with a session have neighbours (the query's own condition): without any, no round trip,
    # and `fused` is already in the order _ordered would give it.
    anchors = [m.id for m, _ in fused if m.is_turn]
    if not anchors:
        return fused
    scores = {memory.id: score for memory, score in fused}
    by_id = {memory.id: memory for memory, _ in fused}
    found = selectors.session_neighbours(
        workspace_id=workspace_id,
        scope=scope,
        memory_ids=anchors,
        type=type,
        layer=layer,
        span=len(weights),
    )
    reply = settings.SEARCH_REPLY_LIFT if reply_weight is None else reply_weight
    # best[(memory, d)]: the best weighted candidate score d turns away. Adjacency is symmetric, and every
    # candidate is an anchor, so two candidates next to each other lift each other through their two rows.
    best: dict[tuple[uuid.UUID, int], float] = {}
    for anchor_id, neighbour, distance in found:
        if exclude_rules and neighbour.type == Memory.Type.RULE:
            continue
        weight = reply_lift_weight(
            by_id[anchor_id], neighbour, distance=distance, weights=weights, reply=reply
        )
        by_id.setdefault(neighbour.id, neighbour)
        key = (neighbour.id, distance)
        best[key] = max(best.get(key, 0.0), weight * scores[anchor_id])
    lifted = {
        memory_id: scores.get(memory_id, 0.0)
        + sum(best.get((memory_id, d), 0.0) for d in range(1, len(weights) + 1))
        for memory_id in by_id
    }
    return _ordered(lifted, by_id)


def reply_lift_weight(
    anchor: Memory, neighbour: Memory, *, distance: int, weights: tuple[float, ...], reply: float
) -> float:
    """The lift `neighbour` gets from `anchor` (two turns of one session): weights[distance - 1], or `reply`
    (when larger) for the turn right after a question by another speaker (or role), which is where its answer
    is."""
    weight = weights[distance - 1]
    if (
        distance == 1
        and reply > weight
        and is_question(anchor.content)
        and (neighbour.turn_index or 0) > (anchor.turn_index or 0)
        and not _same_voice(anchor, neighbour)
    ):
        return reply
    return weight


def _same_voice(first: Memory, second: Memory) -> bool:
    """Whether two turns were said by the same party: the same speaker when both name one, else the same
    role when both have one; unknown counts as different (a reply is the likelier reading)."""
    if first.speaker and second.speaker:
        return first.speaker.casefold() == second.speaker.casefold()
    if first.turn_role and second.turn_role and not (first.speaker or second.speaker):
        return first.turn_role == second.turn_role
    return False


_TRAILING_QUOTES = "\"'\u201d\u2019) \t\r\n"


def is_question(content: str) -> bool:
    """A text that ends with a question mark (closing quotes aside): a turn that asks rather than tells."""
    return content.rstrip(_TRAILING_QUOTES).endswith("?")


def question_damping(
    fused: list[tuple[Memory, float]], *, weight: float | None = None
) -> list[tuple[Memory, float]]:
    """Multiply by (1 − weight) the score of conversation turns that end with a question mark.

    A turn that asks repeats the words of the question asked about it ("What other hobbies do you have?"
    matches "What hobbies does Dana have?" best of all) but holds no answer. Damping it after the
    session-neighbour lift keeps what it is good for: it has already lifted the reply next to it. Only turns:
    a rule, decision or note that ends in "?" (an open question the team wrote down) ranks as it would without
    this rule. `fused` comes in the order the fusion steps give (_ordered), and goes out as it came when no
    score changes."""
    weight = settings.SEARCH_QUESTION_DAMPING if weight is None else weight
    if weight <= 0 or not fused:
        return fused
    questions = {m.id for m, _ in fused if m.is_turn and is_question(m.content)}
    if not questions:
        return fused  # no score changes: `fused` is already in the order _ordered gives
    scores = {m.id: score * (1 - weight) if m.id in questions else score for m, score in fused}
    return _ordered(scores, {m.id: m for m, _ in fused})


_NAME_WORD = re.compile(r"\w+")


def speaker_boost(
    fused: list[tuple[Memory, float]], *, query: str, weight: float | None = None
) -> list[tuple[Memory, float]]:
    """Add `weight` to the score of conversation turns whose speaker the query names (every word of it, any
    case).

    "What does Dana do to relax?" is about what Dana said, not about what others said to her: turns
    recorded with their speaker (sessions/checkpoint `speaker`) get those first. Scores are fused ones (0–1
    per side), so the weight is on that scale."""
    weight = settings.SEARCH_SPEAKER_BOOST if weight is None else weight
    if weight <= 0 or not fused:
        return fused
    named = set(_NAME_WORD.findall(query.casefold()))
    if not named:
        return fused
    scores: dict[uuid.UUID, float] = {}
    boosted = False
    for memory, score in fused:
        words = _speaker_words(memory)
        if words and named.issuperset(words):
            score, boosted = score + weight, True
        scores[memory.id] = score
    if not boosted:
        return fused  # as in question_damping
    return _ordered(scores, {m.id: m for m, _ in fused})


def _speaker_words(memory: Memory) -> list[str]:
    """The words of a turn's speaker; none for a memory that is not a turn."""
    if not memory.is_turn or not memory.speaker:
        return []
    return _NAME_WORD.findall(memory.speaker.casefold())


def named_speakers(query: str, memories: list[Memory]) -> list[str]:
    """The speakers of the turns among `memories` that the query names (every word of the name, any case: the
    rule speaker_boost applies), longest first. Only speakers of the given memories are seen: hybrid asks the
    lexical candidates, which hold the speaker's own turns whenever the name is one of the query's words."""
    words = set(_NAME_WORD.findall(query.casefold()))
    found: dict[str, None] = {}
    for memory in memories:
        name_words = _speaker_words(memory)
        if name_words and words.issuperset(name_words):
            found.setdefault(" ".join(name_words), None)
    return sorted(found, key=lambda name: (-len(name), name))


def query_without_speakers(query: str, *, speakers: list[str]) -> str:
    """The query with the named speakers' names (and a possessive 's) taken out, for the vector search.

    With a small sentence model, "What does Dana do to unwind?" sits close to every short "Dana said,
    ..." turn because of the name alone, and a generic "Thanks, see you!" of hers outranks the turn about
    pottery that answers it. The name is matched where it is exact instead: speaker_boost (a turn's speaker)
    and BM25 (the lexical side keeps the whole query). The query is kept whole when nothing would be left."""
    text = query
    for name in speakers:
        pattern = r"\b" + r"\s+".join(re.escape(word) for word in name.split()) + r"(?:['\u2019]s)?\b"
        text = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    text = " ".join(text.split())
    return text if _NAME_WORD.search(text) else query


def _ordered(scores: dict[uuid.UUID, float], by_id: dict[uuid.UUID, Memory]) -> list[tuple[Memory, float]]:
    # Ties: newer first, then id, so equal scores give the same order on every call. (A UUID sorts as its text
    # does: same width, dashes in the same places; comparing the UUIDs skips formatting them.)
    ordered = sorted(
        scores.items(), key=lambda item: (-item[1], -by_id[item[0]].created_at.timestamp(), item[0])
    )
    return [(by_id[memory_id], score) for memory_id, score in ordered]


def reciprocal_rank_fusion(rankings: list[list[Memory]], k: int = RRF_K) -> list[tuple[Memory, float]]:
    scores: dict[uuid.UUID, float] = {}
    by_id: dict[uuid.UUID, Memory] = {}
    for ranking in rankings:
        for rank, memory in enumerate(ranking, start=1):
            scores[memory.id] = scores.get(memory.id, 0.0) + 1.0 / (k + rank)
            by_id.setdefault(memory.id, memory)
    ordered = sorted(scores.items(), key=lambda item: (-item[1], -by_id[item[0]].created_at.timestamp()))
    return [(by_id[memory_id], score) for memory_id, score in ordered]


# Memories still waiting for their vector (or whose embedding failed). Uncorrelated: as an EXISTS in a load,
# the planner evaluates it once per statement.
_UNEMBEDDED_SQL = (
    "SELECT 1 FROM pipeline_jobs j WHERE j.workspace_id = %(workspace_id)s AND j.kind = 'embed' "
    "AND j.status IN ('queued', 'processing', 'dead_letter')"
)


def _has_unembedded_memories(workspace_id: int) -> bool:
    with connections["app"].cursor() as cursor:
        cursor.execute(f"SELECT EXISTS ({_UNEMBEDDED_SQL})", {"workspace_id": workspace_id})
        return bool(cursor.fetchone()[0])


def memory_search_answer(
    *,
    workspace_id: int,
    scope: MemoryScope,
    body: SearchIn,
) -> dict[str, Any]:
    """memories/search's answer (memories, count, trace) for every way in, the SDK route and the MCP tool:
    the request's importance weight, decay and MMR, else the workspace's settings. Inside the workspace's
    context."""
    options = ranking_options(
        workspace_id=workspace_id,
        importance_weight=body.importanceWeight,
        half_life_days=body.halfLifeDays,
        mmr_lambda=body.mmrLambda,
    )
    outcome = memory_search(
        workspace_id=workspace_id,
        scope=scope,
        query=body.query,
        type=body.type,
        layer=body.layer,
        limit=body.limit,
        strategy=body.strategy,
        importance_weight=options.importance_weight,
        half_life_days=options.half_life_days,
        mmr_lambda=options.mmr_lambda,
    )
    memories = selectors.memory_payloads(workspace_id=workspace_id, memories=outcome.memories)
    return {"memories": memories, "count": len(memories), "trace": outcome.trace()}
