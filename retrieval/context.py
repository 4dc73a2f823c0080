"""context/get and graph/trace, in one place: baseline tiers, the rollout decision, graph expansion with
provenance, conflicts, the context text, and one metrics row per retrieval.

Call inside tenancy.rls.workspace_context.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from django.conf import settings
from django.db import transaction

from config import tracing
from config.prepared import prepared_cursor
from graphsvc import expansion
from memories import prompt_text, selectors
from memories.models import Memory
from memories.scrubber import scrub_secrets
from memories.selectors import MemoryScope
from retrieval import graph_context, rerank, search
from retrieval.embeddings import embed_query
from tenancy.rls import connection_on_citus

if TYPE_CHECKING:
    from retrieval.schemas import ContextIn

logger = logging.getLogger("cairn.context")

WORKING_TIER_MAX = 3
CONTEXT_LINE_CHARS = 80
# Texts up to this long have their scrubbed line remembered (4,096 of them: at most ~16 MB per process).
CLEAN_CACHE_MAX_CHARS = 4000
# Put in front of the context line of a rule or memory with prompt-injection flags (memories.prompt_text).
UNTRUSTED_MARKER = prompt_text.UNTRUSTED_MARKER
# A conflict's explanation in the context text, at most this long.
CONFLICT_EXPLANATION_CHARS = 160


@dataclass(frozen=True)
class ContextRequest:
    query: str | None = None
    limit: int = 5
    include_rules: bool = True
    include_skill_files: bool = False
    mode: str = "all"  # all | working | long_term | rules_only
    strategy: str | None = None  # lexical | semantic | hybrid | auto (aliases mapped by the caller)
    graph_depth: int = 1
    graph_limit: int = 8
    half_life_days: float | None = None  # temporal decay of the baseline; None = the workspace's, 0 = off
    mmr_lambda: float | None = None  # MMR diversity of the baseline; None = the workspace's, 1 = off
    importance_weight: float | None = None  # None = the workspace's setting (memories/settings)
    include_superseded: bool = False
    endpoint: str = "context/get"
    # The entity graph's part (retrieval.graph_context): the context's token budget (None: the server's),
    # and the facts walked: their classes (None: all) and direction.
    token_budget: int | None = None
    fact_edge_classes: tuple[str, ...] | None = None
    fact_direction: str = "both"


# --- strategy: request, policy default, or Zeph's heuristic router ------------------------------------------

_QUESTION_WORDS = {"what", "how", "why", "when", "where", "who", "which", "explain", "describe"}
_RELATIONSHIP = (
    "related to",
    "relates to",
    "connection between",
    "relationship",
    "opinion on",
    "thinks about",
    "preference for",
    "history of",
    "know about",
)
_TEMPORAL = (
    "yesterday",
    "today",
    "this morning",
    "tonight",
    "last night",
    "last week",
    "this week",
    "past week",
    "last month",
    "this month",
    "past month",
    "when did",
    "remember when",
    "last time",
    "how long ago",
    "few days ago",
    "few hours ago",
    "earlier today",
)
_SNAKE = re.compile(r"^(?=.*_)(?=.*[a-z])[a-z0-9_]+$")


def route_query(query: str) -> str:
    """Zeph's heuristic router, mapped onto our strategies.

    episodic → hybrid (the time expression becomes a window on the memories' time, search.TimedQuery, and the
    rest is ranked as any question), graph → hybrid (expansion does the graph part), keyword → lexical.
    """
    text = query.lower().strip()
    words = text.split()
    if any(p in text for p in _TEMPORAL) or "ago" in (word.strip("?,.!") for word in words):
        return "hybrid"
    if any(p in text for p in _RELATIONSHIP):
        return "hybrid"
    starts_with_question = bool(words) and words[0].strip("?,.!") in _QUESTION_WORDS
    if ("/" in text or "::" in text) and not starts_with_question:
        return "lexical"
    if starts_with_question or len(words) >= 6:
        return "semantic"
    if len(words) <= 3:
        return "lexical"
    if any(_SNAKE.match(word) for word in words):
        return "lexical"
    return "hybrid"


@dataclass(frozen=True)
class Strategy:
    requested: str  # what the caller asked for, after aliases (or the policy default)
    ranking: str  # lexical | semantic | hybrid: how the baseline is ranked
    graph_requested: bool  # hybrid asks for graph expansion (the anchor's hybrid_graph)
    selection: str  # request | policy_default | router

    @property
    def metric_strategy(self) -> str:
        """What the retrieval metric records as requested: hybrid means graph expansion was asked for (the
        rollout's quality gate and autopilot count those). A baseline ranked hybrid without expansion (the
        default while the policy keeps expansion off) is recorded as hybrid_baseline, so the gate never
        mistakes it for a graph request."""
        if self.graph_requested or self.ranking != "hybrid":
            return self.ranking
        return "hybrid_baseline"


def resolve_strategy(requested: str | None, *, policy_default: str, query: str | None) -> Strategy:
    """Without a strategy the baseline is ranked hybrid (search.DEFAULT_STRATEGY, lexical when the workspace
    has no vectors); the workspace's retrieval policy (the default-strategy autopilot) decides only whether
    graph expansion is asked for: policy hybrid asks for it, policy lexical does not."""
    if requested is None:
        return Strategy(policy_default, search.DEFAULT_STRATEGY, policy_default == "hybrid", "policy_default")
    if requested == "auto":
        ranking = route_query(query or "")
        return Strategy("auto", ranking, ranking == "hybrid", "router")
    return Strategy(requested, requested, requested == "hybrid", "request")


# --- baseline tiers -----------------------------------------------------------------------------------------


@dataclass
class Rules:
    memories: list[Memory]
    payloads: list[dict[str, Any]]
    # The payloads validated and serialised as context/get's `rules` (memories.api), once per cached list:
    # with 100 rules that was most of the answer's serialisation time.
    rendered: bytes | None = None
    # Each rule's word stems, and each stem's inverse document frequency over the list (rules_for_query),
    # computed once per cached list.
    terms: list[frozenset[str]] | None = None
    idf: dict[str, float] | None = None
    total: int = 0  # how many rules the scope holds (set when the list is a query's selection)
    # A query's selection: the cached list it was chosen from and the chosen indexes, so each rule is
    # serialised once per cached list (`pieces`) however the selections vary.
    parent: Rules | None = None
    indexes: list[int] | None = None
    pieces: list[bytes] | None = None


def _rule_terms(text: str) -> frozenset[str]:
    from memories.updates import STOP_WORDS, stem

    words = "".join(ch if ch.isalnum() else " " for ch in text[:2000].lower()).split()
    return frozenset(stem(word) for word in words if len(word) > 1 and word not in STOP_WORDS)


def rules_for_query(rules: Rules, *, query: str | None, token_budget: int | None) -> Rules:
    """Rules are always on; when a scope holds more than CONTEXT_RULES_ALWAYS of them and the call has a
    query, they are ranked by the query (the words they share with it, rarer words weighing more; project
    rules before global ones and newer before older among equals) and kept within CONTEXT_RULES_BUDGET_SHARE
    of the token budget, at least CONTEXT_RULES_ALWAYS of them, instead of pasted whole."""
    count = len(rules.memories)
    if not query or count <= settings.CONTEXT_RULES_ALWAYS:
        return rules
    if rules.terms is None or rules.idf is None:
        terms = [_rule_terms(memory.content) for memory in rules.memories]
        frequency: dict[str, int] = {}
        for found in terms:
            for term in found:
                frequency[term] = frequency.get(term, 0) + 1
        rules.idf = {term: math.log(1 + count / seen) for term, seen in frequency.items()}
        rules.terms = terms
    wanted = _rule_terms(query)
    idf = rules.idf
    scores = [sum(idf.get(term, 0.0) for term in wanted & found) for found in rules.terms]
    order = sorted(range(count), key=lambda index: (-scores[index], index))
    budget = int(
        (token_budget if token_budget is not None else settings.CONTEXT_TOKEN_BUDGET)
        * settings.CONTEXT_RULES_BUDGET_SHARE
    )
    kept: list[int] = []
    used = 0
    for index in order:
        cost = len(rules.memories[index].content) // 4 + 4
        if len(kept) >= settings.CONTEXT_RULES_ALWAYS and used + cost > budget:
            continue
        kept.append(index)
        used += cost
    return Rules(
        [rules.memories[index] for index in kept],
        [rules.payloads[index] for index in kept],
        total=count,
        parent=rules,
        indexes=kept,
    )


# (workspace, scope) → (fingerprint, rules). The fingerprint is the id@updated_at list of the rules the query
# selects: every change that matters to the list (a rule added, edited, forgotten, expired, superseded,
# re-scoped) changes it, so a process never serves a stale list, however the change was made.
_RULES_CACHE: dict[tuple[int, MemoryScope], tuple[str, Rules]] = {}
_RULES_CACHE_MAX = 10_000


# The rules of a scope, project rules first, then global; newest first; capped (a context is not the place for
# thousands of rules). The partial index memories_ws_rules serves it. One row: the "id@updated_at" list, which
# is both the fingerprint and, when it changed, the ids to load (100 parsed ids and timestamps per call cost
# more CPU than the statement).
_IS_RULE_SQL = "(m.layer = 'rule' OR m.type = 'rule')"
# The same row says whether the workspace holds any skill file: most hold none, and context/get then skips
# their statement.
_RULES_FINGERPRINT_SQL = """
SELECT string_agg(r.id::text || '@' || r.updated_at::text, ','
                  ORDER BY r.scope DESC, r.created_at DESC, r.id DESC),
       EXISTS (SELECT 1 FROM skill_files s WHERE s.workspace_id = %(workspace_id)s)
