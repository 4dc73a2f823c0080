"""Graph reasoning at scale: fact recall latency (BFS and spreading activation, by query and by entity, one
direction), traversal, context/get's graph section (facts and community summaries within the token budget),
nearest entities by vector (exact, then the workspace's HNSW index), entity merges, and communities end to end
(stream the edges, PLP, fingerprints, write) on one workspace with many entities and facts.

    .venv/bin/python bench/graph_reasoning.py [--entities 100000] [--edges 1000000] [--queries 200]
                                              [--vectors 384] [--out bench/results/graph_reasoning.json]

Runs in its own database (cairn_bench_graph) on the embedded PostgreSQL. The seed (entities in clusters of
about 50, 90 % of facts inside a cluster) is written in SQL inside the workspace's RLS context and reused
while its size matches. Every measured call runs in-process through the same functions the routes call, as the
runtime role under row-level security, each in its own workspace transaction.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import api_latency  # noqa: E402 - shares the bench database helpers

DATABASE = "cairn_bench_graph"
os.environ["CAIRN_DATABASE_NAME"] = DATABASE
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "da", "fe", "gu", "hi", "ja", "xo"]
CLUSTER = 50


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--vectors", type=int, default=384, help="dimension of the entity vectors to seed (0: none)"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "graph_reasoning.json"))
    return parser.parse_args()


def words(count: int) -> list[str]:
    rng = random.Random(11)
    out: set[str] = set()
    while len(out) < count:
        out.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(out)


def seed(workspace_id: int, entities: int, edges: int) -> float:
    from django.db import connections

    from tenancy.rls import workspace_context

    vocabulary = words(3000)
    started = time.perf_counter()
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM graph_nodes WHERE workspace_id = %s AND node_type = 'concept'",
            [workspace_id],
        )
        have_nodes = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM graph_edges WHERE workspace_id = %s", [workspace_id])
        have_edges = cursor.fetchone()[0]
    if have_nodes == entities and have_edges == edges:
        _vacuum()
        return 0.0
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        for table in (
            "graph_communities",
            "graph_entity_aliases",
            "graph_entity_terms",
            "graph_edges",
            "memory_node_links",
        ):
            cursor.execute(f"DELETE FROM {table} WHERE workspace_id = %s", [workspace_id])
        cursor.execute("DELETE FROM graph_nodes WHERE workspace_id = %s", [workspace_id])
        # Names: two words of the vocabulary and the entity's number (unique canonical names).
        cursor.execute(
            """
            INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, summary, first_seen_at,
                                     last_seen_at, mention_count, created_at, updated_at)
            SELECT %(ws)s, 'concept', lower(w1 || ' ' || w2 || ' ' || g), w1 || ' ' || w2 || ' ' || g,
                   'about ' || w3, now(), now(), 1, now(), now()
            FROM generate_series(1, %(n)s) g,
                 LATERAL (SELECT (%(v)s::text[])[1 + (hashint4(g) & 2147483647) %% %(nv)s] AS w1,
                                 (%(v)s::text[])[1 + (hashint4(g + 7919) & 2147483647) %% %(nv)s] AS w2,
                                 (%(v)s::text[])[1 + (hashint4(g + 104729) & 2147483647) %% %(nv)s] AS w3) w
            """,
            {"ws": workspace_id, "n": entities, "v": vocabulary, "nv": len(vocabulary)},
        )
        cursor.execute(
            "INSERT INTO graph_entity_aliases (workspace_id, node_id, alias, created_at) "
            "SELECT workspace_id, id, node_key, now() FROM graph_nodes WHERE workspace_id = %s",
            [workspace_id],
        )
        cursor.execute("SELECT min(id) FROM graph_nodes WHERE workspace_id = %s", [workspace_id])
        base = cursor.fetchone()[0]
        # Clustered facts: 90 % inside a block of 50 consecutive entities, the rest anywhere.
        cursor.execute(
            """
            INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
                weight, confidence, fact, origin, valid_from, created_at, updated_at, last_observed_at,
                retrieval_count)
            SELECT %(ws)s, 'b:' || g, %(base)s + a,
                   %(base)s + CASE WHEN b = a THEN (a + 1) %% %(n)s ELSE b END,
                   (ARRAY['uses','knows','depends_on','part_of','caused','preceded_by'])[1 + g %% 6],
                   (ARRAY['semantic','semantic','semantic','entity','causal','temporal'])[1 + g %% 6],
                   1.0, 0.5 + (g %% 50) / 100.0, 'fact ' || g, 'llm_entity',
                   now() - make_interval(days => g %% 400), now(), now(),
                   now() - make_interval(days => g %% 120), 0
            FROM (
                SELECT g, a,
                       CASE WHEN (hashint4(g + 1) & 2147483647) %% 10 < 9
                            THEN (a / %(c)s) * %(c)s + (hashint4(g + 3) & 2147483647) %% %(c)s
                            ELSE (hashint4(g + 5) & 2147483647) %% %(n)s END %% %(n)s AS b
                FROM (SELECT g, (hashint4(g) & 2147483647) %% %(n)s AS a FROM generate_series(1, %(e)s) g) x
            ) y
            """,
            {"ws": workspace_id, "base": base, "n": entities, "e": edges, "c": CLUSTER},
        )
    _vacuum()
    return time.perf_counter() - started


def _vacuum() -> None:
    """As autovacuum would have it in steady state: statistics current and the visibility map set, so
    covering indexes give index-only scans (earlier runs' retrieval counts and community writes cleared pages
    of it)."""
    from django.db import connections

    with connections["default"].cursor() as cursor:
        for table in (
            "graph_nodes",
            "graph_edges",
            "graph_entity_terms",
            "graph_entity_aliases",
            "graph_community_members",
            "graph_communities",
        ):
            cursor.execute(f"VACUUM (ANALYZE) {table}")


def _facts_add(workspace_id: int, count: int) -> None:
    """`count` new facts like the seed's (90 % inside a block of 50 entities; the seed's ids are consecutive;
    edge keys 'bench-new:…', removed by `_facts_remove`)."""
    from django.db import connections

    from tenancy.rls import workspace_context

    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
                weight, confidence, fact, origin, valid_from, created_at, updated_at, last_observed_at,
                retrieval_count)
            SELECT %(ws)s, 'bench-new:' || g, base + a,
                   base + CASE WHEN b = a THEN (a + 1) %% span ELSE b END,
                   'knows', 'semantic', 1.0, 0.9, 'new fact ' || g, 'llm_entity',
                   now(), now(), now(), now(), 0
            FROM (
                SELECT g, base, span, a,
                       CASE WHEN (hashint4(g + 31) & 2147483647) %% 10 < 9
                            THEN ((a / %(c)s) * %(c)s + (hashint4(g + 37) & 2147483647) %% %(c)s) %% span
                            ELSE (hashint4(g + 41) & 2147483647) %% span END AS b
                FROM (SELECT g, base, span, (hashint4(g + 29) & 2147483647) %% span AS a
                      FROM generate_series(1, %(n)s) g,
                           (SELECT min(id) AS base, max(id) - min(id) + 1 AS span FROM graph_nodes
                            WHERE workspace_id = %(ws)s) r) x
            ) y
            """,
            {"ws": workspace_id, "n": count, "c": CLUSTER},
        )


