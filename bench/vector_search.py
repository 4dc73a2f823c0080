"""Recall and latency of scoped vector search (retrieval.vectors.nearest) on 1M vectors, on its own database.

    .venv/bin/python bench/vector_search.py [--queries 200] [--warmup 20] [--burst 25] [--seed 7]
                                            [--reload] [--rebuild-index]
                                            [--out bench/results/vector_search.json]

What it does, in order (see bench/README.md, "vector_search.py", for how to read the numbers):
  1. creates the database cairn_vectorbench on the embedded PostgreSQL if missing and migrates it; the
     developer's database (cairn), the test database (test_cairn) and the API benchmark's (cairn_bench) are
     never opened;
  2. loads 1,000,000 synthetic 384-d vectors into 100 org workspaces (memories + memory_embeddings rows,
     binary COPY as the superuser, which bypasses row-level security), unless the same data set is already
     there;
  3. VACUUM (ANALYZE), then builds the search indexes (HNSW + user btree) of each workspace over
     VECTOR_EXACT_MAX_ROWS, i.e. the two 100k ones, through vectors.hnsw_index_ensure as the product does
     (timed);
  4. per case, runs --queries searches through vectors.nearest() inside tenancy.rls.workspace_context and
     compares each result with the exact top 10 (numpy over the stored vectors, cross-checked in SQL);
  5. prints a table and writes it as JSON to --out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH_DATABASE = "cairn_vectorbench"
# Both aliases of settings.DATABASES honour this; set before Django (or anything importing settings) loads.
os.environ["CAIRN_DATABASE_NAME"] = BENCH_DATABASE
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

DIMENSION = 384
MODEL = (
    "bench/synthetic-384"  # nearest() filters on the model; any name works, this one says what the rows are
)
TOTAL_VECTORS = 1_000_000
WORKSPACES = 100
SLUG_PREFIX = "vb-"
TOP_K = 10
# Version of the data generator and layout: bump it when either changes, so stored data is not reused.
GENERATOR_VERSION = 3
# A returned row counts as a hit when its exact distance is within this of the 10th-best one: pgvector sums in
# float4, numpy in float64, so rows tied at rank 10 may swap places without either answer being wrong.
TIE_TOLERANCE = 1e-5


# --- Workspaces and cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkspaceSpec:
    index: int
    size: int
    label: str
    # Rows per user_id (None = shared rows); the rows of each user are a random subset of the workspace.
    users: tuple[tuple[str | None, int], ...]

    @property
    def slug(self) -> str:
        return f"{SLUG_PREFIX}{self.index:03d}"


def layout() -> list[WorkspaceSpec]:
    """The 100 workspaces: 0.1 %, 1 % and 10 % of the rows, a second 10 % for the scoped case, ~8.2k fillers.

    The scoped case needs a workspace where only 1 % of the rows are visible to the searching user. The read
    rule is `user_id IS NULL OR user_id = <user>`, so the other 99 % must belong to other users, which would
    leave nothing for the shared-scope search (VectorScope(user_id=None)) of the 10 % case. Hence two 100k
    workspaces. A second user with 5 % of the rows exercises the HNSW scan with a filter that keeps few rows
    (more than VECTOR_EXACT_MAX_SCOPED_ROWS, so it is not scanned exactly).
    """
    targets = [
        WorkspaceSpec(0, 1_000, "0.1%", ((None, 1_000),)),
        WorkspaceSpec(1, 10_000, "1%", ((None, 10_000),)),
        WorkspaceSpec(2, 100_000, "10%", ((None, 100_000),)),
        WorkspaceSpec(3, 100_000, "10% scoped", (("u1", 1_000), ("u2", 5_000), ("other", 94_000))),
    ]
    rest = TOTAL_VECTORS - sum(spec.size for spec in targets)
    fillers = WORKSPACES - len(targets)
    base, extra = divmod(rest, fillers)
    specs = list(targets)
    for offset in range(fillers):
        size = base + (1 if offset < extra else 0)
        specs.append(WorkspaceSpec(len(targets) + offset, size, "filler", ((None, size),)))
    return specs


@dataclass(frozen=True)
class Case:
    name: str
    workspace_index: int
    user_id: str | None  # the searching user: sees shared rows and this user's rows


CASES = [
    Case("0.1% (1k)", 0, None),
    Case("1% (10k)", 1, None),
    Case("10% (100k)", 2, None),
    Case("10% scoped, 1% visible", 3, "u1"),
    # Two more cases in the same workspace: a filter that keeps 5 % (HNSW with a selective filter), most
    # rows visible, and none (no shared rows), where an index scan that filters would walk the graph to
    # return nothing.
    Case("10% scoped, 5% visible", 3, "u2"),
    Case("10% scoped, 94% visible", 3, "other"),
    Case("10% scoped, 0 visible", 3, None),
]


# --- Synthetic sentence-embedding-like vectors --------------------------------------------------------------


@dataclass(frozen=True)
class GeneratorConfig:
    """Shape of the data; calibrated so 3,000 rows of a workspace have the statistics of real MiniLM vectors.

    all-MiniLM-L6-v2 on ~3,000 Python docstrings: random-pair cosine 0.10 ± 0.11, mean top-1 neighbour 0.69,
    mean 10th neighbour 0.48, norm of the mean vector 0.31, participation ratio of the spectrum 84. This
    generator, on one workspace: 0.12 ± 0.11, 0.70, 0.59, 0.35, 77 (see bench/README.md). Uniform noise would
    give 0.00 ± 0.05, 0.18, 0.14, 0.02, 340: neighbours barely closer than anything else, not what HNSW sees.
    """

    clusters: int = 300  # topics shared by all workspaces
    spectrum_decay: float = 1.0  # the topic centres lie on a power-law spectrum (a few dominant directions)
    mean_weight: float = 0.35  # every embedding model has a common direction (anisotropy)
    centre_weight: float = 0.6
    local_rank: int = 48  # within a topic, rows vary along a few topic-specific directions ...
    local_weight: float = 0.8
    isotropic_weight: float = 0.25  # ... plus a little noise in every direction
    topics_per_workspace: tuple[int, int] = (20, 60)  # a workspace talks about a subset of the topics
    topic_concentration: float = 0.7  # Dirichlet: some topics of a workspace are much more frequent


def orthonormal(rng: np.random.Generator, rows: int, columns: int) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((rows, columns)))
    return q


class World:
    """Topic centres and per-topic directions; workspaces sample rows and queries from a mixture of topics."""

    def __init__(self, seed: int, config: GeneratorConfig) -> None:
        self.seed = seed
        self.config = config
        rng = np.random.default_rng([seed, 0])
        rotation = orthonormal(rng, DIMENSION, DIMENSION)
        spectrum = np.arange(1, DIMENSION + 1) ** (-config.spectrum_decay)
        spectrum /= spectrum.sum()
        self.mean = rng.standard_normal(DIMENSION)
        self.mean /= np.linalg.norm(self.mean)
        centres = (rng.standard_normal((config.clusters, DIMENSION)) * np.sqrt(spectrum)) @ rotation.T
        self.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)
        self.bases = np.stack(
            [orthonormal(rng, DIMENSION, config.local_rank) for _ in range(config.clusters)]
        )
        local = np.arange(1, config.local_rank + 1) ** -1.0
        self.local_scale = np.sqrt(local / local.sum())
        self.spread = rng.uniform(0.7, 1.3, config.clusters)  # some topics are tighter than others

    def topics(self, workspace_index: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([self.seed, 1, workspace_index])
        low, high = self.config.topics_per_workspace
        count = int(rng.integers(low, high + 1))
        ids = rng.choice(self.config.clusters, count, replace=False)
        weights = rng.dirichlet(np.full(count, self.config.topic_concentration))
        return ids, weights

    def sample(self, workspace_index: int, count: int, stream: int) -> np.ndarray:
        """`count` unit vectors of the workspace's topic mixture; `stream` 0 = stored rows, 1+ = queries."""
        rng = np.random.default_rng([self.seed, 2, workspace_index, stream])
        ids, weights = self.topics(workspace_index)
        topic = rng.choice(ids, count, p=weights)
        cfg = self.config
        # float32 throughout: a million rows are generated in seconds, and float32 is what is stored anyway.
        out = (cfg.mean_weight * self.mean + cfg.centre_weight * self.centres[topic]).astype(np.float32)
        for cluster in np.unique(topic):
            rows = np.flatnonzero(topic == cluster)
            z = rng.standard_normal((len(rows), cfg.local_rank), dtype=np.float32)
            z *= (self.local_scale * self.spread[cluster]).astype(np.float32)
            out[rows] += cfg.local_weight * (z @ self.bases[cluster].T.astype(np.float32))
        out += (cfg.isotropic_weight / np.sqrt(DIMENSION)) * rng.standard_normal(
            (count, DIMENSION), dtype=np.float32
        )
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def vector_statistics(vectors: np.ndarray) -> dict[str, float]:
    """The statistics the generator is calibrated on (GeneratorConfig), for a sample of up to 3,000 rows."""
    sample = vectors[:3000].astype(np.float64)
    similarity = sample @ sample.T
    np.fill_diagonal(similarity, -2.0)
    pairs = similarity[np.triu_indices(len(sample), 1)]
    top = -np.sort(-similarity, axis=1)[:, :10]
    centred = sample - sample.mean(axis=0)
    variance = np.linalg.svd(centred, compute_uv=False) ** 2
    variance /= variance.sum()
    return {
        "rows": len(sample),
        "pairCosineMean": round(float(pairs.mean()), 3),
        "pairCosineStd": round(float(pairs.std()), 3),
        "top1CosineMean": round(float(top[:, 0].mean()), 3),
        "top10CosineMean": round(float(top[:, 9].mean()), 3),
        "meanVectorNorm": round(float(np.linalg.norm(sample.mean(axis=0))), 3),
        "participationRatio": round(float(1 / np.sum(variance**2)), 1),
    }