FROM (
    SELECT m.id, m.updated_at, m.scope, m.created_at FROM memories m
    WHERE {readable} AND {is_rule}
    ORDER BY m.scope DESC, m.created_at DESC, m.id DESC
    LIMIT %(max_rules)s
) r
"""


def _rules(*, workspace_id: int, scope: MemoryScope) -> tuple[Rules, bool]:
    """The scope's rules, and whether the workspace holds any skill file."""
    params: dict[str, Any] = {"workspace_id": workspace_id, "max_rules": settings.CONTEXT_MAX_RULES}
    with prepared_cursor() as cursor:  # planning was half of its cost
        sql = _RULES_FINGERPRINT_SQL.format(
            readable=selectors.readable_sql(scope, params), is_rule=_IS_RULE_SQL
        )
        cursor.execute(sql, params)
        found_fingerprint, skill_files_held = cursor.fetchone()
    fingerprint = found_fingerprint or ""
    key = (workspace_id, scope)
    cached = _RULES_CACHE.get(key)
    if cached is not None and cached[0] == fingerprint:
        return cached[1], bool(skill_files_held)
    ids = [uuid.UUID(entry.partition("@")[0]) for entry in fingerprint.split(",")] if fingerprint else []
    found = selectors.memories_readable_by_ids(
        workspace_id=workspace_id, scope=scope, ids=ids, condition=f" AND {_IS_RULE_SQL}"
    )
    memories = [found[memory_id] for memory_id in ids if memory_id in found]
    value = Rules(memories, [memory_json(m) for m in memories])
    if len(_RULES_CACHE) >= _RULES_CACHE_MAX:
        _RULES_CACHE.clear()
    _RULES_CACHE[key] = (fingerprint, value)
    return value, bool(skill_files_held)