def _facts_remove(workspace_id: int) -> None:
    from django.db import connections

    from tenancy.rls import workspace_context

    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "DELETE FROM graph_edges WHERE workspace_id = %s AND edge_key LIKE 'bench-new:%%'", [workspace_id]
        )


def _vectors_seed(workspace_id: int, dimension: int) -> float:
    """A unit vector of `dimension` for every entity that has none (model 'bench'), in SQL: the entities of
    one block of CLUSTER share a centre and scatter around it (uniform random vectors have no neighbourhoods,
    which no embedding model produces and no approximate index finds)."""
    from django.db import connections

    from tenancy.rls import workspace_context

    started = time.perf_counter()
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            """
            UPDATE graph_nodes n SET embedding = v.vec, embedding_model = 'bench'
            FROM (
                SELECT g.id, (SELECT array_agg(x / norm ORDER BY j)::vector FROM
                    (SELECT j, x, sqrt(sum(x * x) OVER ()) AS norm FROM
                     (SELECT j,
                             ((hashint4(((g.id - r.base) / %(c)s)::int * 4099 + j) & 65535) / 65535.0 - 0.5)
                             + 0.35 * (random() - 0.5) AS x
                      FROM generate_series(1, %(d)s) j) p) s) AS vec
                FROM graph_nodes g,
                     (SELECT min(id) AS base FROM graph_nodes WHERE workspace_id = %(ws)s) r
                WHERE g.workspace_id = %(ws)s AND g.embedding IS NULL
            ) v
            WHERE n.workspace_id = %(ws)s AND n.id = v.id
            """,
            {"ws": workspace_id, "d": dimension, "c": CLUSTER},
        )
    _vacuum()
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(calls: list[Any]) -> dict[str, float]:
    durations = []
    for call in calls:
        started = time.perf_counter()
        call()
        durations.append((time.perf_counter() - started) * 1000)
    return {
        "n": len(durations),
        "p50_ms": round(statistics.median(durations), 2),
        "p95_ms": round(percentile(durations, 0.95), 2),
        "max_ms": round(max(durations), 2),
    }


