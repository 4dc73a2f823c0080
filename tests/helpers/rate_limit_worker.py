"""Run in a separate process by tests/test_ratelimit.py: hit one rate-limit bucket N times, print how
many were allowed."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from tenancy.ratelimit import rate_limit_hit  # noqa: E402


def main() -> None:
    bucket, hits, limit, start_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    # Both processes begin at the same instant so their increments interleave.
    time.sleep(max(0.0, start_at - time.time()))
    allowed = sum(
        rate_limit_hit(bucket=bucket, limit=limit, window_seconds=3600).allowed for _ in range(hits)
    )
    print(allowed)


if __name__ == "__main__":
    main()
