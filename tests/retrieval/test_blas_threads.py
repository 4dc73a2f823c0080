"""numpy's BLAS runs on BLAS_THREADS threads in every process that loads the apps: ranking multiplies
small arrays, where a thread per core only spins between calls (it nearly tripled a context/get's CPU)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from threadpoolctl import threadpool_info


def test_it_runs_numpys_blas_on_the_configured_threads():
    numpy_blas = [
        pool
        for pool in threadpool_info()
        if pool["user_api"] == "blas" and "numpy" in Path(pool["filepath"]).parent.name
    ]
    assert numpy_blas, threadpool_info()
    assert {pool["num_threads"] for pool in numpy_blas} == {settings.BLAS_THREADS}, numpy_blas
