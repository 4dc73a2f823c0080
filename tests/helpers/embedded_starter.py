"""Run in separate processes by tests/test_embedded_db.py: attach to (or start) the embedded server and
report it."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from config.embedded_db import APP_ROLE, DATABASE_NAME, ensure_embedded_postgres  # noqa: E402


def main() -> None:
    start_at, release_file = float(sys.argv[1]), sys.argv[2]
    time.sleep(max(0.0, start_at - time.time()))
    server = ensure_embedded_postgres()
    import psycopg

    with psycopg.connect(
        host=server.socket_dir, port=server.port, user=APP_ROLE, dbname=DATABASE_NAME
    ) as conn:
        pid = conn.execute("SELECT pg_postmaster_start_time()::text").fetchone()[0]
    print(json.dumps({"socket": server.socket_dir, "port": server.port, "started": pid}), flush=True)
    # Stay attached until the test has heard from every process, so their lifetimes overlap.
    deadline = time.time() + 60
    while not os.path.exists(release_file) and time.time() < deadline:
        time.sleep(0.05)


if __name__ == "__main__":
    main()
