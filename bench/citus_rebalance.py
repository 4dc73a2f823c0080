"""Scale out while writing: add a worker to the local Citus cluster and rebalance the shards while writers
keep committing memories, then check that every acknowledged write is there; then move the largest tenant
to a shard of its own.

Needs the cluster with the app database migrated (`make citus`, then `manage.py migrate` against it, or a
`make test-citus` run). The writers connect as the runtime role and write as the app does (SET LOCAL
app.workspace_id, row-level security on every shard). The added worker is drained and removed again at the end
unless --keep, so the cluster goes back to two workers.

    .venv/bin/python bench/citus_rebalance.py [--writers 4] [--workspaces 20] [--rate 50] [--keep]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from config import citus  # noqa: E402
from config.embedded_db import APP_ROLE, DATABASE_NAME  # noqa: E402

CLUSTER_FILE = ROOT / "var" / "citus" / "cluster.json"


def superuser() -> psycopg.Connection[Any]:
    node = citus.cluster_load(CLUSTER_FILE).coordinator
    return psycopg.connect(
        host=node.host, port=node.port, user=citus.SUPERUSER, dbname=DATABASE_NAME, autocommit=True
    )


class Writers:
    def __init__(self, workspaces: list[int], count: int, *, pause: float) -> None:
        self.pause = pause
        self.workspaces = workspaces
        self.count = count
        self.acknowledged: list[tuple[int, uuid.UUID]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(count)]

    def run(self, index: int) -> None:
        node = citus.cluster_load(CLUSTER_FILE).coordinator
        conn = psycopg.connect(host=node.host, port=node.port, user=APP_ROLE, dbname=DATABASE_NAME)
        n = 0
        while not self.stop.is_set():
            workspace = self.workspaces[(index + n) % len(self.workspaces)]
            n += 1
            memory_id = uuid.uuid4()
            try:
                with conn.transaction():
                    conn.execute(f"SET LOCAL app.workspace_id = {int(workspace)}")
                    conn.execute(
                        "INSERT INTO memories (id, workspace_id, content, type, layer, scope, tags, paths, "
                        "created_at, updated_at, injection_flags, importance) VALUES (%s, %s, %s, 'note', "
                        "'long_term', 'global', '{}', '{}', now(), now(), '{}', 0.5)",
                        [memory_id, workspace, f"rebalance write {index}-{n}"],
                    )
            except psycopg.Error as exc:  # not acknowledged: the writer goes on, the bench reports it
                with self.lock:
                    self.errors.append(type(exc).__name__ + ": " + str(exc).splitlines()[0])
                if conn.broken:
                    conn = psycopg.connect(
                        host=node.host, port=node.port, user=APP_ROLE, dbname=DATABASE_NAME
                    )
                continue
            with self.lock:
                self.acknowledged.append((workspace, memory_id))
            time.sleep(self.pause)
        conn.close()


def placements(conn: psycopg.Connection[Any]) -> dict[str, int]:
    rows = conn.execute(
        "SELECT nodename || ':' || nodeport, count(*) FROM pg_dist_shard_placement GROUP BY 1 ORDER BY 1"
    ).fetchall()
    return {row[0]: int(row[1]) for row in rows}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--workspaces", type=int, default=20)
    # Writes per second per writer: unthrottled writers on two shared cores out-write the logical replication
    # a shard move catches up with, and the move never gets to its short write block.
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--keep", action="store_true", help="leave the added worker in the cluster")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    with superuser() as conn:
        workspaces = [
            int(row[0])
            for row in conn.execute(
                "INSERT INTO workspaces (kind, name, slug, created_at) "
                "SELECT 'org', 'rebalance bench ' || g, 'rebalance-' || g, now() "
                "FROM generate_series(1, %s) g RETURNING id",
                [args.workspaces],
            ).fetchall()
        ]
        report["placements_before"] = placements(conn)
    writers = Writers(workspaces, args.writers, pause=1.0 / args.rate)
    for thread in writers.threads:
        thread.start()
    time.sleep(3)
    started = time.monotonic()
    added = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "citus_cluster.py"), "add-worker"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with superuser() as conn:
        conn.execute("SELECT rebalance_table_shards(shard_transfer_mode => 'force_logical')")
        report["rebalance_seconds"] = round(time.monotonic() - started, 1)
        report["placements_after"] = placements(conn)
    time.sleep(2)
    writers.stop.set()
    for thread in writers.threads:
        thread.join()
    with superuser() as conn:
        ids = [memory_id for _, memory_id in writers.acknowledged]
        found = conn.execute("SELECT count(*) FROM memories WHERE id = ANY(%s)", [ids]).fetchone()
        report["acknowledged_writes"] = len(ids)
        report["acknowledged_writes_lost"] = len(ids) - int(found[0] if found else 0)
        report["refused_writes"] = len(writers.errors)
        report["refusals"] = sorted(set(writers.errors))[:5]
        # The busiest tenant of the run gets a shard of its own (and its colocated tables with it).
        largest = max(set(workspaces), key=lambda w: sum(1 for ws, _ in writers.acknowledged if ws == w))
        conn.execute(
            "SELECT isolate_tenant_to_new_shard('memories', %s, 'CASCADE', 'force_logical')", [largest]
        )
        shard = conn.execute(
            "SELECT s.shardid, p.nodename || ':' || p.nodeport, s.shardminvalue = s.shardmaxvalue "
            "FROM pg_dist_shard s JOIN pg_dist_placement pl USING (shardid) JOIN pg_dist_node p "
            "ON p.groupid = pl.groupid WHERE s.logicalrelid = 'memories'::regclass "
            "AND get_shard_id_for_distribution_column('memories', %s) = s.shardid",
            [largest],
        ).fetchone()
        report["isolated_tenant"] = {"workspace": largest, "shard": shard[0] if shard else None,
                                     "node": shard[1] if shard else None,
                                     "single_hash_value": bool(shard[2]) if shard else None}  # fmt: skip
        conn.execute("DELETE FROM memories WHERE workspace_id = ANY(%s)", [workspaces])
        conn.execute("DELETE FROM workspaces WHERE id = ANY(%s)", [workspaces])
        if not args.keep:
            node = citus.cluster_load(CLUSTER_FILE).workers[-1]
            conn.execute("SELECT citus_drain_node(%s, %s, shard_transfer_mode => 'force_logical')",
                         [node.host, node.port])  # fmt: skip
            conn.execute("SELECT citus_remove_node(%s, %s)", [node.host, node.port])
    if not args.keep:
        layout = json.loads(CLUSTER_FILE.read_text())
        removed = layout["nodes"].pop()
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "citus_cluster.py"), "stop-node", removed["name"]],
            check=True,
        )
        CLUSTER_FILE.write_text(json.dumps(layout, indent=2) + "\n")
    report["added"] = added
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