def _recent(*, workspace_id: int, scope: MemoryScope, layer: str, limit: int) -> list[Memory]:
    queryset = selectors.memories_readable(workspace_id=workspace_id, scope=scope).filter(layer=layer)
    if layer == Memory.Layer.LONG_TERM:
        queryset = queryset.exclude(type=Memory.Type.RULE)
    return list(queryset.order_by("-updated_at", "-id")[:limit])


@dataclass(frozen=True)
class Ordering:
    """How the baseline's candidates are re-ordered: the request's values, else the workspace's settings."""

    half_life_days: float  # 0: no decay
    mmr_lambda: float  # 1: no diversity
    importance_weight: float  # 0: importance plays no part


@dataclass
class Tier:
    memories: list[Memory]
    outcome: search.SearchOutcome | None


def _rank_tiers(
    *,
    workspace_id: int,
    scope: MemoryScope,
    request: ContextRequest,
    strategy: Strategy,
    limits: dict[str, int],
    ordering: Ordering,
) -> dict[str, Tier]:
    """Rank each tier (layer → limit). With a query, one candidate search serves every tier (see
    search.memory_search_tiers); each tier is still ranked on its own candidates."""
    if not request.query:
        return {
            layer: Tier(_recent(workspace_id=workspace_id, scope=scope, layer=layer, limit=limit), None)
            for layer, limit in limits.items()
        }
    reorders = ordering.half_life_days > 0 or ordering.mmr_lambda < 1
    reranking = rerank.rerank_enabled()

    def keep(limit: int) -> int:
        kept = limit * search.REORDER_POOL_FACTOR if reorders else limit
        return max(kept, settings.RERANK_CANDIDATES) if reranking else kept

    outcomes = search.memory_search_tiers(
        workspace_id=workspace_id,
        scope=scope,
        query=request.query,
        # None: the default (hybrid, or lexical at once in a workspace without vectors).
        strategy=None if strategy.selection == "policy_default" else strategy.ranking,
        with_vectors=ordering.mmr_lambda < 1,
        tiers=[
            search.TierQuery(
                layer=layer,
                limit=limit,
                exclude_rules=layer == Memory.Layer.LONG_TERM,
                keep=keep(limit),
            )
            for layer, limit in limits.items()
        ],
    )
    if reranking:
        # One call for both tiers: a reranker scores each memory against the query on its own.
        reranked = rerank.rerank_scores(
            query=request.query,
            memories=[m for outcome in outcomes for m in outcome.memories[: settings.RERANK_CANDIDATES]],
            max_candidates=settings.RERANK_CANDIDATES * len(outcomes),
        )
        for outcome in outcomes:
            outcome.memories, outcome.scores = rerank.reranked_order(
                outcome.memories, outcome.scores, reranked.scores
            )
            outcome.reranker = reranked.trace()
    with tracing.span("context.ordering"):
        return _ordered_tiers(
            workspace_id=workspace_id, limits=limits, outcomes=outcomes, ordering=ordering, reorders=reorders
        )


def _ordered_tiers(
    *,
    workspace_id: int,
    limits: dict[str, int],
    outcomes: list[search.SearchOutcome],
    ordering: Ordering,
    reorders: bool,
) -> dict[str, Tier]:
    """Each tier's candidates after temporal decay and MMR (when on), cut to the tier's limit."""
    stored = None
    if ordering.mmr_lambda < 1:
        # The vector search's neighbours came with their vectors; both tiers' other candidates' in one read.
        stored = search.candidate_vectors(
            workspace_id=workspace_id,
            memories=[m for outcome in outcomes if len(outcome.memories) > 1 for m in outcome.memories],
            known=next((outcome.vectors for outcome in outcomes if outcome.vectors is not None), None),
        )
    tiers = {}
    for (layer, limit), outcome in zip(limits.items(), outcomes, strict=True):
        memories = outcome.memories
        if reorders:
            memories = search.decay_and_diversify(
                workspace_id=workspace_id,
                memories=memories,
                scores=outcome.scores,
                limit=limit,
                half_life_days=ordering.half_life_days,
                mmr_lambda=ordering.mmr_lambda,
                stored=stored,
                decayed=outcome.scores,
            )
        tiers[layer] = Tier(memories[:limit], outcome)
    return tiers


def _weighted(tier: Tier, *, limit: int, importance_weight: float) -> Tier:
    memories = tier.memories[:limit]
    if importance_weight > 0 and tier.outcome is not None:
        memories = search.importance_rerank(
            memories=memories, scores=tier.outcome.scores, weight=importance_weight
        )
    return Tier(search.successors_first(memories), tier.outcome)


# --- assembly -----------------------------------------------------------------------------------------------


def memory_json(memory: Memory, graph: dict[str, Any] | None = None) -> dict[str, Any]:
    payload = selectors.memory_payload(memory)
    payload.pop("pipeline", None)
    if graph is not None:
        payload["graph"] = graph
    return payload


@functools.lru_cache(maxsize=4096)
def _clean_line(text: str) -> str:
    """Scrubbed and on one line. Remembered per text: the same rules and memories come back call after call,
    and the secret patterns cost ~0.1 ms per text (100 rules: most of a context's Python time)."""
    return prompt_text.prompt_line(scrub_secrets(text))


