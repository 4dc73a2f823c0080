"""Fact recall over the entity graph (zeph.md §5): seed entities from a query, then BFS or spreading activation.

Every function here runs inside the caller's workspace context (RLS); the explicit `workspace_id = …` predicates
are there so that the b-tree indexes lead with the workspace, not for isolation.

Effective confidence (A-MEM, seed 002): confidence × e^(−rate × days since last observation) × the retrieval boost
(1 + 0.2 ln(1 + retrieval_count)), capped at 1. Facts whose decayed confidence is under GRAPH_CONFIDENCE_FLOOR are
neither walked nor returned; they stay in the table (graph/entities detail lists them) until eviction.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from config.errors import ApiError
from graphsvc.entities import normalise_name
from graphsvc.models import ENTITY_TYPES, GraphSettings

CLASS_WEIGHTS = {"causal": 1.2, "semantic": 1.0, "temporal": 0.9, "entity": 0.8}
MAX_VISITED = 500  # nodes one BFS may visit: bounds the final edge query on hub-heavy graphs
# Fact recall visits at most this many entities per fact asked for (at least 40): the best-seeded first. A 2-hop
# neighbourhood in a dense graph holds thousands of facts, and fetching them all to return ten is what made
# recall slow; the facts that score highest sit next to the best seeds.
VISITS_PER_FACT = 4
MIN_VISITS = 40
SEED_WORDS = 5
SEED_STRUCTURAL_WEIGHT = 0.4
SEED_COMMUNITY_CAP = 3
# Spreading activation (SYNAPSE, zeph.md §5.5; invariants SA-INV-01..09).
SA_DECAY = 0.85
SA_HOPS = 3
SA_THRESHOLD = 0.1
SA_INHIBITION = 0.8
SA_MAX_NODES = 50
STRATEGIES = ("bfs", "spreading")


@dataclass
class Seed:
    node_id: int
    score: float
    name: str = ""


@dataclass
class Reading:
    """How edges are filtered: now or at a past time, by class and relation, above the confidence floor."""

    workspace_id: int
    at: datetime | None = None
    edge_classes: list[str] | None = None
    edge_types: list[str] | None = None
    rate: float = 0.01
    rates: dict[str, float] = field(default_factory=dict)

    def where(self, alias: str = "e") -> str:
        e = alias
        parts = [f"{e}.workspace_id = %(ws)s", f"{e}.origin = 'llm_entity'"]
        if self.at is None:
            parts.append(f"{e}.expired_at IS NULL AND {e}.valid_to IS NULL")
        else:
            parts.append(f"{e}.valid_from <= %(at)s AND ({e}.valid_to IS NULL OR {e}.valid_to > %(at)s)")
        if self.edge_classes:
            parts.append(f"{e}.edge_class = ANY(%(classes)s)")
        if self.edge_types:
            parts.append(f"{e}.edge_type = ANY(%(types)s)")
        parts.append(f"{self.decayed(e)} >= %(floor)s")
        return " AND ".join(parts)

    def decayed(self, alias: str = "e") -> str:
        e = alias
        return (
            f"({e}.confidence * exp(-coalesce((%(rates)s::jsonb ->> {e}.edge_type)::float8, %(rate)s) * "
            f"greatest(0, extract(epoch FROM (%(ref)s - coalesce({e}.last_observed_at, {e}.created_at))) / 86400.0)))"
        )

    def params(self, **extra: Any) -> dict[str, Any]:
        return {
            "ws": self.workspace_id, "at": self.at, "classes": self.edge_classes, "types": self.edge_types,
            "floor": settings.GRAPH_CONFIDENCE_FLOOR, "rate": self.rate, "rates": json.dumps(self.rates),
            "ref": self.at or timezone.now(), **extra,
        }


@dataclass(frozen=True)
class StoredSettings:
    """The workspace's graph_settings row as recall reads it (None: the server default applies)."""

    recall_strategy: str | None = None
    decay_rate: float | None = None
    decay_rates: dict[str, float] = field(default_factory=dict)


# workspace → (monotonic expiry, row) for callers that accept a few seconds of staleness (context/get).
_STORED_CACHE: dict[int, tuple[float, StoredSettings]] = {}


