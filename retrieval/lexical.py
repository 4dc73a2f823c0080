"""Lexical search: BM25 over the memory_lexemes postings, web-search syntax (quotes, -word, or) ranked by
ts_rank_cd, and a substring fallback for queries without searchable words. Every statement reads through the
read rule (memories.selectors.read_rule). How the ranking works: docs/search-ranking.md."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import re2
from django.conf import settings
from django.db import connections
from django.utils import timezone

from memories import selectors
from memories.models import Memory
from memories.selectors import MemoryScope


def _rule_parts(scope: MemoryScope, params: dict[str, Any]) -> dict[str, str]:
    """The read rule's pieces the statement templates take: all of it (readable) and its user part alone."""
    rule = selectors.read_rule(scope, params)
    return {"readable": rule.sql(), "user_rule": rule.user_sql}


MAX_OR_WORDS = 32
_LEXICAL_SQL = """
SELECT {MEMORY_COLUMNS}, ts_rank_cd(m.search_tsv, q.query) AS lexical_rank
FROM memories m, {tsquery} AS q(query)
WHERE {readable}
  AND m.search_tsv @@ q.query {exclude} {extra}
ORDER BY lexical_rank DESC, m.created_at DESC, m.id DESC
LIMIT %(limit)s
""".replace("{MEMORY_COLUMNS}", selectors.MEMORY_COLUMNS)

_SUBSTRING_SQL = """
SELECT {MEMORY_COLUMNS}, 0.0 AS lexical_rank
FROM memories m
WHERE {readable}
  AND m.content ILIKE %(pattern)s {extra}
ORDER BY m.created_at DESC, m.id DESC
LIMIT %(limit)s
""".replace("{MEMORY_COLUMNS}", selectors.MEMORY_COLUMNS)


def memory_search_lexical(
    *, workspace_id: int, scope: MemoryScope, query: str, type: str | None, layer: str | None, limit: int
) -> list[Memory]:
    """Lexical ranking, best first; each row carries its score as `lexical_rank`.

    Plain text is ranked with BM25 over the memory_lexemes postings (any word may match; rare words weigh
    more, long memories are damped). Questions in natural language rarely contain every word of the memory
    that answers them, which is why an AND of the words found almost nothing (LoCoMo dev R@10 0.10,
    bench/README.md). Quotes, -exclusions and OR mean the caller said exactly what to match: those keep
    websearch_to_tsquery's semantics, ranked by ts_rank_cd. When the query has no searchable words at all
    (stop words, symbols), a substring match still finds something."""
    params: dict[str, Any] = {"workspace_id": workspace_id, "query": query, "limit": limit}
    extra = selectors.type_layer_sql(params, type=type, layer=layer)
    parts = {**_rule_parts(scope, params), "extra": extra}
    if _uses_search_syntax(query):
        sql = _LEXICAL_SQL.format(**parts, tsquery="websearch_to_tsquery('english', %(query)s)", exclude="")
        rows = selectors.memories_from_sql(sql, params)
    else:
        rows = _bm25(workspace_id=workspace_id, params=params, parts=parts)
    if rows or _has_search_terms(query):
        return rows
    params["pattern"] = f"%{selectors.like_escape(query)}%"
    return selectors.memories_from_sql(_SUBSTRING_SQL.format(**parts), params)


def memory_search_lexical_layers(
    *, workspace_id: int, scope: MemoryScope, query: str, depths: dict[str, int]
) -> dict[str, list[Memory]]:
    """memory_search_lexical for several layers (layer → limit) in one BM25 statement; the same rows per layer
    as one call per layer would give. context/get ranks its working and long-term tiers this way."""
    if _uses_search_syntax(query) or len(depths) < 2:
        return {
            layer: memory_search_lexical(
                workspace_id=workspace_id, scope=scope, query=query, type=None, layer=layer, limit=limit
            )
            for layer, limit in depths.items()
        }
    found = _bm25_layers(workspace_id=workspace_id, scope=scope, query=query, depths=depths)
    if any(found.values()) or _has_search_terms(query):
        return found
    return {
        layer: memory_search_lexical(
            workspace_id=workspace_id, scope=scope, query=query, type=None, layer=layer, limit=limit
        )
        for layer, limit in depths.items()
    }


