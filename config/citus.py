"""A local Citus cluster (a coordinator and workers on loopback ports under ./var/citus) for development and
the test suite, and what every node of it needs per database.

`scripts/citus_cluster.py` starts and stops the nodes and writes their addresses to `var/citus/cluster.json`;
this module reads that file. CREATE DATABASE is not propagated by Citus, so a database the app uses (the main
one, or the test database pytest-django creates) must exist with the same extensions on every node and have
the workers registered on the coordinator before the migrations distribute its tables: `database_prepare`
does that, idempotently. Production clusters are set up by their operator (docs/operations.md); none of this
runs there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The extensions every node's copy of a Cairn database holds; citus first, as it must be loaded first.
EXTENSIONS = ("citus", "vector", "pg_trgm")
SUPERUSER = "postgres"


@dataclass(frozen=True)
class Node:
    name: str
    host: str
    port: int


@dataclass(frozen=True)
class Cluster:
    coordinator: Node
    workers: tuple[Node, ...]

    @property
    def nodes(self) -> tuple[Node, ...]:
        return (self.coordinator, *self.workers)


def cluster_file() -> Path:
    from config.embedded_db import var_dir

    return Path(os.environ.get("CAIRN_CITUS_CLUSTER") or var_dir() / "citus" / "cluster.json")


def cluster_load(path: Path | None = None) -> Cluster:
    data = json.loads((path or cluster_file()).read_text())
    nodes = [Node(name=item["name"], host=item["host"], port=int(item["port"])) for item in data["nodes"]]
    return Cluster(coordinator=nodes[0], workers=tuple(nodes[1:]))


def _connect(node: Node, dbname: str) -> Any:
    import psycopg

    return psycopg.connect(host=node.host, port=node.port, user=SUPERUSER, dbname=dbname, autocommit=True)


def database_prepare(cluster: Cluster, *, dbname: str, owner: str) -> None:
    """Make `dbname` exist on every node with the extensions, and the workers registered on the coordinator's
    copy (the coordinator's own database is created by whoever uses it: `make citus`, or pytest-django)."""
    for node in cluster.nodes:
        with _connect(node, "postgres") as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [dbname]).fetchone():
                conn.execute(f'CREATE DATABASE "{dbname}" OWNER {owner}')
        with _connect(node, dbname) as conn:
            # A worker with Citus metadata refuses CREATE EXTENSION even when it would do nothing.
            present = {row[0] for row in conn.execute("SELECT extname FROM pg_extension")}
            for extension in EXTENSIONS:
                if extension not in present:
                    conn.execute(f"CREATE EXTENSION {extension}")
    with _connect(cluster.coordinator, dbname) as conn:
        conn.execute(
            "SELECT citus_set_coordinator_host(%s, %s)", [cluster.coordinator.host, cluster.coordinator.port]
        )
        registered = {
            (row[0], row[1])
            for row in conn.execute("SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0")
        }
        for worker in cluster.workers:
            if (worker.host, worker.port) not in registered:
                conn.execute("SELECT citus_add_node(%s, %s)", [worker.host, worker.port])


def database_drop_on_workers(cluster: Cluster, *, dbname: str) -> None:
    """Drop a worker's copy of a database the coordinator no longer has (a test database being recreated)."""
    for node in cluster.workers:
        with _connect(node, "postgres") as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def citus_installed(connection: object) -> bool:
    """Whether the database behind a Django connection (or a schema editor's) has the citus extension."""
    with connection.cursor() as cursor:  # type: ignore[attr-defined]
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'")
        return cursor.fetchone() is not None