def stored_settings(*, workspace_id: int, max_age: float = 0.0) -> StoredSettings:
    """One read of what recall needs from graph_settings; with max_age > 0 a copy this recent may answer
    (graph_reasoning_settings_update and relation_decay_set forget this process's copy)."""
    cached = _STORED_CACHE.get(workspace_id)
    if max_age > 0 and cached is not None and cached[0] > time.monotonic():
        return cached[1]
    row = GraphSettings.objects.filter(workspace_id=workspace_id).values_list(
        "recall_strategy", "decay_rate", "decay_rates").first()
    value = StoredSettings(row[0], row[1], row[2] or {}) if row else StoredSettings()
    if max_age > 0:
        if len(_STORED_CACHE) >= 10_000:
            _STORED_CACHE.clear()
        _STORED_CACHE[workspace_id] = (time.monotonic() + max_age, value)
    return value


def stored_settings_forget(*, workspace_id: int | None = None) -> None:
    if workspace_id is None:
        _STORED_CACHE.clear()
    else:
        _STORED_CACHE.pop(workspace_id, None)


def reading_for(*, workspace_id: int, at: datetime | None = None, edge_classes: list[str] | None = None,
                edge_types: list[str] | None = None, stored: StoredSettings | None = None) -> Reading:
    if stored is None:
        row = GraphSettings.objects.filter(workspace_id=workspace_id).values("decay_rate", "decay_rates").first()
        stored = StoredSettings(None, row["decay_rate"], row["decay_rates"] or {}) if row else StoredSettings()
    rate = stored.decay_rate if stored.decay_rate is not None else settings.GRAPH_DECAY_RATE
    return Reading(workspace_id=workspace_id, at=at, edge_classes=edge_classes or None,
                   edge_types=edge_types or None, rate=rate, rates=stored.decay_rates or {})


def boosted(decayed: float, retrieval_count: int) -> float:
    """A-MEM link weight: re-retrieved facts count for more, never above 1."""
    return min(1.0, decayed * (1.0 + 0.2 * math.log1p(max(retrieval_count, 0))))


def clean_fact_text(text: str | None) -> str:
    """One line, no angle brackets: graph text is pasted into prompts and must not open or close a section."""
    return " ".join((text or "").replace("<", " ").replace(">", " ").split())


# --- seeds --------------------------------------------------------------------------------------------------------


def _words(query: str) -> list[str]:
    words = [w[:64] for w in re.split(r"[^\w]+", query.lower()) if len(w) >= 3]
    unique = list(dict.fromkeys(words))[:SEED_WORDS]
    if unique:
        return unique
    whole = re.sub(r"[^\w]+", "", query.lower())[:64]
    return [whole] if len(whole) >= 2 else []


def _upper(prefix: str) -> str:
    """The smallest string above every string starting with `prefix` (code-point order = C collation order)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def entity_lookup(*, workspace_id: int, name: str) -> Seed | None:
    """One entity by alias or canonical name (any type); None when there is none."""
    canonical = normalise_name(name)
    if canonical is None:
        return None
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            (SELECT n.id, n.label FROM graph_entity_aliases a JOIN graph_nodes n ON n.id = a.node_id
             WHERE a.workspace_id = %(ws)s AND a.alias = %(name)s AND n.workspace_id = %(ws)s
             ORDER BY n.mention_count DESC, n.id LIMIT 1)
            UNION ALL
            (SELECT id, label FROM graph_nodes
             WHERE workspace_id = %(ws)s AND node_type = ANY(%(types)s) AND node_key = %(name)s
             ORDER BY mention_count DESC, id LIMIT 1)
            LIMIT 1
            """,
            {"ws": workspace_id, "name": canonical, "types": list(ENTITY_TYPES)},
        )
        row = cursor.fetchone()
    return Seed(node_id=row[0], score=1.0, name=row[1]) if row else None


