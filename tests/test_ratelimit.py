"""The per-key budget is exact when several processes spend it at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connections

from tenancy.ratelimit import rate_limit_hit

HELPER = Path(__file__).parent / "helpers" / "rate_limit_worker.py"


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_is_exact_across_two_processes():
    bucket = f"test-{uuid.uuid4().hex}"
    env = {**os.environ, "CAIRN_DATABASE_NAME": connections["default"].settings_dict["NAME"]}
    start_at = str(time.time() + 3)
    processes = [
        subprocess.Popen(
            [sys.executable, str(HELPER), bucket, "100", "120", start_at],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    allowed = [int(process.communicate(timeout=60)[0].strip()) for process in processes]
    assert sum(allowed) == 120
    assert all(count > 0 for count in allowed), "both processes should have spent part of the budget"


def test_it_opens_a_new_window_when_the_old_one_ends():
    first = rate_limit_hit(bucket="window-test", limit=1, window_seconds=60, now=1_000_000.0)
    blocked = rate_limit_hit(bucket="window-test", limit=1, window_seconds=60, now=1_000_010.0)
    next_window = rate_limit_hit(bucket="window-test", limit=1, window_seconds=60, now=1_000_020.0)
    assert first.allowed and not blocked.allowed and next_window.allowed
    assert blocked.retry_after_seconds == 10
