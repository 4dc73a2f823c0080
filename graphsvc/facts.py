"""Fact recall over the entity graph: seed entities from a query, then BFS or spreading activation.

Every function here runs inside the caller's workspace context (RLS); the explicit `workspace_id = …`
predicates are there so that the b-tree indexes lead with the workspace, not for isolation.

Effective confidence (A-MEM): confidence × e^(−rate × days since last observation) × the retrieval
boost (1 + 0.2 ln(1 + retrieval_count)), capped at 1. Facts whose decayed confidence is under
GRAPH_CONFIDENCE_FLOOR are neither walked nor returned; they stay in the table (graph/entities detail lists
them) until eviction.
"""

from __future__ import annotations

import functools
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from config.errors import ApiError
from config.prepared import prepared_cursor
from graphsvc import vectors
from graphsvc.models import ENTITY_TYPES, GraphSettings
from graphsvc.names import normalise_name, normalise_relation
from memories.prompt_text import prompt_line

# The query's embedding (None when it cannot be computed). The graph stores vectors but does not compute them:
# the caller passes the embedder of the retrieval layer, so entities are found by meaning when no word
# matches.
QueryEmbedder = Callable[[str], Any]

CLASS_WEIGHTS = {"causal": 1.2, "semantic": 1.0, "temporal": 0.9, "entity": 0.8}
MAX_VISITED = 500  # nodes one BFS may visit: bounds the final edge query on hub-heavy graphs
# Fact recall visits at most this many entities per fact asked for (at least 40): the best-seeded first. A
# 2-hop neighbourhood in a dense graph holds thousands of facts, and fetching them all to return ten is what
# made recall slow; the facts that score highest sit next to the best seeds.
VISITS_PER_FACT = 4
MIN_VISITS = 40
# Retrieval counts are statistics: a transaction that holds nothing else can commit them without waiting for
# the WAL flush (a crash may lose the last fraction of a second of counts, never corrupt them). Set inside the
# statement that writes them, so it costs no round trip; only callers that own the transaction ask for it.
LAZY_COMMIT_SQL = "set_config('synchronous_commit', 'off', true)"
# Neighbours one node offers per BFS hop, strongest first: a hub with thousands of facts must not flood the
# hop (the visit budget above takes the best-seeded of what is offered).
MAX_FANOUT = 100
# Words of a query looked up per seed search (proper nouns and names first): each is two index range scans.
SEED_WORDS = 6
SEED_STRUCTURAL_WEIGHT = 0.4
# Entities found by meaning (no word matched) must be at least this close to the query.
EMBEDDING_SEED_MIN_COSINE = 0.3
SEED_COMMUNITY_CAP = 3
# Spreading activation (SYNAPSE, as in Zeph).
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


@dataclass(frozen=True)
class Audience:
    """Whose facts and entities a reader may see. Unrestricted: all of them (the workspace's own people on the
    dashboard, exports, upkeep). Restricted: what the end user `user_id` may read, i.e. facts supported by at
    least one of their memories or a shared one (user_id None: shared memories only), and entities mentioned
    by such a memory. A fact or entity with no recorded memory at all (imported, or made by hand) is
    visible."""

    restricted: bool = False
    user_id: str | None = None


EVERYONE = Audience()


def audience_for(scope: Any) -> Audience:
    """The audience of an SDK caller: the end user its scope names (MemoryScope or None for everyone)."""
    return EVERYONE if scope is None else Audience(restricted=True, user_id=scope.user_id)


def fact_visible_sql(alias: str = "e") -> str:
    return (
        f"(NOT EXISTS (SELECT 1 FROM graph_fact_evidence fe WHERE fe.workspace_id = %(ws)s "
        f"AND fe.edge_id = {alias}.id) OR EXISTS (SELECT 1 FROM graph_fact_evidence fe "
        f"WHERE fe.workspace_id = %(ws)s AND fe.edge_id = {alias}.id "
        f"AND (fe.user_id IS NULL OR fe.user_id = %(viewer)s)))"
    )


def entity_visible_sql(node: str = "n.id") -> str:
    return (
        f"(NOT EXISTS (SELECT 1 FROM memory_node_links vl WHERE vl.workspace_id = %(ws)s "
        f"AND vl.node_id = {node} AND vl.role = 'mentions') OR EXISTS (SELECT 1 FROM memory_node_links vl "
        f"JOIN memories vm ON vm.workspace_id = vl.workspace_id AND vm.id = vl.memory_id "
        f"WHERE vl.workspace_id = %(ws)s AND vl.node_id = {node} AND vl.role = 'mentions' "
        f"AND (vm.user_id IS NULL OR vm.user_id = %(viewer)s)))"
    )


@dataclass
class Reading:
    """How edges are filtered: now or at a past time, by class and relation, above the confidence floor."""

    workspace_id: int
    at: datetime | None = None
    edge_classes: Sequence[str] | None = None
    edge_types: list[str] | None = None
    rate: float = 0.01
    rates: dict[str, float] = field(default_factory=dict)
    stored_strategy: str | None = None
    # Where the decay rates come from in SQL: the parameters below, or (seeded_bfs) the settings row read by
    # the same statement.
    rate_sql: str = "%(rate)s"
    rates_sql: str = "%(rates)s::jsonb"
    audience: Audience = EVERYONE
    # Which way a walk follows facts: out (source → target), in (target → source) or both.
    direction: str = "both"

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
        if self.audience.restricted:
            parts.append(fact_visible_sql(e))
        return " AND ".join(parts)

    def decayed(self, alias: str = "e") -> str:
        e = alias
        return (
            f"({e}.confidence * exp(-coalesce(({self.rates_sql} ->> {e}.edge_type)::float8, {self.rate_sql}) "
            f"* greatest(0, extract(epoch FROM (%(ref)s - coalesce({e}.last_observed_at, {e}.created_at)))"
            " / 86400.0)))"
        )

    def params(self, **extra: Any) -> dict[str, Any]:
        return {
            "ws": self.workspace_id,
            "at": self.at,
            "classes": self.edge_classes,
            "types": self.edge_types,
            "floor": settings.GRAPH_CONFIDENCE_FLOOR,
            "rate": self.rate,
            "rates": json.dumps(self.rates),
            "ref": self.at or timezone.now(),
            "viewer": self.audience.user_id,
            **extra,
        }


@dataclass(frozen=True)
class Stored:
    """The workspace's graph settings that reading facts depends on (None: not set)."""

    rate: float | None = None
    rates: dict[str, float] = field(default_factory=dict)
    strategy: str | None = None


# The same settings as three columns of a statement that runs anyway (the seed or entity lookup): three
# one-row index lookups evaluated once per statement, instead of a round trip of their own.
STORED_SQL = """
    (SELECT gs.decay_rate FROM graph_settings gs WHERE gs.workspace_id = %(ws)s),
    (SELECT gs.decay_rates FROM graph_settings gs WHERE gs.workspace_id = %(ws)s),
    (SELECT gs.recall_strategy FROM graph_settings gs WHERE gs.workspace_id = %(ws)s)
"""


