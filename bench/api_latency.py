"""Latency of the SDK API under a real gunicorn, on its own database (cairn_bench).

    .venv/bin/python bench/api_latency.py [--memories 10000] [--requests 500] [--clients 1,4]
                                          [--out bench/results/api_latency.json]

What it does, in order (see bench/README.md for how to read the numbers):
  1. creates the database cairn_bench on the embedded PostgreSQL if missing and migrates it; the developer's
     database (cairn) and the test database (test_cairn) are never opened;
  2. seeds a bench user, a fresh API key and --memories memories in the user's personal workspace (reused when
     the count already matches, so a re-run is fast);
  3. starts gunicorn (2 sync workers) on a free port, waits for /health and warms up;
  4. sends --requests memories/add requests at each client count, then memories/search and memories/list at
     one client, recording the server's own time (Server-Timing: app;dur=…) and the client-observed latency;
  5. prints a table, writes it as JSON to --out, and stops gunicorn (also on Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# CAIRN_BENCH_DATABASE picks another one: the mixed load test's fresh-workspace workload needs a database the
# 100k context/get seed does not occupy.
BENCH_DATABASE = os.environ.get("CAIRN_BENCH_DATABASE", "cairn_bench")
BENCH_USERNAME = "bench"
# memories/add requests write as this end user; seed memories have no user. That keeps the seed countable (and
# reusable) and lets the next run delete what the previous run's add benchmark wrote.
WRITER_USER_ID = "bench-writer"
API = "/api/sdk/v1"
GUNICORN_WORKERS = 2
HEALTH_TIMEOUT_SECONDS = 60.0
WARMUP_REQUESTS = 40
SEED_CHUNK = 10_000  # rows per transaction while seeding: bounded memory, visible progress

# Both aliases of settings.DATABASES honour this, so everything this process and gunicorn open is cairn_bench.
# Set before Django (or anything importing settings) is loaded.
os.environ["CAIRN_DATABASE_NAME"] = BENCH_DATABASE
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


# --- Realistic-looking memory content -----------------------------------------------------------------------

# Word lists the generated memories are made of; search queries draw from TOPICS and TECH so they find rows.
# fmt: off
TOPICS = [
    "billing", "auth", "search", "ingest", "payments", "onboarding", "analytics", "notifications", "deploy",
    "cache", "queue", "graph", "embedding", "migration", "logging", "metrics", "storage", "gateway",
    "frontend", "mobile", "invoice", "reporting", "scheduler", "webhooks", "permissions", "exports", "backup",
    "email",
]
TECH = [
    "postgres", "redis", "kafka", "django", "react", "terraform", "kubernetes", "docker", "nginx", "celery",
    "pgvector", "grafana", "sentry", "s3", "graphql", "typescript", "rust", "golang", "pytest", "webpack",
    "gunicorn", "rabbitmq", "elasticsearch", "prometheus", "vite", "fastapi", "sqlite", "clickhouse",
]
PEOPLE = ["Alice", "Bob", "Priya", "Chen", "Marta", "Omar", "Yuki", "Lena", "Tomás", "Aisha", "Noah"]
ACTIONS = [
    "prefers", "decided to use", "migrated away from", "deprecated", "benchmarked", "pinned the version of",
    "rolled back", "documented", "reviewed", "refactored", "wants to evaluate", "upgraded",
]
QUALIFIERS = [
    "before the release", "for the staging environment", "because of latency spikes",
    "after the outage in March", "to reduce cloud costs", "until the next quarter", "behind a feature flag",
    "for compliance reasons", "in every new service", "when tests are flaky", "during the on-call week",
    "for the enterprise customers",
]
# fmt: on
TEMPLATES = [
    "{person} {action} {tech} for the {topic} service {qualifier}.",
    "Always run the {tech} checks on the {topic} module {qualifier}.",
    "The {topic} team uses {tech} together with {tech2} {qualifier}.",
    "Never deploy {topic} changes on Fridays; {person} has to approve {tech} upgrades.",
    "The user asked to keep answers about {topic} short and to mention {tech} only {qualifier}.",
    "Bug in {topic}: the {tech} connection pool was exhausted {qualifier}; raising the limit fixed it.",
    "{person} owns the {topic} dashboards in {tech}.",
    "Decision: {topic} events go through {tech} instead of {tech2} {qualifier}.",
    "To debug {topic}, start with the {tech} logs and then check {tech2}.",
    "The {topic} API returns paginated results; {person} documented the {tech} schema {qualifier}.",
]
CATEGORIES = ["preferences", "architecture", "operations", "people", "bugs", "conventions", None, None]
PROJECTS = [f"github.com/acme/{name}" for name in ("api", "web", "infra", "mobile", "data")]
MEMORY_TYPES = ["note", "fact", "decision", "rule", "skill"]
TYPE_WEIGHTS = [40, 25, 15, 10, 10]
SEARCH_PHRASES = ['"connection pool"', '"feature flag"', '"staging environment"', '"latency spikes"']


def sentence(rng: random.Random) -> str:
    tech, tech2 = rng.sample(TECH, 2)
    return rng.choice(TEMPLATES).format(
        person=rng.choice(PEOPLE),
        action=rng.choice(ACTIONS),
        tech=tech,
        tech2=tech2,
        topic=rng.choice(TOPICS),
        qualifier=rng.choice(QUALIFIERS),
    )


def memory_fields(rng: random.Random) -> dict[str, Any]:
    """One memory as the API would receive it: 1–3 sentences, a few tags, sometimes a category or a path."""
    memory_type = rng.choices(MEMORY_TYPES, TYPE_WEIGHTS)[0]
    tags = rng.sample(TOPICS + TECH, rng.randint(0, 3))
    paths = [f"src/{rng.choice(TOPICS)}/{rng.choice(TECH)}.py"] if rng.random() < 0.2 else []
    return {
        "content": " ".join(sentence(rng) for _ in range(rng.randint(1, 3))),
        "type": memory_type,
        "tags": tags,
        "paths": paths,
        "category": rng.choice(CATEGORIES),
    }


def search_query(rng: random.Random) -> str:
    """Mostly one or two words found in the seed (so ranking has work to do), sometimes a phrase or a NOT."""
    roll = rng.random()
    if roll < 0.5:
        return rng.choice(TOPICS + TECH)
    if roll < 0.8:
        return f"{rng.choice(TECH)} {rng.choice(TOPICS)}"
    if roll < 0.9:
        return rng.choice(SEARCH_PHRASES)
    return f"{rng.choice(TOPICS)} -{rng.choice(TECH)}"


# --- Database: create, migrate, seed ------------------------------------------------------------------------


def ensure_bench_database(database: str = BENCH_DATABASE) -> None:
    """Create `database` (default cairn_bench) as the owner role's database, connecting as the superuser on
    the embedded server. The other benchmarks call this for their own databases."""
    import psycopg
    from psycopg import sql

    from config import embedded_db

    server = embedded_db.ensure_embedded_postgres()
    connect = {
        "host": server.socket_dir,
        "port": server.port,
        "user": embedded_db.SUPERUSER,
        "autocommit": True,
    }
    with psycopg.connect(dbname="postgres", **connect) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone():
            create = sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(database), sql.Identifier(embedded_db.OWNER_ROLE)
            )
            # CREATE DATABASE copies template1 and fails while anyone else (a test run starting up) is
            # connected to it; that lasts milliseconds, so retry briefly.
            for attempt in range(10):
                try:
                    conn.execute(create)
                    break
                except psycopg.errors.ObjectInUse:
                    if attempt == 9:
                        raise
                    time.sleep(0.5)
            print(f"created database {database}", file=sys.stderr)
    # template1 carries these (embedded_db bootstrap); repeating it is free and covers an older template.
    with psycopg.connect(dbname=database, **connect) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")


def setup_django_and_migrate() -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


@dataclass(frozen=True)
class Seed:
    workspace_id: int
    api_key: str
    memories: int  # seed memories in the workspace after seeding
    inserted: int
    deleted: int  # surplus seed rows plus rows written by previous runs' add benchmark
    seconds: float


def bench_user_and_key() -> tuple[Any, int, str]:
    """The bench user, its personal workspace id and a fresh API key.

    Only key hashes are stored, so an earlier run's key cannot be recovered; those are revoked, not piled up.
    """
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from tenancy import services
    from tenancy.models import ApiKey

    user_model = get_user_model()
    user = user_model.objects.filter(username=BENCH_USERNAME).first()
    if user is None:
        # The post_save signal makes the personal workspace.
        user = user_model.objects.create_user(BENCH_USERNAME, email="bench@example.com", password=None)
    workspace = services.personal_workspace_ensure(user=user)
    ApiKey.objects.filter(user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
    key = services.api_key_create(
        user=user,
        expires_at=timezone.now() + timedelta(days=1),
        name="bench",
        created_via="bench",
        scope="admin",
    )
    return user, workspace.id, key.raw_key


def seed_memories(workspace_id: int, target: int) -> tuple[int, int]:
    """Make the workspace hold exactly `target` seed memories and nothing else; return (inserted, deleted)."""
    from django.db import connections

    from memories.models import Memory
    from pipeline.services import forget_side_effects
    from tenancy.rls import workspace_context

    # FORCE row-level security: without the workspace context these statements would see (and write) nothing.
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        # The previous run's adds leave the graph the way a forget does (their nodes, links and the edges they
        # are evidence for): left behind, the writer's user node gathered ~10k edges over many runs, a hub
        # that context_latency.py's depth-2 expansion then walked on every call.
        cursor.execute(
            "SELECT id FROM memories WHERE workspace_id = %s AND user_id IS NOT NULL", [workspace_id]
        )
        stale = [row[0] for row in cursor.fetchall()]
        existing = Memory.objects.filter(workspace_id=workspace_id).count() - len(stale)
        if existing > target:  # a larger earlier run: its oldest seeds go too
            cursor.execute(
                "SELECT id FROM memories WHERE workspace_id = %s AND user_id IS NULL "
                "ORDER BY created_at LIMIT %s",
                [workspace_id, existing - target],
            )
            stale += [row[0] for row in cursor.fetchall()]
            existing = target
        forget_side_effects(workspace_id=workspace_id, memory_ids=stale)
        # A worker (pipeline_throughput.py's qcluster shares this database) may have embedded these memories;
        # their jobs and vectors reference them without ON DELETE CASCADE.
        for table in ("pipeline_jobs", "memory_embeddings", "memories"):
            column = "id" if table == "memories" else "memory_id"
            cursor.execute(
                f"DELETE FROM {table} WHERE workspace_id = %s AND {column} = ANY(%s)", [workspace_id, stale]
            )
        deleted = cursor.rowcount

    inserted = 0
    rng = random.Random(f"cairn-bench-{existing}")  # deterministic content for a given starting point
    now = datetime.now(UTC)
    while existing + inserted < target:
        batch = min(SEED_CHUNK, target - existing - inserted)
        rows = [seed_row(rng, workspace_id, now) for _ in range(batch)]
        with workspace_context(workspace_id):
            Memory.objects.bulk_create(rows, batch_size=1000)
        inserted += batch
        progress(f"seeding memories: {existing + inserted}/{target}")
    if inserted and sys.stderr.isatty():
        print(file=sys.stderr)
    return inserted, deleted


def progress(message: str) -> None:
    """One line rewritten in place on a terminal; plain lines in a log, where a carriage return is noise."""
    if sys.stderr.isatty():
        print(f"\r{message}", end="", file=sys.stderr, flush=True)
    else:
        print(message, file=sys.stderr, flush=True)


def seed_row(rng: random.Random, workspace_id: int, now: datetime) -> Any:
    from memories.models import Memory

    fields = memory_fields(rng)
    project = rng.choice(PROJECTS) if rng.random() < 0.15 else None
    created = now - timedelta(seconds=rng.uniform(0, 365 * 86400))  # a year of history for the list index
    return Memory(
        workspace_id=workspace_id,
        content=fields["content"],
        type=fields["type"],
        layer="rule" if fields["type"] == "rule" else "long_term",
        scope="project" if project else "global",
        project_id=project,
        tags=fields["tags"],
        paths=fields["paths"],
        category=fields["category"],
        created_at=created,
        updated_at=created,
    )


def vacuum_analyze() -> None:
    """Fresh planner statistics and no dead rows, so every run starts from the same table state."""
    from django.db import connections

    with connections["default"].cursor() as cursor:  # the owner; VACUUM needs autocommit, which this is
        cursor.execute("VACUUM (ANALYZE) memories")


def count_memories(workspace_id: int) -> int:
    from memories.models import Memory
    from tenancy.rls import workspace_context

    with workspace_context(workspace_id):
        return Memory.objects.filter(workspace_id=workspace_id, deleted_at__isnull=True).count()


def prepare(target: int) -> Seed:
    started = time.perf_counter()
    ensure_bench_database()
    setup_django_and_migrate()
    _, workspace_id, raw_key = bench_user_and_key()
    inserted, deleted = seed_memories(workspace_id, target)
    vacuum_analyze()
    from django.db import connections

    connections.close_all()  # this process keeps no idle connections while gunicorn runs
    return Seed(workspace_id, raw_key, target, inserted, deleted, time.perf_counter() - started)


# --- gunicorn -----------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gunicorn(
    port: int, log_path: Path, options: list[str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run gunicorn for the duration of the block and stop it however the block ends. `options` replace the
    default worker options (2 sync workers)."""
    executable = Path(sys.executable).with_name("gunicorn")
    if not executable.exists():
        executable = ROOT / ".venv" / "bin" / "gunicorn"
    env = {
        **os.environ,
        "CAIRN_DATABASE_NAME": BENCH_DATABASE,
        "RATE_LIMIT_REQUESTS": "1000000",  # the benchmark measures latency, not the 120/min budget
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    bind = f"127.0.0.1:{port}"
    workers = options if options is not None else ["--workers", str(GUNICORN_WORKERS)]
    command = [str(executable), "config.wsgi", *workers, "--bind", bind]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        # Own session: a Ctrl-C in the terminal reaches only this script, which then stops gunicorn in order.
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            wait_healthy(process, port, log_path)
            yield process
        finally:
            stop_gunicorn(process)


def stop_gunicorn(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    # A second Ctrl-C while stopping must not leave gunicorn running, so ignore it until gunicorn is gone.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process.send_signal(signal.SIGTERM)  # graceful: workers finish their request, close DB connections
        try:
            process.wait(timeout=40)  # gunicorn's graceful timeout is 30 s
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its own process group: the master and its workers
            process.wait()
    finally:
        signal.signal(signal.SIGINT, previous)


def wait_healthy(process: subprocess.Popen[bytes], port: int, log_path: Path) -> None:
    deadline = time.monotonic() + HEALTH_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {process.returncode}:\n{tail(log_path)}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", f"{API}/health")
            if conn.getresponse().status == 200:
                return
        except (OSError, http.client.HTTPException):
            pass  # not listening yet
        finally:
            conn.close()
        time.sleep(0.2)
    raise RuntimeError(f"gunicorn not healthy after {HEALTH_TIMEOUT_SECONDS:.0f} s:\n{tail(log_path)}")


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --- Load generation ----------------------------------------------------------------------------------------

BodyMaker = Callable[[random.Random, dict[str, Any] | None], dict[str, Any]]


@dataclass(frozen=True)
class Workload:
    endpoint: str  # path under /api/sdk/v1
    expected_status: int
    body: BodyMaker  # (rng, data of this client's previous response) -> request body


def add_body(rng: random.Random, previous: dict[str, Any] | None) -> dict[str, Any]:
    return {**memory_fields(rng), "scope": {"userId": WRITER_USER_ID}}


def search_body(rng: random.Random, previous: dict[str, Any] | None) -> dict[str, Any]:
    return {"query": search_query(rng), "limit": 10}


def list_body(rng: random.Random, previous: dict[str, Any] | None) -> dict[str, Any]:
    # Walk pages as a client does (a few pages deep through nextCursor), so the cursor path is measured too.
    cursor = (previous or {}).get("nextCursor")
    if cursor and rng.random() < 0.8:
        return {"limit": 20, "cursor": cursor}
    return {"limit": 20}


ADD = Workload("memories/add", 201, add_body)
SEARCH = Workload("memories/search", 200, search_body)
LIST = Workload("memories/list", 200, list_body)


@dataclass
class Sample:
    ok: bool
    client_ms: float
    server_ms: float | None
    error: str | None = None


def server_timing_ms(header: str | None) -> float | None:
    """The app;dur=… entry of a Server-Timing header (config/middleware.py), in milliseconds."""
    for entry in (header or "").split(","):
        name, *params = [part.strip() for part in entry.split(";")]
        if name == "app":
            for param in params:
                if param.startswith("dur="):
                    return float(param[4:])
    return None


class Client:
    """One HTTP/1.1 connection per client thread.

    Keep-alive is asked for, but gunicorn's sync workers close the connection after every response, so
    http.client reconnects (over loopback) for the next request; that connect is part of client_ms.
    """

    def __init__(self, port: int, api_key: str) -> None:
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Connection": "keep-alive",
        }
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, workload: Workload, body: dict[str, Any]) -> tuple[Sample, dict[str, Any] | None]:
        payload = json.dumps(body).encode()
        started = time.perf_counter()
        try:
            self.conn.request("POST", f"{API}/{workload.endpoint}", payload, self.headers)
            response = self.conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()  # next request opens a new connection
            return Sample(False, (time.perf_counter() - started) * 1000, None, repr(exc)), None
        client_ms = (time.perf_counter() - started) * 1000
        server_ms = server_timing_ms(response.getheader("Server-Timing"))
        if response.status != workload.expected_status:
            return Sample(False, client_ms, server_ms, f"HTTP {response.status}: {raw[:300]!r}"), None
        try:
            data = json.loads(raw)["data"]
        except (ValueError, KeyError) as exc:
            return Sample(False, client_ms, server_ms, f"bad body ({exc!r}): {raw[:300]!r}"), None
        return Sample(True, client_ms, server_ms), data

    def close(self) -> None:
        self.conn.close()