def seeds_find(*, workspace_id: int, query: str, limit: int, embed: bool = True) -> list[Seed]:
    """Entities a query names: word and prefix matches on names and aliases (weighted over summaries), near spellings
    sharing the first three letters, then the query embedding when no word matched. Two queries (three with the
    embedding fallback), each on an index that leads with the workspace."""
    words = _words(query)
    text_scores: dict[int, float] = {}
    if words:
        prefixes = [w[:3] for w in words]
        with connections["app"].cursor() as cursor:
            cursor.execute(
                """
                SELECT q.i, t.node_id, t.term, t.weight, similarity(t.term, q.w)
                FROM unnest(%(words)s::text[], %(his)s::text[], %(p3)s::text[], %(p3his)s::text[])
                     WITH ORDINALITY AS q(w, hi, p3, p3hi, i)
                CROSS JOIN LATERAL (
                    (SELECT node_id, term, weight FROM graph_entity_terms
                     WHERE workspace_id = %(ws)s AND term >= (q.w COLLATE "C") AND term < (q.hi COLLATE "C")
                     ORDER BY term, weight LIMIT 200)
                    UNION ALL
                    (SELECT node_id, term, weight FROM graph_entity_terms
                     WHERE workspace_id = %(ws)s AND term >= (q.p3 COLLATE "C") AND term < (q.p3hi COLLATE "C")
                       AND length(term) BETWEEN length(q.w) - 2 AND length(q.w) + 2
                       AND similarity(term, q.w) >= 0.45
                     LIMIT 100)
                ) t
                """,
                {"ws": workspace_id, "words": words, "his": [_upper(w) for w in words], "p3": prefixes,
                 "p3his": [_upper(p) for p in prefixes]},
            )
            best: dict[tuple[int, int], float] = {}
            for word_index, node_id, term, weight, similarity in cursor.fetchall():
                word = words[word_index - 1]
                if term == word:
                    match = 1.0
                elif term.startswith(word):
                    match = 0.85
                else:
                    match = 0.6 * float(similarity)
                score = match * (1.0 if weight == 1 else 0.5)
                key = (word_index, node_id)
                best[key] = max(best.get(key, 0.0), score)
        # An entity matching more of the query's words ranks higher; scores are relative to the best match.
        for (_, node_id), score in best.items():
            text_scores[node_id] = text_scores.get(node_id, 0.0) + score
    if not text_scores and embed:
        text_scores = _embedding_seeds(workspace_id=workspace_id, query=query, limit=limit)
    if not text_scores:
        return []
    top = max(text_scores.values()) or 1.0
    # Structure re-ranks the best text matches only: its degree counts are the costly part of seeding.
    candidates = sorted(text_scores.items(), key=lambda item: (-item[1], item[0]))[: max(limit + limit // 2, 8)]
    return _hybrid(workspace_id=workspace_id, text={n: min(1.0, s / top) for n, s in candidates}, limit=limit)


def _embedding_seeds(*, workspace_id: int, query: str, limit: int) -> dict[int, float]:
    from memories.search import embed_query

    vector = embed_query(query)
    if vector is None:
        return {}
    literal = "[" + ",".join(f"{x:.7g}" for x in list(vector)) + "]"
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT id, 1 - (embedding <=> %(v)s::vector) FROM graph_nodes
            WHERE workspace_id = %(ws)s AND node_type = ANY(%(types)s) AND embedding_model = %(model)s
              AND vector_dims(embedding) = %(dims)s
            ORDER BY embedding <=> %(v)s::vector LIMIT %(limit)s
            """,
            {"ws": workspace_id, "v": literal, "types": list(ENTITY_TYPES), "model": settings.EMBEDDING_MODEL,
             "dims": len(vector), "limit": limit},
        )
        return {node_id: float(cosine) for node_id, cosine in cursor.fetchall() if cosine and cosine > 0.3}


def _hybrid(*, workspace_id: int, text: dict[int, float], limit: int) -> list[Seed]:
    """text × 0.6 + structure × 0.4 (degree relative to the candidates, relation variety), at most three seeds per
    community unless that would leave none."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT n.id, n.label, n.community_id, coalesce(d.degree, 0), coalesce(d.kinds, 0)
            FROM graph_nodes n
            LEFT JOIN LATERAL (
                SELECT count(*) AS degree, count(DISTINCT x.edge_type) AS kinds FROM (
                    (SELECT e.edge_type FROM graph_edges e WHERE e.workspace_id = %(ws)s AND e.from_node_id = n.id
                       AND e.origin = 'llm_entity' AND e.expired_at IS NULL AND e.valid_to IS NULL LIMIT 50)
                    UNION ALL
                    (SELECT e.edge_type FROM graph_edges e WHERE e.workspace_id = %(ws)s AND e.to_node_id = n.id
                       AND e.origin = 'llm_entity' AND e.expired_at IS NULL AND e.valid_to IS NULL LIMIT 50)
                ) x
            ) d ON true
            WHERE n.workspace_id = %(ws)s AND n.id = ANY(%(ids)s)
            """,
            {"ws": workspace_id, "ids": list(text)},
        )
        rows = cursor.fetchall()
    max_degree = max((row[3] for row in rows), default=0) or 1
    ranked = []
    for node_id, label, community, degree, kinds in rows:
        structural = 0.6 * degree / max_degree + 0.4 * min(kinds / 4, 1.0) if degree else 0.0
        hybrid = text[node_id] * (1 - SEED_STRUCTURAL_WEIGHT) + structural * SEED_STRUCTURAL_WEIGHT
        ranked.append((hybrid, node_id, label, community))
    ranked.sort(key=lambda item: (-item[0], item[1]))
    per_community: dict[int, int] = {}
    capped = []
    for item in ranked:
        community = item[3]
        if community is not None:
            if per_community.get(community, 0) >= SEED_COMMUNITY_CAP:
                continue
            per_community[community] = per_community.get(community, 0) + 1
        capped.append(item)
    chosen = (capped or ranked)[:limit]
    return [Seed(node_id=n, score=min(1.0, max(0.1, s)), name=label) for s, n, label, _ in chosen]


# --- BFS ----------------------------------------------------------------------------------------------------------


@dataclass
class Walk:
    depth: dict[int, int]
    seed_score: dict[int, float]
    edges: list[dict[str, Any]]


EDGE_COLUMNS = """
    e.id, e.from_node_id, s.label, e.edge_type, e.to_node_id, t.label, e.fact, e.edge_class, e.confidence,
    {decayed}, e.retrieval_count, e.valid_from, e.valid_to
"""


def _edge_row(row: tuple[Any, ...]) -> dict[str, Any]:
    (edge_id, source_id, source, relation, target_id, target, fact, edge_class, confidence, decayed, count,
     valid_from, valid_to) = row
    return {
        "id": edge_id, "sourceId": source_id, "source": source, "relation": relation, "targetId": target_id,
        "target": target, "fact": fact, "edgeClass": edge_class, "storedConfidence": float(confidence),
        "confidence": boosted(float(decayed), int(count)), "validFrom": valid_from, "validTo": valid_to,
    }


def bfs(*, reading: Reading, seeds: list[Seed], max_hops: int, max_visited: int = MAX_VISITED) -> Walk:
    """Undirected multi-source BFS: one query per hop plus one for the edges among the visited nodes, so at most
    max_hops + 1 queries whatever the graph's size. Each node remembers the best seed score that reached it."""
    depth = {seed.node_id: 0 for seed in seeds}
    seed_score = {seed.node_id: seed.score for seed in seeds}
    frontier = list(depth)
    where = reading.where()
    with connections["app"].cursor() as cursor:
        for hop in range(max_hops):
            if not frontier or len(depth) >= max_visited:
                break
            cursor.execute(
                f"""
                SELECT e.from_node_id, e.to_node_id FROM graph_edges e WHERE {where} AND e.from_node_id = ANY(%(f)s)
                UNION
                SELECT e.from_node_id, e.to_node_id FROM graph_edges e WHERE {where} AND e.to_node_id = ANY(%(f)s)
                """,
                reading.params(f=frontier),
            )
            in_frontier = set(frontier)
            reached: dict[int, float] = {}
            for source, target in cursor.fetchall():
                for here, there in ((source, target), (target, source)):
                    if here in in_frontier and there not in depth:
                        reached[there] = max(reached.get(there, 0.0), seed_score[here])
            frontier = []
            for node_id, score in sorted(reached.items(), key=lambda item: (-item[1], item[0])):
                if len(depth) >= max_visited:
                    break
                depth[node_id] = hop + 1
                seed_score[node_id] = score
                frontier.append(node_id)
        visited = list(depth)
        cursor.execute(
            f"""
            SELECT {EDGE_COLUMNS.format(decayed=reading.decayed())}
            FROM graph_edges e JOIN graph_nodes s ON s.id = e.from_node_id JOIN graph_nodes t ON t.id = e.to_node_id
            WHERE {where} AND e.from_node_id = ANY(%(v)s) AND e.to_node_id = ANY(%(v)s)
            """,
            reading.params(v=visited),
        )
        edges = [_edge_row(row) for row in cursor.fetchall()]
    return Walk(depth=depth, seed_score=seed_score, edges=edges)


def _score_bfs(walk: Walk) -> list[dict[str, Any]]:
    facts = []
    for edge in walk.edges:
        hop = min(walk.depth[edge["sourceId"]], walk.depth[edge["targetId"]])
        seed = max(walk.seed_score[edge["sourceId"]], walk.seed_score[edge["targetId"]])
        score = seed * (1.0 / (1 + hop)) * edge["confidence"] * CLASS_WEIGHTS.get(edge["edgeClass"], 1.0)
        facts.append({**edge, "hop": hop, "score": round(score, 6)})
    return facts


# --- spreading activation -----------------------------------------------------------------------------------------


class SpreadingTimeout(Exception):
    pass


def spreading_activation(*, reading: Reading, seeds: list[Seed], timeout_ms: int) -> list[dict[str, Any]]:
    """SYNAPSE: activation spreads from the seeds along active edges, decaying by λ per hop and by the edge's
    effective confidence and class weight; sums are clamped at 1, nodes at or above the inhibition level take no
    more, at most 50 nodes stay active. Raises SpreadingTimeout past the time limit (the caller answers empty)."""
    deadline = time.monotonic() + timeout_ms / 1000
    activation = {s.node_id: s.score for s in seeds if s.score >= SA_THRESHOLD}
    depth = dict.fromkeys(activation, 0)
    collected: dict[int, dict[str, Any]] = {}
    where = reading.where()
    with connections["app"].cursor() as cursor:
        for hop in range(SA_HOPS):
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                raise SpreadingTimeout
            active = [n for n, a in activation.items() if a >= SA_THRESHOLD]
            if not active:
                break
            # The statement itself is bounded too: a hub-heavy hop must not outlive the request's time limit.
            try:
                with transaction.atomic(using="app"):
                    cursor.execute("SELECT current_setting('statement_timeout'), "
                                   "set_config('statement_timeout', %s, true)", [str(max(remaining_ms, 1))])
                    previous = cursor.fetchone()[0]
                    cursor.execute(
                        f"""
                        SELECT {EDGE_COLUMNS.format(decayed=reading.decayed())}
                        FROM graph_edges e JOIN graph_nodes s ON s.id = e.from_node_id
                             JOIN graph_nodes t ON t.id = e.to_node_id
                        WHERE {where} AND e.from_node_id = ANY(%(a)s)
                        UNION ALL
                        SELECT {EDGE_COLUMNS.format(decayed=reading.decayed())}
                        FROM graph_edges e JOIN graph_nodes s ON s.id = e.from_node_id
                             JOIN graph_nodes t ON t.id = e.to_node_id
                        WHERE {where} AND e.to_node_id = ANY(%(a)s) AND NOT (e.from_node_id = ANY(%(a)s))
                        """,
                        reading.params(a=active),
                    )
                    rows = cursor.fetchall()
                    cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])
            except DatabaseError as exc:
                raise SpreadingTimeout from exc
            edges = [_edge_row(row) for row in rows]
            incoming: dict[int, float] = {}
            active_set = set(active)
            for edge in edges:
                weight = edge["confidence"] * CLASS_WEIGHTS.get(edge["edgeClass"], 1.0)
                for here, there in ((edge["sourceId"], edge["targetId"]), (edge["targetId"], edge["sourceId"])):
                    if here not in active_set:
                        continue
                    if activation.get(there, 0.0) >= SA_INHIBITION or incoming.get(there, 0.0) >= SA_INHIBITION:
                        continue  # lateral inhibition: a saturated node takes no more
                    spread = activation[here] * SA_DECAY * weight
                    if spread < SA_THRESHOLD:
                        continue
                    before = incoming.get(there, 0.0)
                    incoming[there] = min(before + spread, 1.0)
                    if incoming[there] > before and there not in depth:
                        depth[there] = hop + 1
            for node_id, value in incoming.items():
                activation[node_id] = max(activation.get(node_id, 0.0), value)
            if len(activation) > SA_MAX_NODES:
                keep = sorted(activation.items(), key=lambda item: (-item[1], item[0]))[:SA_MAX_NODES]
                activation = dict(keep)
            for edge in edges:
                source_act = activation.get(edge["sourceId"], 0.0)
                target_act = activation.get(edge["targetId"], 0.0)
                if source_act >= SA_THRESHOLD and target_act >= SA_THRESHOLD:
                    score = max(source_act, target_act)
                    hop_of = min(depth.get(edge["sourceId"], hop + 1), depth.get(edge["targetId"], hop + 1))
                    if edge["id"] not in collected or collected[edge["id"]]["score"] < score:
                        collected[edge["id"]] = {**edge, "hop": hop_of, "score": round(score, 6)}
    if time.monotonic() > deadline:
        raise SpreadingTimeout
    return list(collected.values())