def _stored(rate: float | None, rates: Any, strategy: str | None) -> Stored:
    if isinstance(rates, str | bytes):
        rates = json.loads(rates)
    return Stored(rate=rate, rates=rates or {}, strategy=strategy)


def reading_for(
    *,
    workspace_id: int,
    at: datetime | None = None,
    edge_classes: Sequence[str] | None = None,
    edge_types: list[str] | None = None,
    stored: Stored | None = None,
    audience: Audience = EVERYONE,
    direction: str = "both",
) -> Reading:
    """How to read facts now or at `at`; `stored` spares the settings read when a lookup brought them
    along."""
    if stored is None:
        row = (
            GraphSettings.objects.filter(workspace_id=workspace_id)
            .values_list("decay_rate", "decay_rates", "recall_strategy")
            .first()
        )
        stored = _stored(*row) if row else Stored()
    rate = stored.rate if stored.rate is not None else settings.GRAPH_DECAY_RATE
    return Reading(
        workspace_id=workspace_id,
        at=at,
        edge_classes=list(edge_classes) if edge_classes else None,
        edge_types=list(edge_types) if edge_types else None,
        rate=rate,
        rates=stored.rates,
        stored_strategy=stored.strategy,
        audience=audience,
        direction=direction,
    )


DIRECTIONS = ("out", "in", "both")


def edge_types_normalised(edge_types: Sequence[str] | None) -> list[str] | None:
    """Edge types as the caller wrote them, normalised like stored relations ("works on" → works_on)."""
    normalised = [t for t in (normalise_relation(raw) for raw in edge_types or []) if t]
    return list(dict.fromkeys(normalised)) or None


def neighbours_sql(*, direction: str, out: str, incoming: str) -> str:
    """The two halves of a hop (facts leaving a node, facts arriving at it) that `direction` follows."""
    parts = {"out": [out], "in": [incoming]}.get(direction, [out, incoming])
    return "\n                UNION ALL\n".join(parts)


def boosted(decayed: float, retrieval_count: int) -> float:
    """A-MEM link weight: re-retrieved facts count for more, never above 1."""
    return min(1.0, decayed * (1.0 + 0.2 * math.log1p(max(retrieval_count, 0))))


# --- seeds --------------------------------------------------------------------------------------------------


# Words that name no entity: question words, auxiliaries, pronouns, articles, prepositions, conjunctions and
# fillers. Small on purpose; verbs stay (a query's verb can name a fact's relation: "works on" → works_on).
_STOP_WORDS_TEXT = """
    a about above after again against all also am an and any are aren as at be because been before being below
    between both but by can cannot could did didn do does doesn doing don done down during each either else
    ever every few for from further had hadn has hasn have haven having he her here hers herself him himself
    his how however i if in into is isn it its itself just let may me might more most much must my myself no
    nor not now of off on once only or other ought our ours ourselves out over own per please quite rather
    same shall she should so some such than that the their theirs them themselves then there these they this
    those though through thus to too under until up upon us very via was wasn we were weren what whatever when
    whenever where whether which while who whoever whom whose why will with within without would yes yet you
    your yours yourself yourselves thing things something anything everything someone anyone everyone
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
# Lower-case words a capitalised name may hold ("Bank of America", "Ludwig van Beethoven").
NAME_CONNECTORS = frozenset(
    {"of", "de", "del", "der", "den", "da", "di", "du", "la", "le", "van", "von", "and"}
)
MAX_PHRASES = 3
MAX_PHRASE_WORDS = 5
MAX_RELATION_WORDS = 6
# A fact whose relation a query word starts ("what does Alice work on" → works_on) scores this much more.
RELATION_MATCH_BOOST = 1.5
_TOKEN = re.compile(r"\w+")


@dataclass(frozen=True)
class QueryTerms:
    """What a query names: `words` to look up in the entity terms (proper nouns and multi-word names first),
    `phrases` (multi-word capitalised names, normalised like aliases) to match whole aliases, and `relations`
    (content words, stemmed) that a fact's relation may start with."""

    words: list[str]
    phrases: list[str]
    relations: list[str]


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _gap_joins(gap: str) -> bool:
    """Two tokens of one name are separated by a space or two, or a hyphen, ampersand or dot ("St. Louis")."""
    return 0 < len(gap) <= 3 and gap.strip() in ("", "-", "&", ".")


def query_terms(query: str) -> QueryTerms:
    """The query's content words: stop words out, multi-word capitalised names kept whole (their inner words
    too, stop word or not: "The Who", "New York"). Plain string code over at most 500 characters."""
    text = query[:500]
    tokens = [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)][:100]
    capitalised = [t[0][:1].isupper() for t in tokens]
    # A title-cased sentence names nothing in particular: its capitals are no evidence of a name.
    shouting = len(tokens) >= 5 and sum(capitalised) >= 0.8 * len(tokens)
    runs: list[list[int]] = []
    if not shouting:
        run: list[int] = []
        for i, (token, start, _) in enumerate(tokens):
            joined = bool(run) and _gap_joins(text[tokens[run[-1]][2] : start])
            namey = capitalised[i] or (bool(run) and joined and token.isdigit())
            connector = bool(run) and joined and token.lower() in NAME_CONNECTORS
            if (namey or connector) and (not run or joined) and len(run) < MAX_PHRASE_WORDS:
                run.append(i)
                continue
            runs.append(run)
            run = [i] if capitalised[i] else []
        runs.append(run)
    phrases: list[str] = []
    name_words: list[str] = []
    for run in runs:
        while run and tokens[run[0]][0].lower() in STOP_WORDS | NAME_CONNECTORS:
            run = run[1:]  # "What Kubernetes", "The Payments Gateway" start with a sentence's capital
        while run and tokens[run[-1]][0].lower() in NAME_CONNECTORS:
            run = run[:-1]
        if len(run) >= 2:
            phrase = normalise_name(text[tokens[run[0]][1] : tokens[run[-1]][2]])
            if phrase and len(phrases) < MAX_PHRASES:
                phrases.append(phrase)
            name_words += [tokens[i][0].lower() for i in run if len(tokens[i][0]) >= 2]
    lowered = [t[0].lower() for t in tokens]
    content = [w for w in lowered if len(w) >= 3 and w not in STOP_WORDS]
    proper = [w for w, cap in zip(lowered, capitalised, strict=True) if cap and w in content]
    words = [w[:64] for w in dict.fromkeys(name_words + proper + content)][:SEED_WORDS]
    if not words:
        whole = "".join(ch for ch in text.lower() if ch.isalnum())[:64]
        words = [whole] if len(whole) >= 2 else []
    relations = list(dict.fromkeys(_stem(w)[:64] for w in content if not w.isdigit()))[:MAX_RELATION_WORDS]
    return QueryTerms(words=words, phrases=phrases, relations=relations)


def _words(query: str) -> list[str]:
    return query_terms(query).words