# BM25 over the postings, in two steps. First the document frequency of each query lexeme (index-only counts
# on (workspace_id, lexeme, ...), cached per process like the workspace statistics); then the score of the
# memories in the head of each lexeme's postings: the SEARCH_BM25_POSTINGS_PER_TERM postings with the most
# occurrences in the shortest memories, which are the ones BM25 scores highest for that word. The cost is
# bounded by words × that limit, whatever the workspace's size; a memory that holds a very common word but
# sits outside its head can still be found through the query's other words. Only the best `pool` memories are
# joined to memories for the scope.
_DOCUMENT_FREQUENCY_SQL = """
SELECT p.lexeme, count(*)
FROM memory_lexemes p
WHERE p.workspace_id = %(workspace_id)s AND p.lexeme = ANY(%(lexemes)s::text[])
GROUP BY p.lexeme
"""

# The query's words with their IDF: the known frequencies from Python, plus the words last counted at zero,
# counted here (an index-only probe that finds nothing, unless a memory brought the word since).
_WEIGHTS_SQL = """weights AS (
    SELECT * FROM unnest(%(lexemes)s::text[], %(idfs)s::float8[]) AS w(lexeme, idf)
    UNION ALL
    SELECT r.lexeme, ln(1 + (greatest(%(count)s::float8, c.df) - c.df + 0.5) / (c.df + 0.5))
    FROM unnest(%(recheck)s::text[]) AS r(lexeme)
    CROSS JOIN LATERAL (
        SELECT count(*) AS df FROM memory_lexemes p
        WHERE p.workspace_id = %(workspace_id)s AND p.lexeme = r.lexeme
    ) c
    WHERE c.df > 0
)"""

# BM25 over the head of each query word's posting list (impact order), shared by the one-layer and the
# all-layers statements. The constants are float8 on purpose: as bare literals (1.2, 18.6) they are numeric,
# and the sum over thousands of postings in numeric arithmetic took 5 of the statement's 7 ms.
_BM25_SCORED = """
    SELECT p.memory_id,
           sum(w.idf * p.tf * (%(k1)s::float8 + 1) / (p.tf + %(k1)s::float8 * (1 - %(b)s::float8
               + %(b)s::float8 * p.doc_len / %(avgdl)s::float8))) AS score
    FROM weights w CROSS JOIN LATERAL (
        SELECT l.memory_id, l.tf, l.doc_len FROM memory_lexemes l
        WHERE l.workspace_id = %(workspace_id)s AND l.lexeme = w.lexeme
        ORDER BY l.tf DESC, l.doc_len
        LIMIT %(per_term)s
    ) p
    GROUP BY p.memory_id
"""

_BM25_SQL = """
WITH {weights}, scored AS (
{scored}    ORDER BY score DESC
    LIMIT %(pool)s
)
SELECT {MEMORY_COLUMNS}, s.score AS lexical_rank
FROM scored s JOIN memories m ON m.id = s.memory_id
WHERE {readable} {extra}
ORDER BY s.score DESC, m.created_at DESC, m.id DESC
LIMIT %(limit)s
""".replace("{scored}", _BM25_SCORED).replace("{MEMORY_COLUMNS}", selectors.MEMORY_COLUMNS)
BM25_POOL_FACTOR = 5  # memories scored per wanted result before the scope filter (retried unbounded if short)
BM25_POOL_MIN = 200

_STATS_CACHE: dict[
    int, tuple[float, float, float]
] = {}  # workspace → (valid until, memory count, mean length)
_STATS_CACHE_MAX = 10_000


def _lexical_stats(workspace_id: int) -> tuple[float, float]:
    """(live memories, their mean length in distinct lexemes) for IDF and length normalisation."""
    now = timezone.now().timestamp()
    cached = _STATS_CACHE.get(workspace_id)
    if cached and cached[0] > now:
        return cached[1], cached[2]
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*), coalesce(avg(length(search_tsv)), 1) FROM memories "
            "WHERE workspace_id = %s AND deleted_at IS NULL",
            [workspace_id],
        )
        count, mean_length = cursor.fetchone()
    if len(_STATS_CACHE) >= _STATS_CACHE_MAX:
        _STATS_CACHE.clear()
    _STATS_CACHE[workspace_id] = (now + settings.SEARCH_BM25_STATS_SECONDS, float(count), float(mean_length))
    return float(count), float(mean_length)


_DF_CACHE: dict[tuple[int, str], tuple[float, int]] = {}  # (workspace, lexeme) → (valid until, frequency)


@dataclass(frozen=True)
class Frequencies:
    """Document frequencies of a query's lexemes: the known ones (> 0), and the lexemes last counted at zero,
    which the BM25 statement counts again itself (a word a new memory brought must be found at once)."""

    known: list[tuple[str, int]]
    recheck: list[str]

    def __bool__(self) -> bool:
        return bool(self.known or self.recheck)