def context_text(
    *,
    rules: list[Memory],
    memories: list[Memory],
    conflicts: list[dict[str, Any]],
    facts: list[dict[str, Any]] | None = None,
    redact: bool = True,
) -> str:
    """The ready-to-paste text. With `redact` (the workspace's redact_credentials) secrets become typed
    placeholders before the line is cut, so a key is never half-shown."""

    line = prompt_text.prompt_line

    def clean(text: str) -> str:
        if not redact:
            return line(text)
        return _clean_line(text) if len(text) <= CLEAN_CACHE_MAX_CHARS else line(scrub_secrets(text))

    def marked(memory: Memory) -> str:
        return UNTRUSTED_MARKER + " " if memory.injection_flags else ""

    # Every stored value goes through prompt_text.prompt_line (clean is it after the secret scrub): nothing a
    # caller wrote can start a line, open or close a tag, or forge the untrusted marker.
    sections: list[str] = []
    project_rules = [r for r in rules if r.scope == Memory.Scope.PROJECT]
    global_rules = [r for r in rules if r.scope != Memory.Scope.PROJECT]
    if project_rules:
        sections.append(
            "## Project Rules\n" + "\n".join(f"- {marked(r)}{clean(r.content)}" for r in project_rules)
        )
    if global_rules:
        sections.append(
            "## Global Rules\n" + "\n".join(f"- {marked(r)}{clean(r.content)}" for r in global_rules)
        )
    if memories:
        lines = []
        for memory in memories:
            text = clean(memory.content)
            if len(text) > CONTEXT_LINE_CHARS:
                text = text[: CONTEXT_LINE_CHARS - 3] + "..."
            where = f"@{line(memory.project_id)}" if memory.project_id else "global"
            tags = f" {prompt_text.prompt_bracketed(memory.tags)}" if memory.tags else ""
            kind = prompt_text.prompt_bracketed([memory.type])
            lines.append(f"- {marked(memory)}{kind} {text} ({where}){tags}")
        sections.append("## Relevant Memories\n" + "\n".join(lines))
    if conflicts:
        sections.append(
            "## Conflicts\n"
            + "\n".join(
                f"- {line(c['memoryAId'])} <-> {line(c['memoryBId'])} ({line(c['edgeType'])}, confidence "
                f"{c['confidence']:.2f}; current: {line(c.get('currentMemoryId') or c['memoryAId'])})"
                + (
                    f": {line(c['explanation'], limit=CONFLICT_EXPLANATION_CHARS)}"
                    if c.get("explanation")
                    else ""
                )
                for c in conflicts
            )
        )
    if facts:
        sections.append(
            graph_context.FACTS_HEADER
            + "\n"
            + "\n".join(f"- {clean(f['fact'])} (confidence {f['confidence']:.2f})" for f in facts)
        )
    return "\n\n".join(sections)


@contextlib.contextmanager
def _undone_on_error() -> Iterator[None]:
    """A savepoint that a failure of the block rolls back to. On success it stays for the transaction's
    commit to release with everything else: atomic()'s RELEASE SAVEPOINT would be a round trip of its own
    on every call."""
    savepoint = transaction.savepoint(using="app")
    try:
        yield
    except BaseException:
        transaction.savepoint_rollback(savepoint, using="app")
        raise


@dataclass
class GraphReads:
    """What context/get reads from the graph: the expansion's memories and the Known facts."""

    expanded: list[tuple[Memory, expansion.Reason]]
    total_candidates: int
    failed: bool  # the expansion failed (the answer falls back to the baseline)
    facts: list[dict[str, Any]]
    section: graph_context.GraphSection = dataclasses.field(default_factory=graph_context.GraphSection)


def _graph_reads(
    *, workspace_id: int, scope: MemoryScope, baseline: list[Memory], request: ContextRequest, traverse: bool
) -> GraphReads:
    """The expansion (when `traverse`) and the Known facts under one savepoint: either may fail without
    failing the call, and one savepoint instead of one each spares two round trips. Both only read, except
    that fact recall counts its retrievals; a failure rolls back to the savepoint and loses nothing already
    read in Python. When the expansion fails, the facts are recalled after it under their own savepoint."""
    result = GraphReads([], 0, False, [])
    stage = "expansion"
    try:
        with _undone_on_error():
            if traverse:
                with tracing.span(
                    "context.graph_expansion", {"cairn.graph.depth": request.graph_depth}
                ) as span:
                    result.expanded, result.total_candidates = _expand(
                        workspace_id=workspace_id, scope=scope, baseline=baseline, request=request
                    )
                    tracing.span_set(
                        span,
                        {
                            "cairn.graph.candidates": result.total_candidates,
                            "cairn.graph.expanded": len(result.expanded),
                        },
                    )
            stage = "facts"
            result.section = _facts(workspace_id=workspace_id, scope=scope, request=request)
            result.facts = result.section.facts
    except Exception:  # noqa: BLE001 - the graph is an addition to the context, never a reason to fail it
        if stage == "facts":
            logger.exception("fact recall failed")
            return result
        logger.exception("graph expansion failed")
        result.expanded, result.total_candidates, result.failed = [], 0, True
        try:
            with _undone_on_error():
                result.section = _facts(workspace_id=workspace_id, scope=scope, request=request)
                result.facts = result.section.facts
        except Exception:  # noqa: BLE001 - as above
            logger.exception("fact recall failed")
    return result