def fingerprint(seed: int, burst: int, config: GeneratorConfig) -> str:
    """Identifies the stored data set; kept in the workspaces' names so a re-run knows whether to reload."""
    spec = json.dumps(
        [
            GENERATOR_VERSION,
            seed,
            burst,
            DIMENSION,
            MODEL,
            repr(config),
            [(s.size, s.users) for s in layout()],
        ]
    )
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


# --- Database: create, migrate ------------------------------------------------------------------------------


def superuser_connect(dbname: str = BENCH_DATABASE, **kwargs: Any) -> Any:
    import psycopg

    from config import embedded_db

    server = embedded_db.ensure_embedded_postgres()
    return psycopg.connect(
        host=server.socket_dir, port=server.port, user=embedded_db.SUPERUSER, dbname=dbname, **kwargs
    )


def ensure_bench_database() -> None:
    """Create cairn_vectorbench as the owner role's database (the helper is shared with api_latency.py)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import api_latency

    # Importing api_latency points CAIRN_DATABASE_NAME at its own database; Django must load this one.
    os.environ["CAIRN_DATABASE_NAME"] = BENCH_DATABASE
    api_latency.ensure_bench_database(BENCH_DATABASE)


def setup_django_and_migrate() -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def progress(message: str) -> None:
    """One line rewritten in place on a terminal; nothing in a log, where a carriage return is noise."""
    if sys.stderr.isatty():
        print(f"\r{message}", end="", file=sys.stderr, flush=True)


def progress_done() -> None:
    if sys.stderr.isatty():
        print(file=sys.stderr)


# --- Loading ------------------------------------------------------------------------------------------------

PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
COPY_TRAILER = (-1).to_bytes(2, "big", signed=True)
EMBEDDING_COLUMNS = (
    "workspace_id, memory_id, model, dimension, embedding, content_sha256, user_id, scope, project_id, "
    "expires_at, created_at, updated_at"
)
PLACEHOLDER_CONTENT = "synthetic vector benchmark memory"


def embedding_record_dtype(user_id: str | None) -> np.dtype:
    """One memory_embeddings row in PostgreSQL's binary COPY format, as a packed big-endian numpy record.

    Every field is (int32 length, bytes); NULL is length -1 without bytes. pgvector's binary form is int16
    dimension, int16 unused, then float4 values. One dtype per user_id value, because the length is fixed.
    """
    fields: list[tuple[Any, ...]] = [
        ("fields", ">i2"),
        ("workspace_len", ">i4"), ("workspace", ">i8"),
        ("memory_len", ">i4"), ("memory", "V16"),
        ("model_len", ">i4"), ("model", f"S{len(MODEL)}"),
        ("dimension_len", ">i4"), ("dimension", ">i4"),
        ("embedding_len", ">i4"), ("embedding_dim", ">i2"), ("embedding_unused", ">i2"),
        ("embedding", ">f4", (DIMENSION,)),
        ("sha_len", ">i4"), ("sha", "S64"),
        ("user_len", ">i4"),
    ]  # fmt: skip
    if user_id is not None:
        fields.append(("user", f"S{len(user_id.encode())}"))
    fields += [
        ("scope_len", ">i4"), ("scope", "S6"),
        ("project_len", ">i4"),  # NULL
        ("expires_len", ">i4"),  # NULL
        ("created_len", ">i4"), ("created", ">i8"),
        ("updated_len", ">i4"), ("updated", ">i8"),
    ]  # fmt: skip
    return np.dtype(fields)


def embedding_records(
    workspace_id: int, memory_ids: np.ndarray, vectors: np.ndarray, user_id: str | None, now_us: int
) -> np.ndarray:
    records = np.zeros(len(vectors), dtype=embedding_record_dtype(user_id))
    records["fields"] = 12
    records["workspace_len"], records["workspace"] = 8, workspace_id
    records["memory_len"], records["memory"] = 16, memory_ids
    records["model_len"], records["model"] = len(MODEL), MODEL.encode()
    records["dimension_len"], records["dimension"] = 4, DIMENSION
    records["embedding_len"], records["embedding_dim"] = 4 + 4 * DIMENSION, DIMENSION
    records["embedding"] = vectors
    records["sha_len"], records["sha"] = 64, hashlib.sha256(PLACEHOLDER_CONTENT.encode()).hexdigest().encode()
    if user_id is None:
        records["user_len"] = -1
    else:
        records["user_len"], records["user"] = len(user_id.encode()), user_id.encode()
    records["scope_len"], records["scope"] = 6, b"global"
    records["project_len"] = records["expires_len"] = -1
    records["created_len"] = records["updated_len"] = 8
    records["created"] = records["updated"] = now_us
    return records


def memory_ids_for(seed: int, workspace_index: int, count: int) -> np.ndarray:
    """Deterministic version-4 UUIDs, as 16-byte records."""
    raw = np.random.default_rng([seed, 3, workspace_index]).integers(0, 256, (count, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    return raw.view("V16").reshape(count)


def memories_text(workspace_id: int, memory_ids: np.ndarray, user_id: str | None, now: str) -> str:
    """The minimal memories rows (text COPY) the embeddings point at."""
    user = user_id if user_id is not None else "\\N"
    columns = [
        str(workspace_id),
        PLACEHOLDER_CONTENT,
        "note",
        "long_term",
        "global",
        user,
        "{}",
        "{}",
        "{}",
        MODEL,
        now,
        now,
        "0.5",
    ]
    tail = "\t" + "\t".join(columns) + "\n"
    return "".join(str(uuid.UUID(bytes=bytes(m))) + tail for m in memory_ids)


@dataclass
class LoadReport:
    reused: bool
    fingerprint: str
    generate_seconds: float = 0.0
    copy_seconds: float = 0.0
    vacuum_analyze_seconds: float = 0.0
    table_bytes: int = 0
    rows: int = 0


def workspace_ids(specs: list[WorkspaceSpec], data_fingerprint: str) -> tuple[dict[int, int], bool]:
    """Ensure the org workspaces exist; return {spec index: workspace id} and whether all carry the
    data set's fingerprint."""
    from tenancy.models import Workspace

    ids: dict[int, int] = {}
    current = True
    for spec in specs:
        name = f"vectorbench {data_fingerprint} {spec.label}"
        workspace, _ = Workspace.objects.get_or_create(
            kind=Workspace.Kind.ORG, slug=spec.slug, defaults={"name": name}
        )
        current &= workspace.name == name
        ids[spec.index] = workspace.id
    return ids, current