def _document_frequencies(workspace_id: int, lexemes: list[str]) -> Frequencies:
    now = timezone.now().timestamp()
    known: dict[str, int] = {}
    for lexeme in lexemes:
        cached = _DF_CACHE.get((workspace_id, lexeme))
        if cached and cached[0] > now:
            known[lexeme] = cached[1]
    missing = [lexeme for lexeme in lexemes if lexeme not in known]
    if missing:
        with connections["app"].cursor() as cursor:
            cursor.execute(_DOCUMENT_FREQUENCY_SQL, {"workspace_id": workspace_id, "lexemes": missing})
            counted = dict(cursor.fetchall())
        if len(_DF_CACHE) + len(missing) > _STATS_CACHE_MAX * 10:
            _DF_CACHE.clear()
        for lexeme in missing:
            known[lexeme] = int(counted.get(lexeme, 0))
            # A stale count only shifts a word's weight. A zero is remembered too, but only to skip this round
            # trip: the BM25 statement counts it again (see _WEIGHTS_SQL), so a new memory's word is never
            # hidden.
            _DF_CACHE[(workspace_id, lexeme)] = (now + settings.SEARCH_BM25_STATS_SECONDS, known[lexeme])
    return Frequencies(
        known=[(lexeme, known[lexeme]) for lexeme in lexemes if known[lexeme] > 0],
        recheck=[lexeme for lexeme in lexemes if known[lexeme] == 0],
    )


# The lexemes of a query text and whether it has search terms depend on the text alone (the 'english'
# configuration is fixed), so they are remembered per process: an agent asks the same questions again and
# again, and each answer cost a round trip per tier.
_TEXT_CACHE_MAX = 2048
_LEXEMES_CACHE: dict[str, list[str]] = {}
_TERMS_CACHE: dict[str, bool] = {}


def _remember(cache: dict[str, Any], key: str, value: Any) -> Any:
    if len(cache) >= _TEXT_CACHE_MAX:
        cache.clear()  # a crude bound; refilling costs one round trip per distinct query
    cache[key] = value
    return value


def _query_lexemes(query: str) -> list[str]:
    cached = _LEXEMES_CACHE.get(query)
    if cached is not None:
        return cached
    with connections["app"].cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", [query])
        lexemes = list(dict.fromkeys(cursor.fetchone()[0] or []))[:MAX_OR_WORDS]
    return _remember(_LEXEMES_CACHE, query, lexemes)


def _bm25_params(*, workspace_id: int, frequencies: Frequencies, limit: int) -> dict[str, Any]:
    count, mean_length = _lexical_stats(workspace_id)
    count = max(count, max((frequency for _, frequency in frequencies.known), default=0), 1.0)
    return {
        "lexemes": [lexeme for lexeme, _ in frequencies.known],
        "idfs": [
            math.log(1 + (count - frequency + 0.5) / (frequency + 0.5)) for _, frequency in frequencies.known
        ],
        "recheck": frequencies.recheck,
        "count": count,
        "avgdl": max(mean_length, 1.0),
        "k1": settings.SEARCH_BM25_K1,
        "b": settings.SEARCH_BM25_B,
        "per_term": settings.SEARCH_BM25_POSTINGS_PER_TERM,
        "pool": max(limit * BM25_POOL_FACTOR, BM25_POOL_MIN),
    }


def _bm25(*, workspace_id: int, params: dict[str, Any], parts: dict[str, str]) -> list[Memory]:
    frequencies = _document_frequencies(workspace_id, _query_lexemes(params["query"]))
    if not frequencies:
        return []
    params = {
        **params,
        **_bm25_params(workspace_id=workspace_id, frequencies=frequencies, limit=params["limit"]),
    }
    sql = _BM25_SQL.format(**parts, weights=_WEIGHTS_SQL)
    rows = selectors.memories_from_sql(sql, params)
    if len(rows) < params["limit"] and sum(frequency for _, frequency in frequencies.known) > params["pool"]:
        # The scope filter removed too many of the best-scored memories (another user's, another project's):
        # score them all.
        rows = selectors.memories_from_sql(sql, {**params, "pool": None})
    return rows