def main() -> None:
    args = parse_args()
    api_latency.ensure_bench_database(DATABASE)
    api_latency.setup_django_and_migrate()
    from django.contrib.auth import get_user_model
    from django.db import connections

    from graphsvc import services as graph_services
    from graphsvc import upkeep, vectors
    from graphsvc.facts import facts_recall, seeds_find
    from graphsvc.traverse import graph_traverse
    from memories.selectors import MemoryScope
    from retrieval.graph_context import graph_section
    from tenancy import services
    from tenancy.rls import workspace_context

    user = get_user_model().objects.filter(
        username="graph-bench"
    ).first() or get_user_model().objects.create_user("graph-bench")
    workspace_id = services.personal_workspace_ensure(user=user).id
    seed_seconds = seed(workspace_id, args.entities, args.edges)

    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT label FROM graph_nodes WHERE workspace_id = %s ORDER BY random() LIMIT %s",
            [workspace_id, args.queries],
        )
        names = [r[0] for r in cursor.fetchall()]
    rng = random.Random(3)
    queries = [f"what does {name.split()[rng.randint(0, 1)]} depend on" for name in names]

    def in_context(function: Any, **kwargs: Any) -> Any:
        def call() -> Any:
            with workspace_context(workspace_id):
                return function(workspace_id=workspace_id, **kwargs)

        return call

    # Warm-up: plans and caches (not reported).
    for query in queries[:10]:
        in_context(facts_recall, query=query)()

    results: dict[str, Any] = {}
    results["seeds"] = timed([in_context(seeds_find, query=q, limit=10) for q in queries])
    # As the graph/facts and graph/traverse handlers call them: each in its own transaction (lazy_commit).
    results["recall_bfs"] = timed(
        [in_context(facts_recall, query=q, strategy="bfs", lazy_commit=True) for q in queries]
    )
    results["recall_bfs_entity"] = timed(
        [in_context(facts_recall, entity=n, strategy="bfs", lazy_commit=True) for n in names]
    )
    results["recall_spreading"] = timed(
        [in_context(facts_recall, query=q, strategy="spreading", lazy_commit=True) for q in queries]
    )
    results["recall_bfs_entity_out"] = timed(
        [in_context(facts_recall, entity=n, direction="out", lazy_commit=True) for n in names]
    )
    results["traverse"] = timed([in_context(graph_traverse, start_entity=n, lazy_commit=True) for n in names])
    # context/get's graph section as context_get calls it (inside the caller's transaction, no embedding: the
    # bench's queries name entities by their words).
    results["context_section"] = timed(
        [in_context(graph_section, scope=MemoryScope(), query=q, embed=None) for q in queries]
    )
    with workspace_context(workspace_id):
        sample = facts_recall(workspace_id=workspace_id, query=queries[0])
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "EXPLAIN SELECT node_id FROM graph_entity_terms WHERE workspace_id = %s AND term >= 'kalo' "
            "AND term < 'kalp' LIMIT 200",
            [workspace_id],
        )
        seed_plan = [r[0] for r in cursor.fetchall()]

    # A worker imports networkit (and with it scikit-learn) once, on its first community run: about 3 s,
    # reported apart. Then: a run from no communities (every community and membership written), a run on the
    # unchanged graph (fingerprints match, nothing written), and a run after 100 new facts (the scheduled
    # refresh's default trigger, GRAPH_COMMUNITY_REFRESH_WRITES), whose facts are removed again afterwards.
    # Clearing and adding are not timed.
    started = time.perf_counter()
    import networkit  # noqa: F401

    import_seconds = round(time.perf_counter() - started, 2)
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute("DELETE FROM graph_communities WHERE workspace_id = %s", [workspace_id])
    _vacuum()
    community_runs = []
    for label in ("from none", "unchanged", "after 100 new facts"):
        if label == "after 100 new facts":
            _facts_add(workspace_id, 100)
        started = time.perf_counter()
        outcome = upkeep.communities_refresh(workspace_id=workspace_id)
        community_runs.append({"run": label, "seconds": round(time.perf_counter() - started, 2), **outcome})
    _facts_remove(workspace_id)
    # context/get's graph section once communities have summaries (written here, as the model would): the
    # candidates of the seeds' communities are read and matched against the query's words.
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "UPDATE graph_communities SET summary = 'Entities about ' || name WHERE workspace_id = %s",
            [workspace_id],
        )
    _vacuum()
    results["context_section_communities"] = timed(
        [in_context(graph_section, scope=MemoryScope(), query=q, embed=None) for q in queries]
    )
    # Nearest entities by vector: the exact scan, then the workspace's HNSW index (what upkeep builds past
    # GRAPH_ENTITY_VECTOR_EXACT_MAX_ROWS).
    vector_report: dict[str, Any] = {}
    if args.vectors:
        vector_report["seedSeconds"] = round(_vectors_seed(workspace_id, args.vectors), 1)
        # Queries near stored entities (an entity's vector, moved a little), as a query about one would be.
        with workspace_context(workspace_id), connections["app"].cursor() as cursor:
            cursor.execute(
                "SELECT embedding::text FROM graph_nodes WHERE workspace_id = %s "
                "AND embedding_model = 'bench' ORDER BY random() LIMIT %s",
                [workspace_id, min(args.queries, 50)],
            )
            probes = [
                [float(x) + random.Random(i).gauss(0, 0.02) for x in row[0].strip("[]").split(",")]
                for i, row in enumerate(cursor.fetchall())
            ]

        def nearest(vector: list[float]) -> Any:
            def call() -> Any:
                with workspace_context(workspace_id), connections["app"].cursor() as cursor:
                    return vectors.nearest_entities(
                        cursor,
                        workspace_id=workspace_id,
                        vector=vector,
                        model="bench",
                        where="n.node_type = 'concept'",
                        params={},
                        limit=10,
                    )

            return call

        vectors._INDEX_READY.clear()
        exact_found = [nearest(v)() for v in probes[:10]]
        results["nearest_entities_exact"] = timed([nearest(v) for v in probes])
        started = time.perf_counter()
        vectors.entity_index_ensure(workspace_id=workspace_id, dimension=args.vectors)
        vector_report["indexSeconds"] = round(time.perf_counter() - started, 1)
        vectors._INDEX_READY.clear()
        indexed_found = [nearest(v)() for v in probes[:10]]
        results["nearest_entities_hnsw"] = timed([nearest(v) for v in probes])
        overlap = [
            len({r[0] for r in a} & {r[0] for r in b}) / max(1, len(a))
            for a, b in zip(exact_found, indexed_found, strict=True)
        ]
        vector_report["recallAt10"] = round(statistics.mean(overlap), 3)
        # Back to the seed without vectors: the other measurements of the next run read narrow rows again.
        with connections["default"].cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {vectors.entity_index_name(workspace_id, args.vectors)}")
        with workspace_context(workspace_id), connections["app"].cursor() as cursor:
            cursor.execute(
                "UPDATE graph_nodes SET embedding = NULL, embedding_model = NULL WHERE workspace_id = %s "
                "AND embedding_model = 'bench'",
                [workspace_id],
            )
        _vacuum()

    # Entity merges as an administrator runs them (two random entities, about 20 facts each), each in a
    # transaction that is rolled back so the graph stays as seeded.
    class Undo(Exception):
        pass

    def merge(pair: tuple[int, int]) -> Any:
        def call() -> None:
            try:
                with workspace_context(workspace_id):
                    graph_services.entity_merge(
                        workspace_id=workspace_id, survivor_id=pair[0], merged_id=pair[1]
                    )
                    raise Undo
            except Undo:
                pass

        return call

    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT id FROM graph_nodes WHERE workspace_id = %s ORDER BY random() LIMIT 40", [workspace_id]
        )
        picked = [row[0] for row in cursor.fetchall()]
    results["entity_merge"] = timed([merge((picked[i], picked[i + 1])) for i in range(0, len(picked) - 1, 2)])

    report = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "entities": args.entities,
        "edges": args.edges,
        "seed_seconds": round(seed_seconds, 1),
        "latency": results,
        "sample_facts": len(sample["facts"]),
        "seed_term_plan": seed_plan,
        "networkit_import_seconds": import_seconds,
        "entity_vectors": vector_report,
        "communities": community_runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    print(f"{args.entities} entities, {args.edges} edges (seeded in {seed_seconds:.1f} s)")
    for name, row in results.items():
        print(
            f"  {name:20s} p50 {row['p50_ms']:8.2f} ms   p95 {row['p95_ms']:8.2f} ms"
            f"   max {row['max_ms']:8.2f} ms"
        )
    print(f"  networkit import (once per worker process): {import_seconds} s")
    if vector_report:
        print(f"  entity vectors: {vector_report}")
    for run in community_runs:
        stages = ", ".join(f"{name} {seconds} s" for name, seconds in run.get("stages", {}).items())
        print(
            f"  communities {run['run']}: {run['seconds']} s ({run['communities']} communities, "
            f"{run['written']} written, {run['unchanged']} unchanged; {stages})"
        )
    print("  seed term lookup plan: " + " / ".join(line.strip() for line in seed_plan))


if __name__ == "__main__":
    main()
