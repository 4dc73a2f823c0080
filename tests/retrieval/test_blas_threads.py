"""numpy's BLAS runs on BLAS_THREADS threads in every process that loads the apps: ranking multiplies
small arrays, where a thread per core only spins between calls (it nearly tripled a context/get's CPU)."""

from __future__ import annotations

from django.conf import settings
from threadpoolctl import threadpool_info


def test_it_runs_numpys_blas_on_the_configured_threads():
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas, "numpy's BLAS library is loaded"
    assert {pool["num_threads"] for pool in blas} == {settings.BLAS_THREADS}