def client_loop(
    port: int,
    api_key: str,
    workload: Workload,
    count: int,
    seed: str,
    start: threading.Barrier,
    out: list[Sample],
    stop: threading.Event,
) -> None:
    client = Client(port, api_key)
    rng = random.Random(seed)
    previous: dict[str, Any] | None = None
    try:
        start.wait()
        for _ in range(count):
            if stop.is_set():
                return
            sample, previous = client.call(workload, workload.body(rng, previous))
            out.append(sample)
    finally:
        client.close()


@dataclass
class Phase:
    samples: list[Sample]
    wall_seconds: float


def run_phase(port: int, api_key: str, workload: Workload, clients: int, total: int, label: str) -> Phase:
    """`total` requests split over `clients` threads that start together; wall time covers all of them."""
    counts = [total // clients + (1 if i < total % clients else 0) for i in range(clients)]
    start = threading.Barrier(clients + 1)
    stop = threading.Event()
    outputs: list[list[Sample]] = [[] for _ in range(clients)]
    threads = [
        threading.Thread(
            target=client_loop,
            daemon=True,
            args=(port, api_key, workload, counts[i], f"{label}-{i}", start, outputs[i], stop),
        )
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    try:
        for thread in threads:
            thread.join()
    finally:
        stop.set()  # on Ctrl-C: client threads finish their current request and return
    return Phase([s for out in outputs for s in out], time.perf_counter() - began)


# --- Statistics and report ----------------------------------------------------------------------------------


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not sorted_values:
        return None
    position = (len(sorted_values) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summary(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    stats = {f"p{q}": percentile(ordered, q) for q in (50, 95, 99)}
    stats["mean"] = sum(ordered) / len(ordered) if ordered else None
    stats["max"] = ordered[-1] if ordered else None
    return {name: round(value, 2) if value is not None else None for name, value in stats.items()}


def phase_result(workload: Workload, clients: int, phase: Phase) -> dict[str, Any]:
    ok = [s for s in phase.samples if s.ok]
    errors = [s for s in phase.samples if not s.ok]
    return {
        "endpoint": workload.endpoint,
        "clients": clients,
        "n": len(ok),
        "errors": len(errors),
        "firstError": errors[0].error if errors else None,
        "serverMs": summary([s.server_ms for s in ok if s.server_ms is not None]),
        "clientMs": summary([s.client_ms for s in ok]),
        "throughputRps": round(len(ok) / phase.wall_seconds, 1) if phase.wall_seconds > 0 else None,
        "wallSeconds": round(phase.wall_seconds, 2),
    }


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


# (title, cell) for each column of the printed table; the JSON has every statistic.
COLUMNS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("endpoint", lambda r: r["endpoint"]),
    ("clients", lambda r: str(r["clients"])),
    ("n", lambda r: str(r["n"])),
    ("err", lambda r: str(r["errors"])),
    ("srv p50", lambda r: fmt(r["serverMs"]["p50"])),
    ("srv p95", lambda r: fmt(r["serverMs"]["p95"])),
    ("srv p99", lambda r: fmt(r["serverMs"]["p99"])),
    ("cli p50", lambda r: fmt(r["clientMs"]["p50"])),
    ("cli p99", lambda r: fmt(r["clientMs"]["p99"])),
    ("req/s", lambda r: fmt(r["throughputRps"])),
]


def print_table(results: list[dict[str, Any]]) -> None:
    rows = [[title for title, _ in COLUMNS]] + [[cell(r) for _, cell in COLUMNS] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    for index, row in enumerate(rows):
        # First column left-aligned, numbers right-aligned.
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells))
        if index == 0:
            print("  ".join("-" * w for w in widths))
    print("(ms; srv = Server-Timing app;dur, cli = seen by the client; req/s = n / wall time of the phase)")


def machine_info() -> dict[str, Any]:
    import django
    import gunicorn as gunicorn_package
    from django.db import connections

    with connections["default"].cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
    connections.close_all()
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "django": django.get_version(),
        "gunicorn": gunicorn_package.__version__,
        "postgres": postgres,
        "gunicornWorkers": GUNICORN_WORKERS,
        "loadavgAtStart": [round(x, 2) for x in os.getloadavg()],
    }


# --- Main ---------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000, help="seed memories in the workspace (10000)")
    parser.add_argument("--requests", type=int, default=500, help="requests per measured phase (500)")
    parser.add_argument(
        "--clients", default="1,4", help="comma-separated concurrent clients for memories/add"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "api_latency.json")
    args = parser.parse_args(argv)
    try:
        args.clients = [int(c) for c in args.clients.split(",") if c.strip()]
    except ValueError:
        parser.error("--clients must be comma-separated integers, e.g. 1,4")
    if not args.clients or min(args.clients) < 1:
        parser.error("--clients needs at least one count, each >= 1")
    if args.memories < 0 or args.requests < 1:
        parser.error("--memories must be >= 0 and --requests >= 1")
    return args


def raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM takes the Ctrl-C path, so gunicorn is stopped in the finally blocks


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started_at = datetime.now(UTC)
    seed = prepare(args.memories)
    print(
        f"seed: {seed.memories} memories in workspace {seed.workspace_id} "
        f"(+{seed.inserted} inserted, -{seed.deleted} deleted, {seed.seconds:.1f} s)",
        file=sys.stderr,
    )
    machine = machine_info()
    port = free_port()
    results: list[dict[str, Any]] = []
    with gunicorn(port, args.out.with_suffix(".gunicorn.log")):
        print(f"gunicorn on 127.0.0.1:{port} ({GUNICORN_WORKERS} workers); warming up", file=sys.stderr)
        for workload in (ADD, SEARCH, LIST):  # every worker imports, connects and fills its caches
            run_phase(
                port, seed.api_key, workload, GUNICORN_WORKERS, WARMUP_REQUESTS, f"warmup-{workload.endpoint}"
            )
        plan = [(ADD, clients) for clients in args.clients] + [(SEARCH, 1), (LIST, 1)]
        for workload, clients in plan:
            print(
                f"measuring {workload.endpoint} with {clients} client(s), {args.requests} requests",
                file=sys.stderr,
            )
            phase = run_phase(
                port, seed.api_key, workload, clients, args.requests, f"{workload.endpoint}-{clients}"
            )
            results.append(phase_result(workload, clients, phase))
    machine["loadavgAtEnd"] = [round(x, 2) for x in os.getloadavg()]
    return {
        "benchmark": "api_latency",
        "startedAt": started_at.isoformat(timespec="seconds"),
        "durationSeconds": round((datetime.now(UTC) - started_at).total_seconds(), 1),
        "database": BENCH_DATABASE,
        "machine": machine,
        "config": {
            "memories": args.memories,
            "requests": args.requests,
            "clients": args.clients,
            "warmupRequests": WARMUP_REQUESTS,
        },
        "memoryCount": {"seeded": seed.memories, "atEnd": count_memories(seed.workspace_id)},
        "seed": {"inserted": seed.inserted, "deleted": seed.deleted, "seconds": round(seed.seconds, 1)},
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if os.environ.get("DATABASE_URL", "").strip():
        print(
            "bench/api_latency.py runs on the embedded PostgreSQL only; unset DATABASE_URL.", file=sys.stderr
        )
        return 2
    # Ctrl-C and SIGTERM both end in KeyboardInterrupt, whose unwinding stops gunicorn. SIGINT is set too
    # because a shell starting us in the background (`cmd &`) hands us SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
    try:
        report = benchmark(args)
    except KeyboardInterrupt:
        print("\ninterrupted (gunicorn, if started, has been stopped)", file=sys.stderr)
        return 130
    print()
    print(
        f"{report['memoryCount']['seeded']} memories, {report['machine']['nproc']} CPUs, "
        f"load average {report['machine']['loadavgAtStart']} at start"
    )
    print_table(report["results"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    failed = sum(r["errors"] for r in report["results"])
    if failed:
        first = next(r["firstError"] for r in report["results"] if r["errors"])
        print(f"{failed} requests failed; first: {first}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