def stored_counts() -> dict[int, int]:
    with superuser_connect() as conn:
        rows = conn.execute(
            "SELECT workspace_id, count(*) FROM memory_embeddings WHERE model = %s GROUP BY 1", [MODEL]
        ).fetchall()
    return {int(ws): int(n) for ws, n in rows}


def load(world: World, specs: list[WorkspaceSpec], ids: dict[int, int], seed: int, burst: int) -> LoadReport:
    """Replace everything in the bench tables with the data set, in one binary COPY per table.

    Rows reach memory_embeddings in bursts of `burst` rows of one workspace, bursts of all workspaces
    shuffled: as in production, where the embedding pipeline writes a few rows at a time for whichever tenant
    is active, a workspace's rows are spread over the whole table rather than packed together (burst 0 =
    packed, the best case for the exact scan, which then reads the fewest pages).
    """
    from tenancy.models import Workspace

    report = LoadReport(reused=False, fingerprint="")
    now = datetime.now(UTC)
    now_us = int((now - PG_EPOCH).total_seconds() * 1_000_000)
    started = time.perf_counter()
    sources: list[np.ndarray] = []  # binary records, one array per (workspace, user)
    memories: list[str] = []
    for spec in specs:
        vectors = world.sample(spec.index, spec.size, stream=0)
        memory_ids = memory_ids_for(seed, spec.index, spec.size)
        # Which rows belong to which user: a random subset each, not a block of similar rows.
        order = np.random.default_rng([seed, 4, spec.index]).permutation(spec.size)
        position = 0
        for user_id, count in spec.users:
            rows = order[position : position + count]
            position += count
            sources.append(
                embedding_records(ids[spec.index], memory_ids[rows], vectors[rows], user_id, now_us)
            )
            memories.append(memories_text(ids[spec.index], memory_ids[rows], user_id, now.isoformat()))
        report.rows += spec.size
        progress(f"generating: {report.rows}/{TOTAL_VECTORS}")
    progress_done()
    chunks = [(s, start, min(start + (burst or len(a)), len(a))) for s, a in enumerate(sources)
              for start in range(0, len(a), burst or len(a))]  # fmt: skip
    if burst:
        np.random.default_rng([seed, 5]).shuffle(chunks)
    report.generate_seconds = time.perf_counter() - started

    started = time.perf_counter()
    with superuser_connect() as conn:  # the superuser bypasses row-level security; one transaction
        conn.execute("SET synchronous_commit = off")
        # The per-workspace indexes (hnsw_index_ensure) would be maintained row by row during the COPY, the
        # HNSW ones slowly; they are built again afterwards, as the product builds them.
        for (name,) in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_embeddings' "
            "AND (indexname LIKE 'memory_embeddings_hnsw%%' OR indexname LIKE 'memory_embeddings_users_%%')"
        ).fetchall():
            conn.execute(f'DROP INDEX "{name}"')
        # The bench database holds nothing else: empty the memory tables (and what references them) at once.
        # memory_lexemes is filled by a trigger and has no foreign key, so CASCADE does not reach it; left
        # behind, a seed loaded a second time collides with its own rows.
        conn.execute("TRUNCATE memories, memory_embeddings, memory_lexemes CASCADE")
        with conn.cursor().copy(
            "COPY memories (id, workspace_id, content, type, layer, scope, user_id, tags, paths, "
            "injection_flags, embedding_model, created_at, updated_at, importance) FROM STDIN"
        ) as copy:
            for text in memories:
                copy.write(text)
        log(f"copied {report.rows} memories ({time.perf_counter() - started:.0f} s)")
        with conn.cursor().copy(
            f"COPY memory_embeddings ({EMBEDDING_COLUMNS}) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.write(COPY_SIGNATURE)
            for written, (source, start, end) in enumerate(chunks, 1):
                copy.write(sources[source][start:end].tobytes())
                if written % 4000 == 0:
                    progress(f"copying vectors: {written}/{len(chunks)} bursts")
            copy.write(COPY_TRAILER)
        progress_done()
        conn.commit()
    report.copy_seconds = time.perf_counter() - started
    # Only now that the data is complete: a crash above leaves the old names, so the next run reloads.
    data_fingerprint = fingerprint(seed, burst, world.config)
    for spec in specs:
        Workspace.objects.filter(id=ids[spec.index]).update(
            name=f"vectorbench {data_fingerprint} {spec.label}"
        )
    return report


def vacuum_analyze() -> float:
    """Set hint bits and the visibility map once (or the first searches would write) and fresh statistics."""
    started = time.perf_counter()
    with superuser_connect(autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) memories")
        conn.execute("VACUUM (ANALYZE) memory_embeddings")
    return time.perf_counter() - started


def table_bytes() -> dict[str, int]:
    with superuser_connect() as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c "
            "WHERE c.relname IN ('memories', 'memory_embeddings') "
            "OR c.relname LIKE 'memory_embeddings_hnsw%' "
            "OR c.relname LIKE 'memory_embeddings_users_%'"
        ).fetchall()
    return {name: int(size) for name, size in rows}