# --- recall -------------------------------------------------------------------------------------------------------


def _public(fact: dict[str, Any]) -> dict[str, Any]:
    return {
        "source": clean_fact_text(fact["source"]), "relation": fact["relation"],
        "target": clean_fact_text(fact["target"]), "fact": clean_fact_text(fact["fact"]),
        "edgeClass": fact["edgeClass"], "confidence": round(fact["confidence"], 4), "score": fact["score"],
        "hop": fact["hop"], "validFrom": fact["validFrom"], "validTo": fact["validTo"],
    }


def _finish(facts: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    facts.sort(key=lambda f: (-f["score"], f["hop"], f["id"]))
    seen: set[tuple[int, str, int]] = set()
    kept = []
    for fact in facts:
        key = (fact["sourceId"], fact["relation"], fact["targetId"])
        if key in seen:
            continue
        seen.add(key)
        kept.append(fact)
        if len(kept) >= limit:
            break
    return kept


def retrievals_record(*, workspace_id: int, edge_ids: list[int]) -> None:
    """Atomic increments (concurrent recalls never lose a count)."""
    if not edge_ids:
        return
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "UPDATE graph_edges SET retrieval_count = retrieval_count + 1, last_retrieved_at = now() "
            "WHERE workspace_id = %s AND id = ANY(%s)",
            [workspace_id, edge_ids],
        )


