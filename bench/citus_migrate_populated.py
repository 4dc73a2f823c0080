"""A populated database distributed by the migrations on the local Citus cluster, without losing a row.

A scratch database is made on every node, migrated to before the workspace keys (plain tables on the
coordinator), filled as tests/citus/test_migration.py fills it, then migrated to the latest state, which
distributes it; the rows are counted per workspace before and after, and where the shards are is shown.

    .venv/bin/python bench/citus_migrate_populated.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCRATCH = "cairn_migrate_check"


def main() -> None:
    env_lines = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "citus_cluster.py"), "env"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for line in env_lines:
        name, value = line.split("=", 1)
        os.environ[name] = value
    os.environ.update(
        {"DEBUG": "1", "CAIRN_DATABASE_NAME": SCRATCH, "DJANGO_SETTINGS_MODULE": "config.settings"}
    )
    from config import citus
    from config.embedded_db import OWNER_ROLE

    cluster = citus.cluster_load()
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "citus_cluster.py"), "drop-database", SCRATCH], check=True
    )
    citus.database_prepare(cluster, dbname=SCRATCH, owner=OWNER_ROLE)
    import django

    django.setup()
    from django.db import connections

    from tests.citus import test_migration as t

    t._migrate([("contenttypes", "0002_remove_content_type_name"),
                ("auth", "0012_alter_user_first_name_max_length"),
                ("tenancy", "0003_key_scope_pin_invitations"), *t.BEFORE])  # fmt: skip
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO workspaces (kind, name, slug, created_at) "
            "SELECT 'org', 'check ' || g, 'check' || g, now() "
            "FROM generate_series(1, 3) g RETURNING id"
        )
        workspaces = [row[0] for row in cursor.fetchall()]
    for ws in workspaces:
        t._populate(ws)
    before = t._counts(workspaces)
    t._migrate(t._latest())
    after = t._counts(workspaces)
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT count(*) FILTER (WHERE partmethod = 'h'), "
                       "count(*) FILTER (WHERE repmodel = 't') "
                       "FROM pg_dist_partition")  # fmt: skip
        distributed, reference = cursor.fetchone()
    connections.close_all()
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "citus_cluster.py"), "drop-database", SCRATCH], check=True
    )
    print(json.dumps({
        "rows_before": sum(before.values()), "rows_after": sum(after.values()),
        "lost": sum(before.values()) - sum(after.values()), "same_per_workspace_and_table": before == after,
        "distributed_tables": distributed, "reference_tables": reference,
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