def _upper(prefix: str) -> str:
    """The smallest string above every string starting with `prefix` (code-point order = C collation
    order)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def visible_entity_and(audience: Audience, node: str = "n.id") -> str:
    """` AND <the entity is visible>` for a restricted audience, nothing otherwise."""
    return f" AND {entity_visible_sql(node)}" if audience.restricted else ""


def entity_lookup(*, workspace_id: int, name: str, audience: Audience = EVERYONE) -> Seed | None:
    """One entity by alias or canonical name (any type); None when there is none (or the audience may not see
    it)."""
    return entity_lookup_stored(workspace_id=workspace_id, name=name, audience=audience)[0]


def entity_lookup_stored(
    *, workspace_id: int, name: str, audience: Audience = EVERYONE
) -> tuple[Seed | None, Stored | None]:
    """`entity_lookup` and, when the entity exists, the workspace's graph settings from the same statement."""
    canonical = normalise_name(name)
    if canonical is None:
        return None, None
    visible = visible_entity_and(audience)
    with prepared_cursor() as cursor:
        cursor.execute(
            f"""
            SELECT x.id, x.label, {STORED_SQL} FROM (
                (SELECT n.id, n.label FROM graph_entity_aliases a JOIN graph_nodes n ON n.id = a.node_id
                 WHERE a.workspace_id = %(ws)s AND a.alias = %(name)s AND n.workspace_id = %(ws)s{visible}
                 ORDER BY n.mention_count DESC, n.id LIMIT 1)
                UNION ALL
                (SELECT n.id, n.label FROM graph_nodes n
                 WHERE n.workspace_id = %(ws)s AND n.node_type = ANY(%(types)s)
                   AND n.node_key = %(name)s{visible}
                 ORDER BY n.mention_count DESC, n.id LIMIT 1)
                LIMIT 1
            ) x
            """,
            {"ws": workspace_id, "name": canonical, "types": list(ENTITY_TYPES), "viewer": audience.user_id},
        )
        row = cursor.fetchone()
    if row is None:
        return None, None
    return Seed(node_id=row[0], score=1.0, name=row[1]), _stored(*row[2:5])


CLOSEST_NAMES = 5


def entity_closest(*, workspace_id: int, name: str, audience: Audience = EVERYONE) -> list[str]:
    """The names (at most CLOSEST_NAMES) nearest to one that matched no entity: for each word of it, the name
    and alias words that share its first three letters (a b-tree range, as seeds are found), ranked by the
    trigram similarity summed over the words, then by mentions; only entities the audience may see."""
    tokens = dict.fromkeys(token.lower()[:64] for token in _TOKEN.findall(name[:512]))
    words = [w for w in tokens if len(w) >= 2][:SEED_WORDS]
    if not words:
        return []
    prefixes = [w[:3] for w in words]
    visible = f"AND {entity_visible_sql('n.id')}" if audience.restricted else ""
    with prepared_cursor() as cursor:
        cursor.execute(
            f"""
            WITH near AS (
                SELECT t.node_id, q.i, max(similarity(t.term, q.w)) AS score
                FROM unnest(%(words)s::text[], %(p3)s::text[], %(p3his)s::text[]) WITH ORDINALITY AS q(w,
                    p3, p3hi, i)
                CROSS JOIN LATERAL (
                    SELECT node_id, term FROM graph_entity_terms
                    WHERE workspace_id = %(ws)s AND weight = 1
                      AND term >= (q.p3 COLLATE "C") AND term < (q.p3hi COLLATE "C")
                    LIMIT 200
                ) t
                GROUP BY t.node_id, q.i
            )
            SELECT n.label FROM (SELECT node_id, sum(score) AS score FROM near GROUP BY node_id) c
            JOIN graph_nodes n ON n.workspace_id = %(ws)s AND n.id = c.node_id
            WHERE c.score > 0 {visible}
            ORDER BY c.score DESC, n.mention_count DESC, n.id LIMIT %(limit)s
            """,
            {
                "ws": workspace_id,
                "words": words,
                "p3": prefixes,
                "p3his": [_upper(p) for p in prefixes],
                "limit": CLOSEST_NAMES,
                "viewer": audience.user_id,
            },
        )
        return list(dict.fromkeys(prompt_line(row[0]) for row in cursor.fetchall()))


def entity_not_found(*, workspace_id: int, name: str, audience: Audience = EVERYONE) -> ApiError:
    """404 ENTITY_NOT_FOUND naming the closest entities the caller may see (details.closest)."""
    closest = entity_closest(workspace_id=workspace_id, name=name, audience=audience)
    hint = (
        f" Closest: {', '.join(closest)}."
        if closest
        else " graph/entities with a query lists the names it knows."
    )
    return ApiError(
        404,
        "ENTITY_NOT_FOUND",
        f"No entity named {prompt_line(name)[:200]!r} in this workspace.{hint}",
        details={"closest": closest},
    )