def _facts(*, workspace_id: int, scope: MemoryScope, request: ContextRequest) -> graph_context.GraphSection:
    """Known facts and community summaries within the graph's share of the token budget, among those the
    caller's end user may see (retrieval.graph_context). The query's vector (entities and communities by
    meaning) only when the ranking embedded it: a lexical request is never made to pay for an embedding."""
    ranking = route_query(request.query or "") if request.strategy == "auto" else request.strategy
    with tracing.span("context.facts") as span:
        section = graph_context.graph_section(
            workspace_id=workspace_id,
            scope=scope,
            query=request.query,
            token_budget=request.token_budget,
            edge_classes=request.fact_edge_classes,
            direction=request.fact_direction,
            embed=None if ranking == "lexical" else embed_query,
        )
        tracing.span_set(
            span,
            {
                "cairn.facts": len(section.facts),
                "cairn.communities": len(section.communities),
                "cairn.facts.seed_source": section.seed_source,
            },
        )
    return section


def _fallback_reason(*, mode: str, blocked: bool, expansion_failed: bool) -> str:
    if mode == "off":
        return "rollout_off"
    if blocked:
        return "quality_gate_blocked"
    # Before shadow_mode (the anchor's order hides shadow errors, so its shadow error-rate blocker never
    # fires).
    if expansion_failed:
        return "graph_expansion_error"
    if mode == "shadow":
        return "shadow_mode"
    return "rollout_guardrail"


def context_get(*, workspace_id: int, scope: MemoryScope, request: ContextRequest) -> dict[str, Any]:
    from rollout import services as rollout_services

    started = time.perf_counter()
    rollout = rollout_services.rollout_state_get(workspace_id=workspace_id)
    hygiene_settings = selectors.memory_settings_cached(workspace_id=workspace_id)
    ordering = Ordering(
        half_life_days=(
            hygiene_settings.half_life_days if request.half_life_days is None else request.half_life_days
        ),
        mmr_lambda=hygiene_settings.mmr_lambda if request.mmr_lambda is None else request.mmr_lambda,
        importance_weight=(
            hygiene_settings.importance_weight
            if request.importance_weight is None
            else request.importance_weight
        ),
    )
    if request.include_superseded:
        scope = dataclasses.replace(scope, include_superseded=True)
    strategy = resolve_strategy(
        request.strategy, policy_default=rollout.default_strategy, query=request.query
    )
    # The search embeds the query itself, once its lexical candidates have shown which speakers the query
    # names (hybrid embeds it without their names: search.query_without_speakers).
    with tracing.span("context.rules") as span:
        # Without the rules' statement, nothing is known about skill files: their own statement says.
        rules_found, skill_files_held = (
            _rules(workspace_id=workspace_id, scope=scope) if request.include_rules else (Rules([], []), True)
        )
        rules_found = rules_for_query(rules_found, query=request.query, token_budget=request.token_budget)
        tracing.span_set(span, {"cairn.rules": len(rules_found.memories)})
    rules = rules_found.memories
    working, long_term = _baseline_tiers(
        workspace_id=workspace_id,
        scope=scope,
        request=request,
        strategy=strategy,
        ordering=ordering,
    )
    baseline = working.memories + long_term.memories

    # The rollout decision: off never traverses, shadow traverses for the metrics only, canary applies the
    # expansion to requests that ask for it unless the quality gate blocks them.
    mode = rollout.mode
    blocked = strategy.graph_requested and mode == "canary" and rollout.canary_blocked
    eligible = request.graph_depth > 0 and request.graph_limit > 0 and bool(baseline) and mode != "off"
    run_traversal = eligible and (strategy.graph_requested or mode == "shadow")
    apply = run_traversal and mode == "canary" and strategy.graph_requested and not blocked
    shadow_executed = run_traversal and not apply

    graph = _graph_reads(
        workspace_id=workspace_id, scope=scope, baseline=baseline, request=request, traverse=run_traversal
    )
    graph_memories, total_candidates, expansion_failed = graph.expanded, graph.total_candidates, graph.failed
    if expansion_failed:
        apply, shadow_executed = False, False
    known_facts = graph.facts

    graph_by_id: dict[uuid.UUID, dict[str, Any]] = {}
    if apply:
        for memory, reason in graph_memories:
            tier = working.memories if memory.layer == Memory.Layer.WORKING else long_term.memories
            tier.append(memory)
            graph_by_id[memory.id] = reason.payload()
    if request.mode == "working":
        returned = working.memories
    elif request.mode == "long_term":
        returned = long_term.memories
    elif request.mode == "rules_only":
        returned = []
    else:
        returned = list({m.id: m for m in working.memories + long_term.memories}.values())

    fallback_triggered = strategy.graph_requested and not apply
    fallback_reason = (
        _fallback_reason(mode=mode, blocked=blocked, expansion_failed=expansion_failed)
        if fallback_triggered
        else None
    )
    # The metric also counts a failed shadow traversal of a lexical request, so the gate sees every graph
    # error.
    metric_fallback = fallback_triggered or expansion_failed
    metric_reason = fallback_reason or ("graph_expansion_error" if expansion_failed else None)
    # The retrieval's metric row is written by the conflicts lookup's statement (one round trip for both), so
    # its duration is the retrieval's up to that lookup.
    duration_ms = (time.perf_counter() - started) * 1000
    metric = rollout_services.retrieval_metric_values(
        workspace_id=workspace_id,
        mode=mode,
        requested_strategy=strategy.metric_strategy,
        applied_strategy="hybrid_graph" if apply else "baseline",
        shadow_executed=shadow_executed,
        baseline_candidates=len(baseline),
        graph_candidates=total_candidates,
        graph_expanded_count=len(graph_by_id),
        total_candidates=len(baseline) + len(graph_by_id),
        fallback_triggered=metric_fallback,
        fallback_reason=metric_reason,
        project_id=scope.project_id,
        user_id=scope.user_id,
        semantic_model=settings.EMBEDDING_MODEL if strategy.ranking != "lexical" else None,
        duration_ms=duration_ms,
        endpoint=request.endpoint,
    )
    with tracing.span("context.conflicts"):
        conflicts = conflicts_with_current(
            workspace_id=workspace_id,
            scope=scope,
            returned=returned,
            along=rollout_services.retrieval_metric_statement(metric),
        )
    rollout_services.retrieval_metric_counted(metric)
    semantic_outcome = long_term.outcome or working.outcome
    trace = {
        "requestedStrategy": strategy.requested,
        "strategy": "hybrid_graph" if apply else "baseline",
        "semanticStrategyRequested": strategy.ranking,
        "semanticStrategyApplied": semantic_outcome.applied if semantic_outcome else "recency",
        "lexicalCandidates": sum(t.outcome.lexical_candidates for t in (working, long_term) if t.outcome),
        "semanticCandidates": sum(t.outcome.semantic_candidates for t in (working, long_term) if t.outcome),
        "semanticFallbackTriggered": bool(semantic_outcome and semantic_outcome.fallback_triggered),
        "semanticFallbackReason": semantic_outcome.fallback_reason
        if semantic_outcome
        else ("query_missing" if strategy.ranking != "lexical" else None),
        "timeWindow": _time_window_trace(semantic_outcome, baseline),
        "reranker": semantic_outcome.reranker if semantic_outcome else None,
        "graphDepth": request.graph_depth if run_traversal else 0,
        "graphLimit": request.graph_limit if run_traversal else 0,
        "rolloutMode": mode,
        "shadowExecuted": shadow_executed,
        "qualityGateStatus": rollout.gate_status,
        "qualityGateBlocked": blocked,
        "qualityGateReasonCodes": rollout.gate_reason_codes,
        "baselineCandidates": len(baseline),
        "graphCandidates": total_candidates,
        "graphExpandedCount": len(graph_by_id),
        "conflictCount": len(conflicts),
        "rulesTotal": rules_found.total or len(rules),
        "rulesRanked": bool(rules_found.total),
        "fallbackTriggered": fallback_triggered,
        "fallbackReason": fallback_reason,
        "totalCandidates": len(baseline) + len(graph_by_id),
        "retrievalPolicyDefaultStrategy": rollout.default_strategy,
        "retrievalPolicyAppliedStrategy": "hybrid" if apply else strategy.ranking,
        "retrievalPolicySelection": strategy.selection,
        "retrievalPolicyReadyForDefaultOn": rollout.ready_for_default_on,
        "retrievalPolicyBlockerCodes": rollout.blocker_codes,
        **graph.section.trace(),
        "durationMs": round(duration_ms, 2),
    }
    rollout_services.retrieval_policy_evaluate(workspace_id=workspace_id)

    with tracing.span("context.text"):
        # One payload per memory, shared by `memories` and its tier's list (read-only from here on).
        payloads = {
            m.id: memory_json(m, graph_by_id.get(m.id)) for m in working.memories + long_term.memories
        }
        text = graph_context.with_section(
            context_text(
                rules=rules,
                memories=returned,
                conflicts=conflicts,
                facts=known_facts,
                redact=hygiene_settings.redact_credentials,
            ),
            graph.section.communities_text(redact=hygiene_settings.redact_credentials),
        )
    return {
        "mode": request.mode,
        "query": request.query,
        # The cached rules' payloads themselves (read-only, like the memories' below): every caller serialises
        # them, and copying 100 dicts per call was a tenth of the answer's assembly.
        "rules": list(rules_found.payloads),
        "memories": [payloads[m.id] for m in returned],
        "workingMemories": [payloads[m.id] for m in working.memories],
        "longTermMemories": [payloads[m.id] for m in long_term.memories],
        "conflicts": conflicts,
        "skillFiles": (
            _skill_files(workspace_id=workspace_id, scope=scope, request=request) if skill_files_held else []
        ),
        "facts": known_facts,
        "communities": graph.section.communities,
        "context": text,
        "trace": trace,
        "_graph_ids": set(graph_by_id),
        "_rules": rules_found,
        "_tiers": {
            "ruleIds": [str(m.id) for m in rules],
            "workingIds": [str(m.id) for m in working.memories],
            "longTermIds": [str(m.id) for m in long_term.memories],
        },
    }