# Several layers at once. The long-term branch reads the best `pool` scored memories, as _BM25_SQL does. The
# working branch reads every scored memory: working memories are few (a TTL and a per-user cap keep them so),
# so the planner starts from them, and the answer is the one _BM25_SQL gives after its unbounded retry — which
# a layer holding a small share of the workspace would need on almost every call.
_BM25_LAYERS_SQL = """
WITH {weights}, scored AS MATERIALIZED (
{scored}), pool AS (
    SELECT * FROM scored ORDER BY score DESC LIMIT %(pool)s
)
{branches}
""".replace("{scored}", _BM25_SCORED)
_BM25_LAYER_BRANCH = """
(SELECT {MEMORY_COLUMNS}, s.score AS lexical_rank
 FROM {source} s JOIN memories m ON m.id = s.memory_id
 WHERE {readable} AND m.layer = '{layer}' {narrow}
 ORDER BY s.score DESC, m.created_at DESC, m.id DESC
 LIMIT %(limit_{i})s)
""".replace("{MEMORY_COLUMNS}", selectors.MEMORY_COLUMNS)
# A small layer's branch starts from that layer's memories (memories_ws_user_layer finds them), handed over as
# an array so the planner looks them up by id and hashes the scored candidates, instead of looking up every
# scored candidate (thousands for common words) to keep the few of that layer.
_SMALL_LAYER_NARROW = """
   AND m.id = ANY(ARRAY(SELECT m.id FROM memories m WHERE m.workspace_id = %(workspace_id)s
                        AND m.layer = '{layer}' AND m.deleted_at IS NULL AND {user_rule}))"""
# Layers whose branch scores every candidate instead of the pool (see _BM25_LAYERS_SQL).
SMALL_LAYERS = frozenset({"working"})


def _layer_literal(layer: str) -> str:
    # Layers are written into the BM25 statement, not bound: its generic plan (it is prepared) must know which
    # layer a branch reads, or it plans the working layer's lookup as a scan of the workspace's memories.
    if layer not in Memory.Layer.values:
        raise ValueError(f"unknown layer {layer!r}")
    return layer


def _bm25_layers(
    *, workspace_id: int, scope: MemoryScope, query: str, depths: dict[str, int]
) -> dict[str, list[Memory]]:
    found: dict[str, list[Memory]] = {layer: [] for layer in depths}
    frequencies = _document_frequencies(workspace_id, _query_lexemes(query))
    if not frequencies:
        return found
    params = _bm25_params(workspace_id=workspace_id, frequencies=frequencies, limit=max(depths.values()))
    params["workspace_id"] = workspace_id
    parts = _rule_parts(scope, params)

    def run(layers: list[str], *, bounded: bool) -> None:
        branches = []
        for i, layer in enumerate(layers):
            params[f"limit_{i}"] = depths[layer]
            small = layer in SMALL_LAYERS
            source = "pool" if bounded and not small else "scored"
            narrow = _SMALL_LAYER_NARROW.format(layer=_layer_literal(layer), **parts) if small else ""
            branches.append(
                _BM25_LAYER_BRANCH.format(
                    source=source, i=i, narrow=narrow, layer=_layer_literal(layer), **parts
                )
            )
        sql = _BM25_LAYERS_SQL.format(weights=_WEIGHTS_SQL, branches=" UNION ALL ".join(branches))
        rows = selectors.memories_from_sql(sql, params, prepared=True)
        for layer in layers:
            found[layer] = []
        for row in rows:
            found[row.layer].append(row)

    run(list(depths), bounded=True)
    # As _bm25: the scope filter removed too many of the best-scored memories; score them all.
    short = [layer for layer in depths if layer not in SMALL_LAYERS and len(found[layer]) < depths[layer]]
    if short and sum(frequency for _, frequency in frequencies.known) > params["pool"]:
        run(short, bounded=False)
    return found


# RE2: linear in the query whatever it holds (tests/memories/test_linear_time_patterns.py checks it). Its
# \w and \b are ASCII, which is all web-search syntax needs ("-word", "or").
_SEARCH_SYNTAX = re2.compile(r'(?i)"|(^|\s)-\w|\bor\b')


def _uses_search_syntax(query: str) -> bool:
    """Quotes, -exclusions or OR: the caller said exactly what to match, so no any-word fill."""
    return bool(_SEARCH_SYNTAX.search(query))


def _has_search_terms(query: str) -> bool:
    cached = _TERMS_CACHE.get(query)
    if cached is not None:
        return cached
    with connections["app"].cursor() as cursor:
        cursor.execute("SELECT numnode(websearch_to_tsquery('english', %s)) > 0", [query])
        return _remember(_TERMS_CACHE, query, bool(cursor.fetchone()[0]))