# --- HNSW index ---------------------------------------------------------------------------------------------


@dataclass
class IndexBuild:
    workspace_index: int
    name: str
    users_name: str
    seconds: float | None  # None: the indexes were already there (use --rebuild-index to time them again)
    size_bytes: int = 0
    users_size_bytes: int = 0


def build_indexes(specs: list[WorkspaceSpec], ids: dict[int, int], rebuild: bool) -> list[IndexBuild]:
    """Build the indexes of every workspace over the exact threshold, as the product does
    (hnsw_index_ensure)."""
    from django.conf import settings

    from retrieval import vectors

    builds: list[IndexBuild] = []
    for spec in specs:
        if spec.size <= settings.VECTOR_EXACT_MAX_ROWS:
            continue
        workspace_id = ids[spec.index]
        name = vectors.hnsw_index_name(workspace_id, DIMENSION)
        users_name = vectors.users_index_name(workspace_id, DIMENSION)
        if rebuild:
            with superuser_connect(autocommit=True) as conn:
                conn.execute(f'DROP INDEX IF EXISTS "{name}"')
                conn.execute(f'DROP INDEX IF EXISTS "{users_name}"')
        existed = vectors.hnsw_index_ready(workspace_id=workspace_id, dimension=DIMENSION)
        log(f"{'checking' if existed else 'building'} {name} and {users_name} ({spec.size} rows)")
        started = time.perf_counter()
        if not vectors.hnsw_index_ensure(workspace_id=workspace_id, dimension=DIMENSION):
            raise RuntimeError(f"{name}: another process holds the build lock")
        seconds = None if existed else time.perf_counter() - started
        builds.append(IndexBuild(spec.index, name, users_name, seconds))
    sizes = table_bytes()
    for build in builds:
        build.size_bytes = sizes.get(build.name, 0)
        build.users_size_bytes = sizes.get(build.users_name, 0)
    return builds