def recall_strategy(*, workspace_id: int, requested: str | None, stored: StoredSettings | None = None) -> str:
    if requested:
        return requested
    if stored is None:
        chosen = GraphSettings.objects.filter(workspace_id=workspace_id).values_list(
            "recall_strategy", flat=True).first()
    else:
        chosen = stored.recall_strategy
    return chosen or (settings.GRAPH_RECALL_STRATEGY if settings.GRAPH_RECALL_STRATEGY in STRATEGIES else "bfs")


def facts_recall(
    *,
    workspace_id: int,
    scope: Any = None,
    query: str | None = None,
    entity: str | None = None,
    max_hops: int = 2,
    limit: int = 10,
    at: datetime | None = None,
    edge_classes: list[str] | None = None,
    strategy: str | None = None,
    record: bool = True,
    embed: bool = True,
    settings_max_age: float = 0.0,
) -> dict[str, Any]:
    """Facts about what `query` (or one named `entity`) reaches. The graph is per workspace, so `scope` (user,
    project) does not narrow it. Unknown `entity` → 404 ENTITY_NOT_FOUND; a query matching nothing → no facts."""
    started = time.perf_counter()
    # One read of graph_settings for both the strategy and the decay (context/get lets it be a few seconds old).
    stored = stored_settings(workspace_id=workspace_id, max_age=settings_max_age)
    chosen = recall_strategy(workspace_id=workspace_id, requested=strategy, stored=stored)
    if entity:
        found = entity_lookup(workspace_id=workspace_id, name=entity)
        if found is None:
            raise ApiError(404, "ENTITY_NOT_FOUND", f"No entity named {entity!r} in this workspace; "
                           "graph/entities with a query lists the names it knows.")
        seeds = [found]
    else:
        seeds = seeds_find(workspace_id=workspace_id, query=query or "", limit=limit, embed=embed)
    reading = reading_for(workspace_id=workspace_id, at=at, edge_classes=edge_classes, stored=stored)
    timed_out = False
    facts: list[dict[str, Any]] = []
    if seeds:
        if chosen == "spreading":
            try:
                facts = spreading_activation(reading=reading, seeds=seeds,
                                             timeout_ms=settings.GRAPH_SPREADING_TIMEOUT_MS)
            except SpreadingTimeout:
                timed_out, facts = True, []
        else:
            visits = min(MAX_VISITED, max(MIN_VISITS, VISITS_PER_FACT * limit))
            facts = _score_bfs(bfs(reading=reading, seeds=seeds, max_hops=max_hops, max_visited=visits))
    kept = _finish(facts, limit)
    if record and kept and at is None:
        retrievals_record(workspace_id=workspace_id, edge_ids=[f["id"] for f in kept])
    return {
        "facts": [_public(f) for f in kept],
        "seeds": [{"name": clean_fact_text(s.name), "score": round(s.score, 4)} for s in seeds],
        "strategy": chosen,
        "timedOut": timed_out,
        "durationMs": round((time.perf_counter() - started) * 1000, 2),
    }
