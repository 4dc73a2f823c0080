"""A web process's garbage-collector settings (config.gc_tuning), applied by config.wsgi."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.gc_tuning import web_gc_tune

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def restored_gc():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_it_freezes_what_is_loaded_and_collects_the_young_less_often(settings, restored_gc):
    settings.WEB_GC_GEN0_THRESHOLD = 12_345
    _, second, third = gc.get_threshold()
    web_gc_tune()
    assert gc.get_threshold() == (12_345, second, third)
    assert gc.get_freeze_count() > 10_000  # Django and the project's modules


def test_it_leaves_pythons_defaults_when_turned_off(settings, restored_gc):
    settings.WEB_GC_GEN0_THRESHOLD = 0
    before = gc.get_threshold()
    web_gc_tune()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
    )


def test_it_tunes_a_process_that_loads_the_wsgi_application():
    done = _python(
        "import gc, config.wsgi; print(gc.get_threshold()[0], gc.get_freeze_count() > 0)",
        WEB_GC_GEN0_THRESHOLD="20000",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["20000", "True"]


def test_it_rejects_a_threshold_out_of_range():
    for value in ("-1", "1000001", "many"):
        done = _python("import django; django.setup()", WEB_GC_GEN0_THRESHOLD=value)
        assert done.returncode != 0 and "WEB_GC_GEN0_THRESHOLD must be" in done.stderr, value