def _candidates(limit: int) -> int:
    return max(limit + limit // 2, 8)


# A candidate's community (a row of its own, at most one per entity), by primary key. A join: as a
# correlated subquery the lookup cost 3× as much server time over 50 candidates (0.34 against 0.12 ms).
COMMUNITY_JOIN = "LEFT JOIN graph_community_members cm ON cm.workspace_id = %(ws)s AND cm.node_id = n.id"
# Structure of a candidate seed: how many current facts it has (up to 50 each way) and how many kinds.
DEGREE_SQL = """
    LEFT JOIN LATERAL (
        SELECT count(*) AS degree, count(DISTINCT x.edge_type) AS kinds FROM (
            (SELECT e.edge_type FROM graph_edges e WHERE e.workspace_id = %(ws)s AND e.from_node_id = n.id
               AND e.origin = 'llm_entity' AND e.expired_at IS NULL AND e.valid_to IS NULL LIMIT 50)
            UNION ALL
            (SELECT e.edge_type FROM graph_edges e WHERE e.workspace_id = %(ws)s AND e.to_node_id = n.id
               AND e.origin = 'llm_entity' AND e.expired_at IS NULL AND e.valid_to IS NULL LIMIT 50)
        ) x
    ) d ON true
"""


def seeds_find(
    *,
    workspace_id: int,
    query: str,
    limit: int,
    embed: QueryEmbedder | None = None,
    audience: Audience = EVERYONE,
) -> list[Seed]:
    return seeds_find_stored(
        workspace_id=workspace_id, query=query, limit=limit, embed=embed, audience=audience
    )[0]


# Per (word, entity) the best match: the word itself 1, a longer word it starts 0.85, a near spelling 0.6 ×
# trigram similarity; halved for summary words; a multi-word name of the query that is a whole alias adds 1
# (so "New York" outranks "York" and "New Jersey", whose words match as well). An entity matching more of the
# query's words ranks higher (the sum); structure then re-ranks the best text matches only, its degree counts
# being the costly part of seeding. Shared by seeds_find_stored and seeded_bfs, which must find the same
# candidates.
SEED_MATCH_SQL = """
    matched AS (
        SELECT q.i, t.node_id,
               max(CASE WHEN t.term = q.w THEN 1.0::float8
                        WHEN starts_with(t.term, q.w) THEN 0.85::float8
                        ELSE 0.6::float8 * similarity(t.term, q.w)::float8 END
                   * CASE WHEN t.weight = 1 THEN 1.0::float8 ELSE 0.5::float8 END) AS score
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
        GROUP BY q.i, t.node_id
        UNION ALL
        SELECT 0::bigint, a.node_id, 1.0::float8
        FROM unnest(%(phrases)s::text[]) AS p(phrase)
        JOIN graph_entity_aliases a ON a.workspace_id = %(ws)s AND a.alias = p.phrase
    ),
    text AS (SELECT node_id, sum(score) AS score FROM matched GROUP BY node_id {visible}),
    candidate AS (SELECT node_id, score FROM text ORDER BY score DESC, node_id LIMIT %(candidates)s)"""


def seed_match_sql(audience: Audience) -> str:
    """SEED_MATCH_SQL for an audience: a restricted one never seeds from an entity it may not see."""
    visible = f"HAVING {entity_visible_sql('matched.node_id')}" if audience.restricted else ""
    return SEED_MATCH_SQL.replace("{visible}", visible)


# The candidates' columns as _hybrid takes them: id, label, community, degree, kinds, text score (0-1).
SEED_CANDIDATE_SQL = f"""
    SELECT n.id, n.label, cm.community_id, coalesce(d.degree, 0) AS degree, coalesce(d.kinds, 0) AS kinds,
           least(1.0::float8, c.score / coalesce(nullif((SELECT max(score) FROM text), 0), 1.0)) AS text
    FROM candidate c JOIN graph_nodes n ON n.workspace_id = %(ws)s AND n.id = c.node_id
    {COMMUNITY_JOIN} {DEGREE_SQL}"""


def seed_params(
    *, workspace_id: int, words: list[str], limit: int, phrases: Sequence[str] = ()
) -> dict[str, Any]:
    prefixes = [w[:3] for w in words]
    return {
        "ws": workspace_id,
        "words": words,
        "phrases": list(phrases),
        "his": [_upper(w) for w in words],
        "p3": prefixes,
        "p3his": [_upper(p) for p in prefixes],
        "candidates": _candidates(limit),
    }


def seeds_find_stored(
    *,
    workspace_id: int,
    query: str,
    limit: int,
    embed: QueryEmbedder | None = None,
    audience: Audience = EVERYONE,
) -> tuple[list[Seed], Stored | None]:
    """Entities a query names: word and prefix matches on names and aliases (weighted over summaries), near
    spellings sharing the first three letters, then the query embedding when no word matched. One statement
    finds, scores and re-ranks the word matches by structure (a second, the embedding search, only when no
    word matched); every lookup is on an index that leads with the workspace. The workspace's graph settings
    come along when a word matched (None otherwise)."""
    terms = query_terms(query)
    if terms.words:
        with prepared_cursor() as cursor:
            cursor.execute(
                f"WITH {seed_match_sql(audience)} SELECT x.*, {STORED_SQL} FROM ({SEED_CANDIDATE_SQL}) x",
                {
                    **seed_params(
                        workspace_id=workspace_id, words=terms.words, limit=limit, phrases=terms.phrases
                    ),
                    "viewer": audience.user_id,
                },
            )
            found = cursor.fetchall()
        if found:
            return _hybrid(rows=[row[:6] for row in found], limit=limit), _stored(*found[0][6:9])
    if embed is None:
        return [], None
    seeds = embedding_seeds_find(
        workspace_id=workspace_id, query=query, limit=limit, embed=embed, audience=audience
    )
    return seeds, None


def embedding_seeds_find(
    *, workspace_id: int, query: str, limit: int, embed: QueryEmbedder, audience: Audience = EVERYONE
) -> list[Seed]:
    """Seeds from the query embedding (no word matched): nearest entities, re-ranked by structure like word
    seeds."""
    text_scores = _embedding_seeds(
        workspace_id=workspace_id, query=query, limit=limit, embed=embed, audience=audience
    )
    if not text_scores:
        return []
    top = max(text_scores.values()) or 1.0
    candidates = sorted(text_scores.items(), key=lambda item: (-item[1], item[0]))[: _candidates(limit)]
    rows = _structure(workspace_id=workspace_id, text={n: min(1.0, s / top) for n, s in candidates})
    return _hybrid(rows=rows, limit=limit)


def _embedding_seeds(
    *, workspace_id: int, query: str, limit: int, embed: QueryEmbedder, audience: Audience
) -> dict[int, float]:
    vector = embed(query)
    if vector is None:
        return {}
    with connections["app"].cursor() as cursor:
        nearest = vectors.nearest_entities(
            cursor,
            workspace_id=workspace_id,
            vector=vector,
            model=settings.EMBEDDING_MODEL,
            where=f"n.node_type = ANY(%(types)s){visible_entity_and(audience)}",
            params={"ws": workspace_id, "types": list(ENTITY_TYPES), "viewer": audience.user_id},
            limit=limit,
        )
    return {node_id: cosine for node_id, _, cosine in nearest if cosine > EMBEDDING_SEED_MIN_COSINE}


def _structure(
    *, workspace_id: int, text: dict[int, float]
) -> list[tuple[int, str, int | None, int, int, float]]:
    """Label, community, degree and relation kinds of the embedding-found candidates."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            f"""
            SELECT n.id, n.label, cm.community_id, coalesce(d.degree, 0), coalesce(d.kinds, 0)
            FROM graph_nodes n {COMMUNITY_JOIN} {DEGREE_SQL}
            WHERE n.workspace_id = %(ws)s AND n.id = ANY(%(ids)s)
            """,
            {"ws": workspace_id, "ids": list(text)},
        )
        return [(*row, text[row[0]]) for row in cursor.fetchall()]


def _hybrid(*, rows: list[tuple[int, str, int | None, int, int, float]], limit: int) -> list[Seed]:
    """text × 0.6 + structure × 0.4 (degree relative to the candidates, relation variety), at most three seeds
    per community unless that would leave none. Rows: id, label, community, degree, kinds, text score
    (0-1)."""
    max_degree = max((row[3] for row in rows), default=0) or 1
    ranked = []
    for node_id, label, community, degree, kinds, text in rows:
        structural = 0.6 * degree / max_degree + 0.4 * min(kinds / 4, 1.0) if degree else 0.0
        hybrid = text * (1 - SEED_STRUCTURAL_WEIGHT) + structural * SEED_STRUCTURAL_WEIGHT
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


# --- BFS ----------------------------------------------------------------------------------------------------


@dataclass
class Walk:
    depth: dict[int, int]
    seed_score: dict[int, float]
    facts: list[dict[str, Any]]


def class_weight_sql(alias: str = "e") -> str:
    cases = " ".join(f"WHEN '{name}' THEN {weight}" for name, weight in CLASS_WEIGHTS.items())
    return f"(CASE {alias}.edge_class {cases} ELSE 1.0 END)::float8"


def boosted_sql(decayed: str, count: str) -> str:
    """`boosted` in SQL, operation for operation, so SQL and Python rank facts alike."""
    return (
        f"least(1.0::float8, {decayed} * "
        f"(1.0::float8 + 0.2::float8 * ln(1.0::float8 + greatest({count}, 0))))"
    )


def _hop_sql(hop: int, where: str, strength: str, direction: str = "both") -> str:
    """One BFS level as two CTEs: h<hop>, the nodes it reaches first (each keeping the best seed score that
    reached it), and v<hop>, everything visited so far. Every frontier node offers its MAX_FANOUT strongest
    neighbours (effective confidence × class weight), so a hub costs one index range, not its whole
    neighbourhood in rows; the visit budget then goes to the best-seeded nodes first, stronger links before
    weaker, ids last."""
    frontier = "v0" if hop == 1 else f"h{hop - 1}"
    seen = f"v{hop - 1}"
    neighbours = neighbours_sql(
        direction=direction,
        out=f"SELECT e.to_node_id AS there, {strength} AS strength FROM graph_edges e "
        f"WHERE {where} AND e.from_node_id = f.node",
        incoming=f"SELECT e.from_node_id AS there, {strength} AS strength FROM graph_edges e "
        f"WHERE {where} AND e.to_node_id = f.node",
    )
    return f"""
    h{hop} AS (
        SELECT x.there AS node, max(f.seed) AS seed
        FROM {frontier} f CROSS JOIN LATERAL (
            SELECT n.there, n.strength FROM (
                {neighbours}
            ) n
            ORDER BY n.strength DESC, n.there LIMIT %(fanout)s
        ) x
        WHERE NOT EXISTS (SELECT 1 FROM {seen} p WHERE p.node = x.there)
        GROUP BY x.there
        ORDER BY max(f.seed) DESC, max(f.seed * x.strength) DESC, x.there
        LIMIT greatest(%(visits)s - (SELECT count(*) FROM {seen}), 0)
    ),
    v{hop} AS (SELECT node, seed, depth FROM {seen} UNION ALL SELECT node, seed, {hop} FROM h{hop})"""


# Seed ranking in SQL, operation for operation as _hybrid does it (so both paths pick the same seeds with the
# same scores): text × 0.6 + structure × 0.4, at most SEED_COMMUNITY_CAP per community (the best-ranked entity
# of a community always passes, so the cap never leaves none), best first, `limit` of them, clamped to 0.1-1.
SEED_RANK_SQL = f"""
    cand AS MATERIALIZED ({SEED_CANDIDATE_SQL}
    ),
    ranked AS (
        SELECT id, label, community_id,
               text * {1 - SEED_STRUCTURAL_WEIGHT}::float8
               + CASE WHEN degree > 0
                      THEN 0.6::float8 * degree::float8 / (SELECT greatest(max(degree), 1) FROM cand)::float8
                           + 0.4::float8 * least(kinds::float8 / 4, 1.0::float8)
                      ELSE 0.0::float8 END * {SEED_STRUCTURAL_WEIGHT}::float8 AS hybrid
        FROM cand
    ),
    seeds AS MATERIALIZED (
        SELECT id AS node, label, least(1.0::float8, greatest(0.1::float8, hybrid)) AS seed, hybrid
        FROM (SELECT r.*, row_number() OVER (PARTITION BY community_id ORDER BY hybrid DESC, id) AS nth
              FROM ranked r) r
        WHERE community_id IS NULL OR nth <= {SEED_COMMUNITY_CAP}
        ORDER BY hybrid DESC, id LIMIT %(seed_limit)s
    )"""

# The workspace's graph settings, one row whether or not it has any; the walk reads its decay rates from here
# and runs only when the strategy that applies is BFS (the caller runs spreading activation from the returned
# seeds). Two index probes say whether the workspace has entity vectors of the model and summarised
# communities: a query that names no entity then costs no embedding search, and context/get looks for
# communities only where there are some (each probe is one partial-index lookup).
CFG_SQL = """
    cfg AS MATERIALIZED (
        SELECT gs.decay_rate AS rate, gs.decay_rates AS rates,
               gs.recall_strategy AS stored,
               coalesce(%(requested)s::text, gs.recall_strategy, %(default)s::text) AS chosen,
               EXISTS (SELECT 1 FROM graph_nodes v WHERE v.workspace_id = %(ws)s AND v.embedding IS NOT NULL
                       AND v.embedding_model = %(model)s) AS has_vectors,
               EXISTS (SELECT 1 FROM graph_communities c WHERE c.workspace_id = %(ws)s AND c.summary <> '')
                   AS has_communities
        FROM (SELECT 1) one LEFT JOIN graph_settings gs ON gs.workspace_id = %(ws)s
    )"""


# A query word that starts the fact's relation ("work" → works_on) multiplies its score by
# RELATION_MATCH_BOOST.
RELATION_BOOST_SQL = f"""(CASE WHEN EXISTS (SELECT 1 FROM unnest(%(relations)s::text[]) AS r(w)
                                   WHERE starts_with(found.edge_type, r.w))
                             THEN {RELATION_MATCH_BOOST}::float8 ELSE 1.0::float8 END)"""


def _walk_sql(*, reading: Reading, max_hops: int, record: bool, lazy_commit: bool, seeded: bool) -> str:
    """The BFS statement: from seeds given as parameters, or (`seeded`) from the seed search and settings read
    in the same statement, whose seeds and settings then lead every row.

    Built once per shape and process: its text (11-13 KB) depends only on which filters apply, never on their
    values (those are parameters). Rebuilt on every call it cost ~0.1 ms of string formatting, and as a new
    string every time, hashing and encoding it again for the statement caches (config.prepared, psycopg's
    prepared statements) as much again; the same string object hashes once. PostgreSQL parses and plans it
    once per connection either way (a prepared statement)."""
    return _walk_sql_text(
        _WalkShape(
            at=reading.at is not None,
            classes=bool(reading.edge_classes),
            types=bool(reading.edge_types),
            restricted=reading.audience.restricted,
            rate_sql=reading.rate_sql,
            rates_sql=reading.rates_sql,
            direction=reading.direction,
        ),
        max_hops=max_hops,
        record=record,
        lazy_commit=lazy_commit,
        seeded=seeded,
    )


@dataclass(frozen=True)
class _WalkShape:
    """What of a Reading the statement's text depends on."""

    at: bool
    classes: bool
    types: bool
    restricted: bool
    rate_sql: str
    rates_sql: str
    direction: str


@functools.lru_cache(maxsize=256)
def _walk_sql_text(shape: _WalkShape, *, max_hops: int, record: bool, lazy_commit: bool, seeded: bool) -> str:
    reading = Reading(
        workspace_id=0,
        at=datetime.min if shape.at else None,
        edge_classes=["_"] if shape.classes else None,
        edge_types=["_"] if shape.types else None,
        rate_sql=shape.rate_sql,
        rates_sql=shape.rates_sql,
        audience=Audience(restricted=True) if shape.restricted else EVERYONE,
        direction=shape.direction,
    )
    where = reading.where()
    decayed = reading.decayed()
    strength = f"{decayed} * {class_weight_sql()}"
    hops = "".join("," + _hop_sql(hop, where, strength, reading.direction) for hop in range(1, max_hops + 1))
    visited = f"v{max_hops}"
    lazy = f", {LAZY_COMMIT_SQL}" if record and lazy_commit else ""
    bump = (
        """,
    bump AS (
        UPDATE graph_edges g SET retrieval_count = g.retrieval_count + 1, last_retrieved_at = now()
        FROM top WHERE g.workspace_id = %(ws)s AND g.id = top.id
    )"""
        if record
        else ""
    )
    if seeded:
        head = f"""{CFG_SQL}, {seed_match_sql(reading.audience)}, {SEED_RANK_SQL},
    v0 AS (SELECT node, seed, 0 AS depth FROM seeds WHERE (SELECT chosen FROM cfg) = 'bfs')"""
        lead = (
            "k.ids, k.labels, k.scores, cfg.rate, cfg.rates, cfg.stored, cfg.has_vectors, "
            "cfg.has_communities, "
        )
        lead_from = """(SELECT array_agg(node ORDER BY hybrid DESC, node) AS ids,
                  array_agg(label ORDER BY hybrid DESC, node) AS labels,
                  array_agg(seed ORDER BY hybrid DESC, node) AS scores FROM seeds) k
                  CROSS JOIN cfg CROSS JOIN """
    else:
        head = """
    v0 AS (
        SELECT s.node, s.seed, 0 AS depth
        FROM unnest(%(seed_ids)s::bigint[], %(seed_scores)s::float8[]) AS s(node, seed)
    )"""
        lead = lead_from = ""
    # Labels, fact text and validity are read for the returned facts only; everything before that is served by
    # the covering indexes of migration 0010 (index-only scans under the RLS policy).
    return f"""
    WITH {head}{hops},
    found AS (
        SELECT e.id, e.from_node_id, e.to_node_id, e.edge_type, e.edge_class,
               {boosted_sql(decayed, "e.retrieval_count")} AS confidence,
               least(a.depth, b.depth) AS hop, greatest(a.seed, b.seed) AS seed
        FROM {visited} a
        JOIN graph_edges e ON e.from_node_id = a.node AND {where}
        JOIN {visited} b ON b.node = e.to_node_id
    ),
    scored AS (
        SELECT found.*,
               round((seed * (1.0::float8 / (1 + hop)) * confidence * {class_weight_sql("found")}
                      * {RELATION_BOOST_SQL})::numeric, 6)::float8 AS score
        FROM found
    ),
    top AS (
        SELECT * FROM (
            SELECT DISTINCT ON (from_node_id, edge_type, to_node_id) * FROM scored
            ORDER BY from_node_id, edge_type, to_node_id, score DESC, hop, id
        ) d ORDER BY score DESC, hop, id LIMIT %(limit)s
    ){bump}
    SELECT {lead}w.nodes, w.depths, w.seeds, top.id, top.from_node_id, s.label, top.edge_type,
           top.to_node_id, t.label,
           g.fact, top.edge_class, g.confidence, top.confidence, top.hop, top.score, g.valid_from, g.valid_to
    FROM {lead_from}(SELECT array_agg(node) AS nodes, array_agg(depth) AS depths,
                            array_agg(seed) AS seeds{lazy}
          FROM {visited}) w
    LEFT JOIN top ON true
    LEFT JOIN graph_edges g ON g.workspace_id = %(ws)s AND g.id = top.id
    LEFT JOIN graph_nodes s ON s.workspace_id = %(ws)s AND s.id = top.from_node_id
    LEFT JOIN graph_nodes t ON t.workspace_id = %(ws)s AND t.id = top.to_node_id
    ORDER BY top.score DESC, top.hop, top.id
    """


def _walk(rows: list[tuple[Any, ...]]) -> Walk:
    """The walk from the BFS statement's rows (one row with no fact when nothing was found)."""
    nodes, depths, seed_scores = rows[0][:3]
    facts = [
        {
            "id": edge_id,
            "sourceId": source_id,
            "source": source,
            "relation": relation,
            "targetId": target_id,
            "target": target,
            "fact": fact,
            "edgeClass": edge_class,
            "storedConfidence": float(stored),
            "confidence": float(confidence),
            "hop": hop,
            "score": float(score),
            "validFrom": valid_from,
            "validTo": valid_to,
        }
        for (
            _,
            _,
            _,
            edge_id,
            source_id,
            source,
            relation,
            target_id,
            target,
            fact,
            edge_class,
            stored,
            confidence,
            hop,
            score,
            valid_from,
            valid_to,
        ) in rows
        if edge_id is not None
    ]
    return Walk(
        depth=dict(zip(nodes or [], depths or [], strict=True)),
        seed_score=dict(zip(nodes or [], seed_scores or [], strict=True)),
        facts=facts,
    )


def bfs(
    *,
    reading: Reading,
    seeds: list[Seed],
    max_hops: int,
    max_visited: int = MAX_VISITED,
    limit: int = 10,
    record: bool = False,
    lazy_commit: bool = False,
    relations: Sequence[str] = (),
) -> Walk:
    """Multi-source BFS (both ways, or the reading's direction) and the scoring of the facts among the visited
    nodes, in one statement whatever max_hops and the graph's size. Each node remembers the best seed score
    that reached it; a fact scores seed × 1/(1 + hop) × effective confidence × class weight (× the relation
    boost when one of `relations`, the query's words, starts its relation), deduplicated on (source,
    relation, target), best first, `limit` of them. With `record`, the same statement counts the returned
    facts as retrieved (a data-modifying CTE: the scores are computed from the counts before this retrieval,
    as before); `lazy_commit` lets the caller's transaction commit them without waiting for the WAL flush
    (LAZY_COMMIT_SQL)."""
    if not seeds:
        return Walk(depth={}, seed_score={}, facts=[])
    sql = _walk_sql(reading=reading, max_hops=max_hops, record=record, lazy_commit=lazy_commit, seeded=False)
    params = reading.params(
        seed_ids=[s.node_id for s in seeds],
        seed_scores=[float(s.score) for s in seeds],
        fanout=MAX_FANOUT,
        visits=max_visited,
        limit=limit,
        relations=list(relations),
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return _walk(rows)


@dataclass
class SeededWalk:
    seeds: list[Seed]
    stored: Stored
    walk: Walk | None  # None: the strategy that applies is not BFS (nothing walked, nothing counted)
    has_vectors: bool = True  # the workspace has entity vectors of EMBEDDING_MODEL
    has_communities: bool = True  # the workspace has communities with a summary


def seeded_bfs(
    *,
    workspace_id: int,
    query: str,
    requested: str | None,
    max_hops: int,
    limit: int,
    max_visited: int = MAX_VISITED,
    at: datetime | None = None,
    edge_classes: Sequence[str] | None = None,
    record: bool = False,
    lazy_commit: bool = False,
    audience: Audience = EVERYONE,
    edge_types: Sequence[str] | None = None,
    direction: str = "both",
) -> SeededWalk | None:
    """seeds_find_stored + reading_for + bfs in one statement (a round trip and the seed ranking in Python
    saved): the word seeds ranked in SQL as _hybrid ranks them, the workspace's decay rates and strategy read
    alongside, then the walk as `bfs` does it, only when the strategy that applies (`requested`, else the
    workspace's, else GRAPH_RECALL_STRATEGY) is BFS. None when the query has no word to look up; no seeds when
    no word matched (the caller may then try the embedding)."""
    terms = query_terms(query)
    if not terms.words:
        return None
    reading = Reading(
        workspace_id=workspace_id,
        at=at,
        edge_classes=list(edge_classes) if edge_classes else None,
        edge_types=list(edge_types) if edge_types else None,
        rate=settings.GRAPH_DECAY_RATE,
        rate_sql="coalesce((SELECT rate FROM cfg), %(rate)s)",
        rates_sql="coalesce((SELECT rates FROM cfg), '{}'::jsonb)",
        audience=audience,
        direction=direction,
    )
    sql = _walk_sql(reading=reading, max_hops=max_hops, record=record, lazy_commit=lazy_commit, seeded=True)
    default = settings.GRAPH_RECALL_STRATEGY if settings.GRAPH_RECALL_STRATEGY in STRATEGIES else "bfs"
    params = reading.params(
        **seed_params(workspace_id=workspace_id, words=terms.words, limit=limit, phrases=terms.phrases),
        seed_limit=limit,
        requested=requested,
        default=default,
        model=settings.EMBEDDING_MODEL,
        fanout=MAX_FANOUT,
        visits=max_visited,
        limit=limit,
        relations=terms.relations,
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    ids, labels, scores, rate, rates, stored_strategy, has_vectors, has_communities = rows[0][:8]
    stored = _stored(rate, rates, stored_strategy)
    seeds = [
        Seed(node_id=n, score=float(s), name=label)
        for n, label, s in zip(ids or [], labels or [], scores or [], strict=True)
    ]
    chosen = requested or stored.strategy or default
    walk = _walk([row[8:] for row in rows]) if chosen == "bfs" else None
    return SeededWalk(
        seeds=seeds,
        stored=stored,
        walk=walk,
        has_vectors=bool(has_vectors),
        has_communities=bool(has_communities),
    )


# --- spreading activation -----------------------------------------------------------------------------------


class SpreadingTimeout(Exception):
    pass


def spreading_activation(*, reading: Reading, seeds: list[Seed], timeout_ms: int) -> list[dict[str, Any]]:
    """SYNAPSE: activation spreads from the seeds along active edges, decaying by λ per hop and by the edge's
    effective confidence and class weight; sums are clamped at 1, nodes at or above the inhibition level take
    no more, at most 50 nodes stay active. Raises SpreadingTimeout past the time limit (the caller answers
    empty).

    A hop reads ids, ends, relation, class and effective confidence only (covering indexes, prepared
    statement); `spreading_details` adds names and text to the few facts kept. Returned facts carry no text
    yet."""
    deadline = time.monotonic() + timeout_ms / 1000
    activation = {s.node_id: s.score for s in seeds if s.score >= SA_THRESHOLD}
    depth = dict.fromkeys(activation, 0)
    collected: dict[int, dict[str, Any]] = {}
    where = reading.where()
    confidence = boosted_sql(reading.decayed(), "e.retrieval_count")
    columns = f"e.id, e.from_node_id, e.to_node_id, e.edge_type, e.edge_class, {confidence}"
    # Facts leaving the active nodes (out), reaching them (in), or both, each fact once.
    hop_sql = neighbours_sql(
        direction=reading.direction,
        out=f"SELECT {columns} FROM graph_edges e WHERE {where} AND e.from_node_id = ANY(%(a)s)",
        incoming=f"SELECT {columns} FROM graph_edges e WHERE {where} AND e.to_node_id = ANY(%(a)s)"
        + ("" if reading.direction == "in" else " AND NOT (e.from_node_id = ANY(%(a)s))"),
    )
    try:
        # One savepoint for the walk: a statement cancelled by its time limit rolls back to it, not the
        # caller's transaction. Each hop's statement may run for what is left of the budget, no longer.
        with (
            transaction.atomic(using="app"),
            connections["app"].cursor() as setting,
            prepared_cursor() as cursor,
        ):
            setting.execute("SELECT current_setting('statement_timeout')")
            previous = setting.fetchone()[0]
            for hop in range(SA_HOPS):
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0:
                    raise SpreadingTimeout
                active = [n for n, a in activation.items() if a >= SA_THRESHOLD]
                if not active:
                    break
                setting.execute(
                    "SELECT set_config('statement_timeout', %s, true)", [str(max(remaining_ms, 1))]
                )
                cursor.execute(hop_sql, reading.params(a=active))
                rows = cursor.fetchall()
                _spread(
                    rows,
                    hop=hop,
                    activation=activation,
                    depth=depth,
                    collected=collected,
                    active_set=set(active),
                    direction=reading.direction,
                )
            setting.execute("SELECT set_config('statement_timeout', %s, true)", [previous])
    except DatabaseError as exc:
        raise SpreadingTimeout from exc
    if time.monotonic() > deadline:
        raise SpreadingTimeout
    return list(collected.values())


def _spread(
    rows: list[tuple[Any, ...]],
    *,
    hop: int,
    activation: dict[int, float],
    depth: dict[int, int],
    collected: dict[int, dict[str, Any]],
    active_set: set[int],
    direction: str = "both",
) -> None:
    """One hop of spreading activation over the facts touching the active nodes (updates the dicts in
    place); activation flows along the facts the way `direction` says (out: source to target)."""
    incoming: dict[int, float] = {}
    for _, source, target, _, edge_class, confidence in rows:
        weight = float(confidence) * CLASS_WEIGHTS.get(edge_class, 1.0)
        ways = {"out": ((source, target),), "in": ((target, source),)}.get(
            direction, ((source, target), (target, source))
        )
        for here, there in ways:
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
        activation.clear()
        activation.update(keep)
    for edge_id, source, target, relation, edge_class, confidence in rows:
        source_act = activation.get(source, 0.0)
        target_act = activation.get(target, 0.0)
        if source_act >= SA_THRESHOLD and target_act >= SA_THRESHOLD:
            score = max(source_act, target_act)
            hop_of = min(depth.get(source, hop + 1), depth.get(target, hop + 1))
            if edge_id not in collected or collected[edge_id]["score"] < score:
                collected[edge_id] = {
                    "id": edge_id,
                    "sourceId": source,
                    "targetId": target,
                    "relation": relation,
                    "edgeClass": edge_class,
                    "confidence": float(confidence),
                    "hop": hop_of,
                    "score": round(score, 6),
                }


def spreading_details(
    *, workspace_id: int, kept: list[dict[str, Any]], record: bool, lazy_commit: bool = False
) -> list[dict[str, Any]]:
    """Names, fact text and validity for the facts spreading activation kept, and (`record`) their retrieval
    counts, in one statement."""
    if not kept:
        return []
    bump = (
        """
    bump AS (
        UPDATE graph_edges g SET retrieval_count = g.retrieval_count + 1, last_retrieved_at = now()
        WHERE g.workspace_id = %(ws)s AND g.id = ANY(%(ids)s)
    ),"""
        if record
        else ""
    )
    lazy = f", {LAZY_COMMIT_SQL}" if record and lazy_commit else ""
    with prepared_cursor() as cursor:
        cursor.execute(
            f"""
            WITH{bump} ids AS (SELECT unnest(%(ids)s::bigint[]) AS id)
            SELECT g.id, s.label, t.label, g.fact, g.confidence, g.valid_from, g.valid_to{lazy}
            FROM ids JOIN graph_edges g ON g.workspace_id = %(ws)s AND g.id = ids.id
            JOIN graph_nodes s ON s.workspace_id = %(ws)s AND s.id = g.from_node_id
            JOIN graph_nodes t ON t.workspace_id = %(ws)s AND t.id = g.to_node_id
            """,
            {"ws": workspace_id, "ids": [f["id"] for f in kept]},
        )
        details = {row[0]: row[1:] for row in cursor.fetchall()}
    out = []
    for fact in kept:
        source, target, text, stored, valid_from, valid_to = details[fact["id"]][:6]
        out.append(
            {
                **fact,
                "source": source,
                "target": target,
                "fact": text,
                "storedConfidence": float(stored),
                "validFrom": valid_from,
                "validTo": valid_to,
            }
        )
    return out


# --- recall -------------------------------------------------------------------------------------------------


def _public(fact: dict[str, Any]) -> dict[str, Any]:
    return {
        "source": prompt_line(fact["source"]),
        "relation": fact["relation"],
        "target": prompt_line(fact["target"]),
        "fact": prompt_line(fact["fact"]),
        "edgeClass": fact["edgeClass"],
        "confidence": round(fact["confidence"], 4),
        "score": fact["score"],
        "hop": fact["hop"],
        "validFrom": fact["validFrom"],
        "validTo": fact["validTo"],
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


def recall_strategy(*, reading: Reading, requested: str | None) -> str:
    if requested:
        return requested
    return reading.stored_strategy or (
        settings.GRAPH_RECALL_STRATEGY if settings.GRAPH_RECALL_STRATEGY in STRATEGIES else "bfs"
    )


def facts_recall(
    *,
    workspace_id: int,
    scope: Any = None,
    query: str | None = None,
    entity: str | None = None,
    max_hops: int = 2,
    limit: int = 10,
    at: datetime | None = None,
    edge_classes: Sequence[str] | None = None,
    edge_types: Sequence[str] | None = None,
    direction: str = "both",
    strategy: str | None = None,
    record: bool = True,
    embed: QueryEmbedder | None = None,
    lazy_commit: bool = False,
    report_strategy: bool = True,
    probes: dict[str, bool] | None = None,
) -> dict[str, Any]:
    """Facts about what `query` (or one named `entity`) reaches. The graph is per workspace; `scope` (an SDK
    caller's) keeps to the facts and entities its end user may see (audience_for), None sees all. Unknown
    `entity` → 404 ENTITY_NOT_FOUND with the closest names it may see; a query matching nothing → no facts.
    `edge_types` (normalised like relations) and `direction` (out, in, both) choose the facts walked.
    `lazy_commit`: the caller's transaction holds nothing but this recall, so the retrieval counts may commit
    without waiting for the WAL flush. `report_strategy=False`: the caller ignores `strategy` when nothing
    matched, so a query naming no entity costs no settings read (context/get asks this on every call).
    `probes`, when given, is filled with what the recall learnt of the workspace on the way: whether it has
    entity vectors ("vectors") and summarised communities ("communities"); True when it did not look."""
    started = time.perf_counter()
    audience = audience_for(scope)
    direction = direction if direction in DIRECTIONS else "both"
    types = edge_types_normalised(edge_types)
    visits = min(MAX_VISITED, max(MIN_VISITS, VISITS_PER_FACT * limit))
    walked: Walk | None = None
    relations: list[str] = []
    seed_source = "none"
    # Unknown (True) unless the one-statement recall probed them.
    has_vectors = has_communities = True
    if entity:
        found, stored = entity_lookup_stored(workspace_id=workspace_id, name=entity, audience=audience)
        if found is None:
            raise entity_not_found(workspace_id=workspace_id, name=entity, audience=audience)
        seeds, seed_source = [found], "entity"
    else:
        relations = query_terms(query or "").relations
        # BFS may apply: the seed search, the settings and the walk in one statement (seeded_bfs).
        seeded = None
        if strategy in (None, "bfs"):
            seeded = seeded_bfs(
                workspace_id=workspace_id,
                query=query or "",
                requested=strategy,
                max_hops=max_hops,
                limit=limit,
                max_visited=visits,
                at=at,
                edge_classes=edge_classes,
                record=record and at is None,
                lazy_commit=lazy_commit,
                audience=audience,
                edge_types=types,
                direction=direction,
            )
        if seeded is None:
            seeds, stored = seeds_find_stored(
                workspace_id=workspace_id, query=query or "", limit=limit, audience=audience
            )
        else:
            seeds, stored = seeded.seeds, seeded.stored
            walked = seeded.walk if seeds else None
            has_vectors, has_communities = seeded.has_vectors, seeded.has_communities
        seed_source = "words" if seeds else "none"
        if not seeds and embed is not None and has_vectors:
            seeds = embedding_seeds_find(
                workspace_id=workspace_id, query=query or "", limit=limit, embed=embed, audience=audience
            )
            seed_source = "meaning" if seeds else "none"
    if probes is not None:
        probes.update(vectors=has_vectors, communities=has_communities)
    if not seeds and not report_strategy:
        return {
            "facts": [],
            "seeds": [],
            "seedSource": seed_source,
            "strategy": strategy,
            "timedOut": False,
            "durationMs": round((time.perf_counter() - started) * 1000, 2),
        }
    reading = reading_for(
        workspace_id=workspace_id,
        at=at,
        edge_classes=edge_classes,
        edge_types=types,
        stored=stored,
        audience=audience,
        direction=direction,
    )
    chosen = recall_strategy(reading=reading, requested=strategy)
    timed_out = False
    kept: list[dict[str, Any]] = []
    if walked is not None:
        kept = walked.facts
    elif seeds:
        if chosen == "spreading":
            try:
                facts = spreading_activation(
                    reading=reading, seeds=seeds, timeout_ms=settings.GRAPH_SPREADING_TIMEOUT_MS
                )
            except SpreadingTimeout:
                timed_out, facts = True, []
            kept = spreading_details(
                workspace_id=workspace_id,
                kept=_finish(facts, limit),
                record=record and at is None,
                lazy_commit=lazy_commit,
            )
        else:
            # Scored, deduplicated, limited and (for a reading of the present) counted as retrieved in SQL.
            kept = bfs(
                reading=reading,
                seeds=seeds,
                max_hops=max_hops,
                max_visited=visits,
                limit=limit,
                record=record and at is None,
                lazy_commit=lazy_commit,
                relations=relations,
            ).facts
    return {
        "facts": [_public(f) for f in kept],
        "seeds": [
            {"id": str(s.node_id), "name": prompt_line(s.name), "score": round(s.score, 4)} for s in seeds
        ],
        "seedSource": seed_source,
        "strategy": chosen,
        "timedOut": timed_out,
        "durationMs": round((time.perf_counter() - started) * 1000, 2),
    }
