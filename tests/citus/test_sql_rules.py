"""Rules every SQL statement of the code base keeps so that the one schema also runs on Citus, checked on the
source (they hold on a single node too, where nothing would fail if they were broken)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
APPS = ["config", "ops", "tenancy", "memories", "graphsvc", "rollout", "retrieval", "pipeline", "transfer",
        "mcp_server", "dashboard"]  # fmt: skip

# From DO UPDATE to the end of its SET list (RETURNING, WHERE, the end of the string or of the statement).
_DO_UPDATE = re.compile(r"DO\s+UPDATE\s+SET(?P<set>[^;\"]*?)(?:RETURNING|WHERE|\"|;|$)", re.I | re.S)
_MUTABLE = re.compile(
    r"\b(now|clock_timestamp|statement_timestamp|random|gen_random_uuid|nextval)\s*\(", re.I
)


def _sources() -> list[Path]:
    # Old migrations keep the SQL they ran; what runs now is in the apps and in the latest function
    # definitions.
    return [path for app in APPS for path in (ROOT / app).rglob("*.py") if "migrations" not in path.parts]


def test_it_has_no_mutable_function_in_an_upserts_update() -> None:
    """Citus refuses now() and other non-immutable functions in ON CONFLICT ... DO UPDATE on a distributed
    table (each shard would compute its own value); EXCLUDED.<column> carries the value the INSERT
    computed."""
    offenders = []
    for path in _sources():
        text = path.read_text()
        for match in _DO_UPDATE.finditer(text):
            if _MUTABLE.search(match.group("set")):
                line = text.count("\n", 0, match.start()) + 1
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == [], f"mutable function in DO UPDATE SET: {offenders}"


def test_it_finds_a_mutable_function_where_there_is_one() -> None:
    bad = "INSERT INTO t (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET updated_at = now() RETURNING a"
    good = "INSERT INTO t (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET updated_at = EXCLUDED.updated_at"
    assert _MUTABLE.search(_DO_UPDATE.search(bad).group("set"))  # type: ignore[union-attr]
    assert not _MUTABLE.search(_DO_UPDATE.search(good).group("set"))  # type: ignore[union-attr]