def _skill_files(*, workspace_id: int, scope: MemoryScope, request: ContextRequest) -> list[dict[str, Any]]:
    if not request.include_skill_files or request.mode == "rules_only":
        return []
    rows = selectors.skill_files_for_context(
        workspace_id=workspace_id, scope=scope, query=request.query, limit=settings.CONTEXT_SKILL_FILES_LIMIT
    )
    return [selectors.skill_file_payload(row) for row in rows]


# One statement for both kinds of conflict among what context/get returns: the contradicts edges between
# returned memories, one row per unordered pair (as graphsvc.expansion.contradictions), and the memories the
# returned ones superseded that the caller may read, with the supersession decision when one was recorded.
_CONFLICTS_SQL = """
SELECT 'c', least(a.node_key, b.node_key), greatest(a.node_key, b.node_key), max(e.confidence),
       (array_agg(e.metadata->>'explanation' ORDER BY e.confidence DESC)
            FILTER (WHERE e.metadata->>'explanation' IS NOT NULL))[1],
       (array_agg(e.evidence_text ORDER BY e.confidence DESC)
            FILTER (WHERE e.evidence_text IS NOT NULL))[1],
       NULL::text, NULL::text, NULL::jsonb
FROM graph_edges e
JOIN graph_nodes a ON a.id = e.from_node_id AND a.workspace_id = e.workspace_id
JOIN graph_nodes b ON b.id = e.to_node_id AND b.workspace_id = e.workspace_id
WHERE e.workspace_id = %(workspace_id)s AND e.edge_type = 'contradicts'
  AND e.expired_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now())
  AND a.node_type = 'memory' AND b.node_type = 'memory'
  AND a.node_key = ANY(%(returned_keys)s) AND b.node_key = ANY(%(returned_keys)s) AND a.node_key <> b.node_key
GROUP BY 2, 3
UNION ALL
(SELECT 'r', m.id::text, m.superseded_by::text, d.confidence, NULL, NULL, d.origin, d.rule, d.evidence
FROM memories m
LEFT JOIN LATERAL (
    SELECT s.confidence, s.origin, s.rule, s.evidence FROM memory_supersessions s
    WHERE s.workspace_id = %(workspace_id)s AND s.older_id = m.id AND s.newer_id = m.superseded_by
      AND s.reverted_at IS NULL AND s.decision = 'supersedes'
    ORDER BY s.id DESC LIMIT 1
) d ON true
WHERE {readable} AND m.superseded_by = ANY(%(returned_ids)s::uuid[])
ORDER BY m.created_at DESC, m.id
LIMIT 20)
"""