# --- Measuring ----------------------------------------------------------------------------------------------


@dataclass
class StoredWorkspace:
    memory_ids: list[uuid.UUID]
    user_ids: np.ndarray  # object array of str | None
    vectors: np.ndarray  # float32, as stored


def stored_workspace(workspace_id: int) -> StoredWorkspace:
    """The workspace's vectors as PostgreSQL holds them: the ground truth is computed from these."""
    from pgvector.psycopg import register_vector

    with superuser_connect() as conn:
        register_vector(conn)
        cursor = conn.cursor(binary=True)  # binary: the float4 values exactly, no text round trip
        cursor.execute(
            "SELECT memory_id, user_id, embedding FROM memory_embeddings "
            "WHERE workspace_id = %s AND model = %s",
            [workspace_id, MODEL],
        )
        rows = cursor.fetchall()
    return StoredWorkspace(
        memory_ids=[row[0] for row in rows],
        user_ids=np.array([row[1] for row in rows], dtype=object),
        vectors=np.stack([np.asarray(row[2], dtype=np.float32) for row in rows]),
    )


def exact_neighbours(stored: StoredWorkspace, user_id: str | None, queries: np.ndarray) -> np.ndarray:
    """Exact cosine similarities of every visible row to every query (rows not visible: -inf), float64."""
    visible = np.array([u is None or u == user_id for u in stored.user_ids])
    matrix = stored.vectors.astype(np.float64)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    q = queries.astype(np.float64)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    similarity = q @ matrix.T
    similarity[:, ~visible] = -np.inf
    return similarity


@contextmanager
def captured_sql() -> Iterator[list[tuple[str, Any]]]:
    """Every statement the app connection runs inside the block, with its parameters (for EXPLAIN)."""
    from django.db import connections

    statements: list[tuple[str, Any]] = []

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connections["app"].execute_wrapper(wrapper):
        yield statements


