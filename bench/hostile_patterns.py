"""What a bulk-forget pattern costs the database: the glob as it is matched now (a LIKE pattern, memories.
services.glob_to_like) against the regular expression it used to become (`*` → `.*`, `?` → `.`), for an
ordinary pattern and for hostile ones, over memories of the largest size memories/add accepts (8,000
characters).

    .venv/bin/python bench/hostile_patterns.py [--rows 100] [--repeat 3] [--regex-timeout-ms 20000]

It runs on the embedded PostgreSQL (a temporary table in the `postgres` database; nothing of Cairn's is
touched). It reports the median time per statement and each pattern's ratio to the ordinary pattern's time
with the same engine: with LIKE the hostile patterns stay within a small factor of the ordinary one, while
the old regular expression for 500 stars is cut off by the statement timeout. Times are wall time on a
possibly busy machine; the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

PATTERNS = {
    "ordinary: *deploy note*": "*deploy note*",
    "500 stars": "*" * 500,
    "250 x 'x*' then y": "*x" * 249 + "*y",
    "166 x '*?*'": "*?*" * 166,
}


def old_regex(pattern: str) -> str:
    """The translation bulk-forget used before (kept here only to measure against)."""
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern]
    return "^" + "".join(parts) + "$"


def timed(cursor: Any, sql: str, value: str, repeat: int) -> tuple[float | None, int | None]:
    """Median seconds of `repeat` runs and the count; (None, None) when the statement timeout cut it off."""
    import psycopg

    times, count = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            cursor.execute(sql, [value])
        except psycopg.errors.QueryCanceled:
            return None, None
        count = cursor.fetchone()[0]
        times.append(time.perf_counter() - start)
    return statistics.median(times), count


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100, help="memories of 8,000 characters in the table")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--regex-timeout-ms", type=int, default=20_000, help="statement timeout for the regex"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "hostile_patterns.json")
    args = parser.parse_args()

    import django

    django.setup()
    import psycopg

    from config import embedded_db
    from memories.services import glob_to_like

    server = embedded_db.ensure_embedded_postgres()
    with (
        psycopg.connect(
            host=server.socket_dir,
            port=server.port,
            user=embedded_db.SUPERUSER,
            dbname="postgres",
            autocommit=True,
        ) as conn,
        conn.cursor() as cursor,
    ):
        cursor.execute("CREATE TEMP TABLE bench_memories (content text)")
        # Text that keeps every hostile pattern busy: long runs of the letter it repeats, then a deploy note.
        for n in range(args.rows):
            cursor.execute("INSERT INTO bench_memories VALUES (%s)", ["x" * 7_950 + f" deploy note {n}"])
        cursor.execute(f"SET statement_timeout = {args.regex_timeout_ms}")
        results: dict[str, Any] = {"rows": args.rows, "contentChars": 7_950 + 14, "patterns": {}}
        base: dict[str, float | None] = {}
        for label, pattern in PATTERNS.items():
            like_s, like_n = timed(
                cursor,
                "SELECT count(*) FROM bench_memories WHERE content LIKE %s",
                glob_to_like(pattern),
                args.repeat,
            )
            regex_s, regex_n = timed(
                cursor,
                "SELECT count(*) FROM bench_memories WHERE content ~ %s",
                old_regex(pattern),
                args.repeat,
            )
            if not base:
                base = {"like": like_s, "regex": regex_s}
            row = {
                "likeSeconds": like_s,
                "likeMatches": like_n,
                "likeRatio": like_s / base["like"] if like_s and base["like"] else None,
                "regexSeconds": regex_s,
                "regexMatches": regex_n,
                "regexRatio": regex_s / base["regex"] if regex_s and base["regex"] else None,
            }
            results["patterns"][label] = row
            regex_text = (
                f"{regex_s * 1000:9.2f} ms ({row['regexRatio']:.1f}x)"
                if regex_s is not None
                else f"cut off at {args.regex_timeout_ms} ms"
            )
            like_text = f"{(like_s or 0) * 1000:8.2f} ms ({row['likeRatio']:.1f}x)"
            print(f"{label:22} LIKE {like_text}   old regex {regex_text}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