def conflicts_with_current(
    *,
    workspace_id: int,
    scope: MemoryScope,
    returned: list[Memory],
    along: tuple[str, list[Any]] | None = None,
) -> list[dict[str, Any]]:
    """Each conflict once, with the current side: the contradictions among the returned memories, and the
    memories the returned ones superseded (left out of the ranked tiers unless includeSuperseded, listed
    here so an agent knows what changed). A contradiction between a memory and its successor is one entry.
    One statement, prepared (planning was most of the contradictions' cost). `along`: a data-modifying
    statement (SQL with positional values: the retrieval metric) sent in the same round trip, as a CTE of
    this one; it runs once, also when there is nothing to look up."""
    # On Citus a data-modifying CTE beside a read of distributed tables is planned on every shard: there the
    # metric goes in a statement of its own, as it does when there is nothing to look up.
    if along is not None and (not returned or connection_on_citus()):
        with prepared_cursor() as cursor:
            cursor.execute(*along)
        along = None
    if not returned:
        return []
    by_id = {m.id: m for m in returned}
    params: dict[str, Any] = {
        "workspace_id": workspace_id,
        "returned_ids": list(by_id),
        "returned_keys": [str(memory_id) for memory_id in by_id],
    }
    readable = selectors.readable_sql(dataclasses.replace(scope, include_superseded=True), params)
    head = ""
    if along is not None:
        # The CTE's positional values become named ones, as this statement's are.
        pieces = along[0].split("%s")
        head = "WITH along AS (" + pieces[0]
        for index, (piece, value) in enumerate(zip(pieces[1:], along[1], strict=True)):
            head += f"%(along_{index})s" + piece
            params[f"along_{index}"] = value
        head += ") "
    with prepared_cursor() as cursor:
        cursor.execute(head + _CONFLICTS_SQL.format(readable=readable), params)
        rows = cursor.fetchall()
    contradictions = sorted(
        (row for row in rows if row[0] == "c"), key=lambda row: (-float(row[3]), row[1], row[2])
    )
    replaced = [row[1:] for row in rows if row[0] == "r"]
    successor = {old: new for old, new, *_ in replaced}
    for memory in returned:
        if memory.superseded_by is not None and memory.superseded_by in by_id:
            successor[str(memory.id)] = str(memory.superseded_by)
    listed: set[frozenset[str]] = set()
    result = []
    for _kind, a, b, confidence, explanation, evidence, *_rest in contradictions:
        if successor.get(a) == b or successor.get(b) == a:
            current, because = (b if successor.get(a) == b else a), "superseded"
        else:
            first, second = by_id[uuid.UUID(a)], by_id[uuid.UUID(b)]
            current = b if (second.created_at, b) > (first.created_at, a) else a
            because = "newer"
        listed.add(frozenset((a, b)))
        result.append(
            {
                "memoryAId": a,
                "memoryBId": b,
                "edgeType": "contradicts",
                "confidence": round(float(confidence), 4),
                # The model's own explanation and quote when relationship extraction gave them.
                "explanation": explanation
                or "These memories are linked by a contradiction edge from relationship extraction.",
                "evidence": evidence,
                "suggestion": (
                    "These memories may conflict. "
                    "Consider asking the user to clarify which preference is current."
                ),
                "currentMemoryId": current,
                "currentBecause": because,
            }
        )
    for old, new, confidence, _explanation, _evidence, origin, rule, decision_evidence in replaced:
        pair = frozenset((old, new))
        if pair in listed:
            continue
        listed.add(pair)
        if isinstance(decision_evidence, str):  # a prepared statement's jsonb arrives as its text
            try:
                decision_evidence = json.loads(decision_evidence)
            except ValueError:
                decision_evidence = None
        facts = decision_evidence if isinstance(decision_evidence, dict) else {}
        result.append(
            {
                "memoryAId": min(old, new),
                "memoryBId": max(old, new),
                "edgeType": "supersedes",
                "confidence": round(float(confidence if confidence is not None else 1.0), 4),
                "explanation": _replaced_explanation(origin=origin, rule=rule, evidence=facts),
                "evidence": facts.get("newSpan") if isinstance(facts.get("newSpan"), str) else None,
                "suggestion": "The current memory replaced the other; rely on the current one.",
                "currentMemoryId": new,
                "currentBecause": "superseded",
            }
        )
    return result