def explain_search(workspace_id: int, model: str, query: np.ndarray, scope: Any) -> dict[str, Any]:
    """Run nearest() once and EXPLAIN ANALYZE its search statement in the same transaction (same settings)."""
    from django.db import connections

    from retrieval import vectors
    from tenancy.rls import workspace_context

    with workspace_context(workspace_id):
        with captured_sql() as statements:
            vectors.nearest(workspace_id=workspace_id, model=model, query=query, scope=scope, limit=TOP_K)
        sql, params = next((s, p) for s, p in reversed(statements) if "ORDER BY" in s)
        with connections["app"].cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
            plan = cursor.fetchone()[0]
    plan = plan[0] if isinstance(plan, list) else json.loads(plan)[0]

    nodes: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        nodes.append(node["Node Type"] + (f" on {node['Index Name']}" if "Index Name" in node else ""))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan["Plan"])
    top = plan["Plan"]
    return {
        "nodes": nodes,
        "executionMs": round(plan["Execution Time"], 2),
        "sharedHitBlocks": top.get("Shared Hit Blocks"),
        "sharedReadBlocks": top.get("Shared Read Blocks"),
    }


def sql_exact_top(workspace_id: int, query: np.ndarray, user_id: str | None) -> list[uuid.UUID]:
    """The exact top 10 computed by PostgreSQL (no index on the uncast column), to cross-check numpy's."""
    from retrieval import vectors

    with superuser_connect() as conn:
        rows = conn.execute(
            "SELECT memory_id FROM memory_embeddings WHERE workspace_id = %s AND model = %s "
            "AND (user_id IS NULL OR user_id = %s) ORDER BY embedding <=> %s::vector LIMIT %s",
            [workspace_id, MODEL, user_id, vectors.vector_literal(query), TOP_K],
        ).fetchall()
    return [row[0] for row in rows]


def percentiles(values: list[float]) -> dict[str, float]:
    array = np.asarray(values)
    return {
        "p50": round(float(np.percentile(array, 50)), 2),
        "p95": round(float(np.percentile(array, 95)), 2),
        "p99": round(float(np.percentile(array, 99)), 2),
        "mean": round(float(array.mean()), 2),
        "max": round(float(array.max()), 2),
    }


def run_case(case: Case, world: World, ids: dict[int, int], args: argparse.Namespace) -> dict[str, Any]:
    from retrieval import vectors
    from tenancy.rls import workspace_context

    workspace_id = ids[case.workspace_index]
    stored = stored_workspace(workspace_id)
    # Queries: new rows from the workspace's topic mixture (a new sentence on the workspace's subjects), not
    # perturbed copies of stored rows, which would plant an easy nearest neighbour. One stream per searching
    # user, so two cases in one workspace do not share queries.
    stream = 1 + sum(c.workspace_index == case.workspace_index for c in CASES[: CASES.index(case)])
    queries = world.sample(case.workspace_index, args.warmup + args.queries, stream=stream)
    warmup, queries = queries[: args.warmup], queries[args.warmup :]
    similarity = exact_neighbours(stored, case.user_id, queries)
    scope = vectors.VectorScope(user_id=case.user_id, project_id=None)
    visible = int(sum(u is None or u == case.user_id for u in stored.user_ids))

    for query in warmup:  # connections, catalog caches, the index's upper layers in shared buffers
        with workspace_context(workspace_id):
            vectors.nearest(workspace_id=workspace_id, model=MODEL, query=query, scope=scope, limit=TOP_K)

    position = {memory_id: row for row, memory_id in enumerate(stored.memory_ids)}
    load_before = os.getloadavg()
    cpu_before = cpu_times()
    latencies: list[float] = []
    recalls: list[float] = []
    strict_recalls: list[float] = []
    short_results = 0
    scope_violations = 0  # returned rows the scope must not see
    expected = min(TOP_K, visible)  # a scope that sees fewer rows than the limit must return all of them
    for index, query in enumerate(queries):
        with workspace_context(workspace_id):
            started = time.perf_counter()
            result = vectors.nearest(
                workspace_id=workspace_id, model=MODEL, query=query, scope=scope, limit=TOP_K
            )
            latencies.append((time.perf_counter() - started) * 1000)
        returned = [position[memory_id] for memory_id, _ in result]
        short_results += len(returned) < expected
        scope_violations += sum(bool(np.isneginf(similarity[index, row])) for row in returned)
        if expected == 0:
            recalls.append(float(not returned))
            strict_recalls.append(float(not returned))
            continue
        truth = np.argsort(-similarity[index])[:expected]
        threshold = similarity[index, truth[-1]] - TIE_TOLERANCE
        recalls.append(sum(similarity[index, row] >= threshold for row in returned) / expected)
        strict_recalls.append(len(set(returned) & set(truth.tolist())) / expected)
    load_after = os.getloadavg()
    cpu_after = cpu_times()

    # Ground truth check: PostgreSQL's exact answer for a few queries must match numpy's (up to ties).
    mismatches = 0
    for index in range(min(args.sql_checks, len(queries)) if expected else 0):
        sql_top = sql_exact_top(workspace_id, queries[index], case.user_id)
        threshold = np.sort(similarity[index])[-expected] - TIE_TOLERANCE
        mismatches += sum(similarity[index, position[m]] < threshold for m in sql_top)
    plan = explain_search(workspace_id, MODEL, queries[0], scope)
    count, _ = vectors_state(workspace_id)
    return {
        "case": case.name,
        "workspaceId": workspace_id,
        "workspaceRows": count,
        "visibleRows": visible,
        "userId": case.user_id,
        "accessPath": access_path(plan["nodes"]),
        "queries": len(queries),
        "recallAt10": round(float(np.mean(recalls)), 4),
        "recallAt10Min": round(float(np.min(recalls)), 2),
        "recallAt10StrictIds": round(float(np.mean(strict_recalls)), 4),
        "queriesBelowFullRecall": int(sum(r < 1 for r in recalls)),
        "shortResults": short_results,
        "scopeViolations": scope_violations,
        "latencyMs": percentiles(latencies),
        "loadavgBefore": [round(x, 2) for x in load_before],
        "loadavgAfter": [round(x, 2) for x in load_after],
        # Share of both cores busy (this benchmark, PostgreSQL and anything else) while the searches ran: one
        # client and one backend alternate, so about 0.5 means an otherwise idle machine.
        "machineBusy": busy_share(cpu_before, cpu_after),
        "groundTruthSqlChecks": min(args.sql_checks, len(queries)),
        "groundTruthSqlMismatches": int(mismatches),
        "plan": plan,
    }


