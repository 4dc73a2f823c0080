"""Rollout tests: a clean per-process rollout cache for every test and a movable clock (alice's workspace,
`ws`, comes from tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from rollout import services


@pytest.fixture(autouse=True)
def clean_rollout_cache() -> Iterator[None]:
    services.rollout_cache_clear()
    yield
    services.rollout_cache_clear()


class Clock:
    """rollout.services._now, moved by hand: policy windows are crossed without waiting an hour."""

    def __init__(self) -> None:
        self.now = timezone.now()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(services, "_now", clock)
    return clock
