"""Per-key request budget, atomic across every web process: one counter row per key and window in Postgres.

A fixed window counted with a single INSERT … ON CONFLICT DO UPDATE … RETURNING is exact under concurrency
(the row lock serialises increments), needs no shared cache, and costs one round trip on an unlogged table.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

from django.db import connections

_UPSERT = """
INSERT INTO rate_limit_counters (bucket, window_start, hits) VALUES (%s, %s, 1)
ON CONFLICT (bucket, window_start) DO UPDATE SET hits = rate_limit_counters.hits + 1
RETURNING hits
"""


@dataclass(frozen=True)
class RateLimitDecision:
    allowed: bool
    limit: int
    remaining: int
    retry_after_seconds: int


def rate_limit_hit(
    *, bucket: str, limit: int, window_seconds: int, now: float | None = None
) -> RateLimitDecision:
    now = time.time() if now is None else now
    window_start = int(now // window_seconds) * window_seconds
    with connections["app"].cursor() as cursor:
        cursor.execute(_UPSERT, [bucket, window_start])
        hits = cursor.fetchone()[0]
        if random.random() < 1 / 512:
            cursor.execute(
                "DELETE FROM rate_limit_counters WHERE window_start < %s", [window_start - window_seconds]
            )
    retry_after = max(1, math.ceil(window_start + window_seconds - now))
    return RateLimitDecision(
        allowed=hits <= limit, limit=limit, remaining=max(0, limit - hits), retry_after_seconds=retry_after
    )