def _replaced_explanation(*, origin: str | None, rule: str | None, evidence: dict[str, Any]) -> str:
    if origin == "heuristic":
        cue, old, new = evidence.get("cue"), evidence.get("oldSpan"), evidence.get("newSpan")
        return f"Update detected (cue {cue!s}): {old!s} → {new!s}."
    if origin == "llm":
        return str(evidence.get("explanation") or "A model decided the newer memory replaces the older.")
    if origin == "manual":
        return "A person decided which memory is current."
    return "Consolidation kept the newer memory of the same key."


def _time_window_trace(outcome: search.SearchOutcome | None, baseline: list[Memory]) -> dict[str, Any] | None:
    """The query's time window as the ranking applied it (both tiers share it), with how many of the
    baseline's memories fall in it."""
    if outcome is None or outcome.time_window is None:
        return None
    counted = search.SearchOutcome(
        baseline, outcome.requested, outcome.applied, time_window=dict(outcome.time_window)
    )
    search.count_in_window(counted)
    return counted.time_window


def _baseline_tiers(
    *,
    workspace_id: int,
    scope: MemoryScope,
    request: ContextRequest,
    strategy: Strategy,
    ordering: Ordering,
) -> tuple[Tier, Tier]:
    """Working ≤ 3, long-term for the rest of the limit. Both tiers are ranked together; the long-term one
    with the whole limit, then cut to what the working tier left (its candidate depth is max(4 × limit, 40) of
    the request's limit, which only differs from the cut limit's above a limit of 10)."""
    limits: dict[str, int] = {}
    if request.mode in ("all", "working"):
        limits[Memory.Layer.WORKING] = max(1, min(request.limit, WORKING_TIER_MAX))
    if request.mode in ("all", "long_term"):
        limits[Memory.Layer.LONG_TERM] = request.limit
    if not limits:
        return Tier([], None), Tier([], None)
    ranked = _rank_tiers(
        workspace_id=workspace_id,
        scope=scope,
        request=request,
        strategy=strategy,
        limits=limits,
        ordering=ordering,
    )
    working = Tier([], None)
    if Memory.Layer.WORKING in ranked:
        working = _weighted(
            ranked[Memory.Layer.WORKING],
            limit=limits[Memory.Layer.WORKING],
            importance_weight=ordering.importance_weight,
        )
    long_term = Tier([], None)
    if Memory.Layer.LONG_TERM in ranked:
        long_limit = max(1, request.limit - len(working.memories)) if request.mode == "all" else request.limit
        long_term = _weighted(
            ranked[Memory.Layer.LONG_TERM], limit=long_limit, importance_weight=ordering.importance_weight
        )
    return working, long_term


class _ExpansionColumns(Protocol):
    """The columns expansion.readable_expansion_sql selects after a memory's own (set as attributes by
    selectors.memories_from_sql)."""

    graph_ref: str
    graph_edge_type: str
    graph_hop: int
    graph_confidence: float
    graph_score: float
    graph_seed: uuid.UUID
    graph_total: int


def _expand(
    *, workspace_id: int, scope: MemoryScope, baseline: list[Memory], request: ContextRequest
) -> tuple[list[tuple[Memory, expansion.Reason]], int]:
    """The best graph_limit memories the expansion reaches that the caller may read (never a rule, never
    another user's or project's memory, nothing expired), in one statement: the scope filter is applied before
    the limit, so no candidate is lost to an over-fetch that the filter thins out."""
    if not baseline or request.graph_depth < 1 or request.graph_limit < 1:
        return [], 0
    params = expansion.expansion_params(
        workspace_id=workspace_id, seed_memory_ids=[m.id for m in baseline], limit=request.graph_limit
    )
    params["workspace_id"] = workspace_id
    condition = (
        selectors.readable_sql(scope, params)
        + " AND m.layer IN ('working', 'long_term') AND m.type <> 'rule'"
    )
    sql = expansion.readable_expansion_sql(
        depth=request.graph_depth, columns=selectors.MEMORY_COLUMNS, condition=condition
    )
    found = selectors.memories_from_sql(sql, params, prepared=True)
    expanded = [
        (
            memory,
            expansion.Reason(
                columns.graph_ref,
                columns.graph_edge_type,
                columns.graph_hop,
                columns.graph_confidence,
                columns.graph_score,
                str(columns.graph_seed),
            ),
        )
        for memory, columns in zip(found, cast(list[_ExpansionColumns], found), strict=True)
    ]
    return expanded, cast(_ExpansionColumns, found[0]).graph_total if found else 0


def context_request_from(payload: ContextIn, *, endpoint: str) -> ContextRequest:
    """The ContextRequest a context/get body asks for, whichever way it came in (SDK route, graph/trace, MCP
    tool); `endpoint` names the way in for the retrieval metrics. graph/trace answers no skill files (nor
    counts them as used)."""
    strategy = search.STRATEGY_ALIASES.get(payload.strategy, payload.strategy) if payload.strategy else None
    return ContextRequest(
        query=payload.query,
        limit=payload.limit,
        include_rules=payload.includeRules,
        include_skill_files=payload.includeSkillFiles and endpoint != "graph/trace",
        mode=payload.mode,
        strategy=strategy,
        graph_depth=payload.graphDepth,
        graph_limit=payload.graphLimit,
        half_life_days=payload.halfLifeDays,
        mmr_lambda=payload.mmrLambda,
        importance_weight=payload.importanceWeight,
        include_superseded=payload.includeSuperseded,
        endpoint=endpoint,
        token_budget=payload.tokenBudget,
        fact_edge_classes=tuple(payload.factEdgeClasses) if payload.factEdgeClasses else None,
        fact_direction=payload.factDirection,
    )