def access_path(nodes: list[str]) -> str:
    """Which of nearest()'s paths the plan took: the HNSW index, or an exact scan (through which btree)."""
    if any("hnsw" in node for node in nodes):
        return "hnsw"
    if any("users" in node for node in nodes):
        return "exact/user"
    return "exact"


def cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine from /proc/stat (Linux): how busy it was during a case."""
    try:
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


def busy_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] == before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 2)


def vectors_state(workspace_id: int) -> tuple[int, str]:
    from retrieval import vectors
    from tenancy.rls import workspace_context

    with workspace_context(workspace_id):
        return vectors.vector_state(workspace_id=workspace_id, model=MODEL)


# --- Report -------------------------------------------------------------------------------------------------

RECALL_GOAL = 0.99
P95_GOAL_MS = 20.0


def print_table(cases: list[dict[str, Any]]) -> None:
    header = ["case", "rows", "visible", "path", "recall@10", "min", "p50", "p95", "p99", "busy", "goal"]
    rows = [header]
    for r in cases:
        ok = r["recallAt10"] >= RECALL_GOAL and r["latencyMs"]["p95"] <= P95_GOAL_MS
        rows.append([
            r["case"], str(r["workspaceRows"]), str(r["visibleRows"]), r["accessPath"],
            f"{r['recallAt10']:.4f}", f"{r['recallAt10Min']:.1f}",
            f"{r['latencyMs']['p50']:.2f}", f"{r['latencyMs']['p95']:.2f}", f"{r['latencyMs']['p99']:.2f}",
            "-" if r["machineBusy"] is None else f"{r['machineBusy']:.0%}",
            "ok" if ok else "MISSED",
        ])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for index, row in enumerate(rows):
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells))
        if index == 0:
            print("  ".join("-" * w for w in widths))
    print(
        "(latency of nearest() in ms; busy: both cores' use while the case ran, "
        "~50 % when nothing else runs; "
        f"goal: recall@10 >= {RECALL_GOAL} and p95 <= {P95_GOAL_MS:.0f} ms)"
    )


def machine_info() -> dict[str, Any]:
    import django
    import pgvector
    from django.conf import settings

    with superuser_connect() as conn:
        settings_rows = conn.execute(
            "SELECT name, setting, unit FROM pg_settings WHERE name IN ('shared_buffers', 'work_mem', "
            "'maintenance_work_mem', 'max_parallel_workers_per_gather', 'max_parallel_maintenance_workers', "
            "'effective_cache_size', 'jit')"
        ).fetchall()
        postgres = conn.execute("SHOW server_version").fetchone()[0]
        extension = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "django": django.get_version(),
        "postgres": postgres,
        "pgvectorExtension": extension,
        "pgvectorPython": getattr(pgvector, "__version__", None),
        "postgresSettings": {name: f"{value}{unit or ''}" for name, value, unit in settings_rows},
        "vectorSettings": {
            name: getattr(settings, name) for name in dir(settings) if name.startswith("VECTOR_")
        },
        "loadavgAtStart": [round(x, 2) for x in os.getloadavg()],
    }


# --- Main ---------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200, help="measured searches per case (200)")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured searches per case first (20)")
    parser.add_argument(
        "--burst", type=int, default=25, help="rows per write burst when loading; 0 = packed (25)"
    )
    parser.add_argument("--seed", type=int, default=7, help="data and query seed (7)")
    parser.add_argument("--sql-checks", type=int, default=5, help="queries per case checked against SQL (5)")
    parser.add_argument(
        "--cases", default="", help="comma-separated case numbers to run (1-based; default all)"
    )
    parser.add_argument("--reload", action="store_true", help="load the data again even if it is there")
    parser.add_argument("--rebuild-index", action="store_true", help="drop and time the HNSW index builds")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "vector_search.json")
    args = parser.parse_args(argv)
    if args.queries < 1 or args.warmup < 0 or args.burst < 0 or args.sql_checks < 0:
        parser.error("--queries must be >= 1; --warmup, --burst and --sql-checks >= 0")
    try:
        chosen = [int(c) for c in args.cases.split(",") if c.strip()]
    except ValueError:
        parser.error("--cases must be comma-separated numbers, e.g. 3,4")
    if any(not 1 <= c <= len(CASES) for c in chosen):
        parser.error(f"--cases are 1..{len(CASES)}")
    args.cases = [CASES[c - 1] for c in chosen] or CASES
    return args


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started_at = datetime.now(UTC)
    ensure_bench_database()
    setup_django_and_migrate()
    config = GeneratorConfig()
    world = World(args.seed, config)
    specs = layout()
    data_fingerprint = fingerprint(args.seed, args.burst, config)
    ids, named = workspace_ids(specs, data_fingerprint)
    counts = stored_counts()
    complete = named and all(counts.get(ids[s.index]) == s.size for s in specs) and len(counts) == len(specs)
    if complete and not args.reload:
        report = LoadReport(reused=True, fingerprint=data_fingerprint, rows=sum(counts.values()))
        log(f"reusing the loaded data set {data_fingerprint} ({report.rows} vectors)")
    else:
        report = load(world, specs, ids, args.seed, args.burst)
        report.fingerprint = data_fingerprint
        report.vacuum_analyze_seconds = vacuum_analyze()
        log(
            f"loaded {report.rows} vectors: generate {report.generate_seconds:.0f} s, "
            f"COPY {report.copy_seconds:.0f} s, "
            f"VACUUM ANALYZE {report.vacuum_analyze_seconds:.0f} s"
        )
    report.table_bytes = table_bytes().get("memory_embeddings", 0)
    builds = build_indexes(specs, ids, args.rebuild_index)
    for build in builds:
        took = "already built" if build.seconds is None else f"built in {build.seconds:.1f} s"
        sizes = f"{build.size_bytes / 2**20:.0f} MiB (+ user btree {build.users_size_bytes / 2**20:.1f} MiB)"
        log(f"{build.name}: {took}, {sizes}")
    machine = machine_info()
    target_stats = vector_statistics(world.sample(2, 3000, stream=0))

    results: list[dict[str, Any]] = []
    for case in args.cases:
        log(f"measuring {case.name}: {args.queries} queries (+{args.warmup} warm-up)")
        results.append(run_case(case, world, ids, args))
        r = results[-1]
        log(
            f"  recall@10 {r['recallAt10']:.4f}, p50 {r['latencyMs']['p50']:.2f} ms, "
            f"p95 {r['latencyMs']['p95']:.2f} ms, plan {r['plan']['nodes']}"
        )
    machine["loadavgAtEnd"] = [round(x, 2) for x in os.getloadavg()]
    return {
        "benchmark": "vector_search",
        "startedAt": started_at.isoformat(timespec="seconds"),
        "durationSeconds": round((datetime.now(UTC) - started_at).total_seconds(), 1),
        "database": BENCH_DATABASE,
        "machine": machine,
        "config": {
            "vectors": TOTAL_VECTORS,
            "workspaces": len(specs),
            "dimension": DIMENSION,
            "model": MODEL,
            "queriesPerCase": args.queries,
            "warmupPerCase": args.warmup,
            "burst": args.burst,
            "seed": args.seed,
            "limit": TOP_K,
            "tieTolerance": TIE_TOLERANCE,
            "generator": {**config.__dict__, "version": GENERATOR_VERSION},
            "layout": [
                {"slug": s.slug, "rows": s.size, "label": s.label, "users": [list(u) for u in s.users]}
                for s in specs
                if s.label != "filler"
            ]
            + [
                {
                    "fillers": sum(s.label == "filler" for s in specs),
                    "rows": sorted({s.size for s in specs if s.label == "filler"}),
                }
            ],
        },  # fmt: skip
        "data": {
            "reused": report.reused,
            "fingerprint": report.fingerprint,
            "rows": report.rows,
            "generateSeconds": round(report.generate_seconds, 1),
            "copySeconds": round(report.copy_seconds, 1),
            "vacuumAnalyzeSeconds": round(report.vacuum_analyze_seconds, 1),
            "embeddingsTableBytes": report.table_bytes,
            "statisticsOf3000RowsOfThe10PctWorkspace": target_stats,
        },
        "indexBuilds": [
            {
                "workspace": specs[b.workspace_index].slug,
                "index": b.name,
                "usersIndex": b.users_name,
                "seconds": None if b.seconds is None else round(b.seconds, 1),
                "sizeBytes": b.size_bytes,
                "usersIndexSizeBytes": b.users_size_bytes,
            }
            for b in builds
        ],  # fmt: skip
        "cases": results,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = benchmark(args)
    print()
    print_table(result["cases"])
    builds = ", ".join(
        f"{b['workspace']} {'reused' if b['seconds'] is None else str(b['seconds']) + ' s'}"
        for b in result["indexBuilds"]
    )
    data = result["data"]
    seconds = data["generateSeconds"] + data["copySeconds"] + data["vacuumAnalyzeSeconds"]
    loaded = "reused" if data["reused"] else f"{seconds:.0f} s"
    print(
        f"data load: {loaded}; HNSW builds: {builds}; load average {result['machine']['loadavgAtStart']} -> "
        f"{result['machine']['loadavgAtEnd']} on {result['machine']['nproc']} cores"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
