"""A real django-q2 cluster (`manage.py qcluster`) runs the pipeline; killing its worker mid-job
loses nothing."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from django.db import connections
from django.test import Client

from memories.models import MemoryEmbedding, PipelineJob
from retrieval.embeddings import reset_embedders
from tenancy import services
from tenancy.rls import workspace_context
from tests.conftest import SdkClient, make_user
from tests.helpers.fake_openai import FakeProvider

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT, JOB_RETRY = 6, 8

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


@pytest.fixture
def provider(settings):
    fake = FakeProvider(dimension=8)
    base = fake.start()
    settings.EMBEDDING_MODEL = "openai/fake-embed"
    settings.EMBEDDING_API_BASE = base
    settings.EMBEDDING_API_KEY = "test-key"
    settings.EMBEDDING_DIMENSION = 8
    reset_embedders()
    yield fake
    fake.stop()
    reset_embedders()


@pytest.fixture
def cluster(provider, tmp_path):
    env = {
        **os.environ,
        "CAIRN_DATABASE_NAME": connections["default"].settings_dict["NAME"],
        "EMBEDDING_MODEL": "openai/fake-embed",
        "EMBEDDING_API_BASE": provider.server and f"http://127.0.0.1:{provider.server.server_address[1]}/v1",
        "EMBEDDING_API_KEY": "test-key",
        "EMBEDDING_DIMENSION": "8",
        "WORKER_PROCESSES": "1",
        "JOB_TIMEOUT_SECONDS": str(JOB_TIMEOUT),
        "JOB_RETRY_SECONDS": str(JOB_RETRY),
    }
    log_path = tmp_path / "qcluster.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    process.log_path = log_path  # type: ignore[attr-defined]
    yield process
    # SIGTERM to the cluster's main process, which stops its own processes (one to each of them at once hangs
    # it); then whatever is left of the group goes, so no stale worker steals a later test's messages.
    process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    log.close()


def new_api() -> tuple[SdkClient, int]:
    user = make_user("worker-test")
    return SdkClient(Client(), services.api_key_create(user=user).raw_key), user.personal_workspace.id


def wait_for_job(workspace_id: int, memory_id: str, kind: str, *, timeout: float) -> PipelineJob:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with workspace_context(workspace_id):
            job = PipelineJob.objects.filter(memory_id=memory_id, kind=kind).first()
        if job is not None and job.status in {"succeeded", "dead_letter"}:
            return job
        time.sleep(0.2)
    raise AssertionError(
        f"{kind} job of {memory_id} did not finish in {timeout}s (last: {job and job.status})"
    )


def test_it_runs_jobs_in_a_real_cluster(cluster, provider):
    api, workspace_id = new_api()
    memory = api.add("the cluster should embed this")
    job = wait_for_job(workspace_id, memory["id"], "similarity", timeout=60)
    assert job.status == "succeeded"
    with workspace_context(workspace_id):
        stored = MemoryEmbedding.objects.get(memory_id=memory["id"])
    assert (stored.model, stored.dimension) == ("openai/fake-embed", 8)
    # The cluster beats for /readyz from its main process, and only once the apps are loaded: a beat
    # during app initialisation makes Django warn on stderr, and a beat during django-q2's fork used to
    # hang the sentinel.
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM ops_worker_heartbeats WHERE worker LIKE %s", [f"%:{cluster.pid}"]
        )
        assert cursor.fetchone()[0] == 1
    assert "during app initialization" not in cluster.log_path.read_text()


def test_it_survives_kill_9_of_the_worker_mid_job(cluster, provider):
    release = threading.Event()

    def hold_first_request(path: str, body: dict) -> None:
        if len(provider.requests) == 1:
            release.wait(timeout=60)  # the worker is killed while this request hangs
        return None

    provider.before_answer = hold_first_request
    api, workspace_id = new_api()
    memory = api.add("a job that loses its worker")
    assert provider.first_request.wait(timeout=60), "the worker never called the embedding provider"

    victims = [
        child
        for child in psutil.Process(cluster.pid).children(recursive=True)
        if any(
            conn.raddr and conn.raddr[1] == provider.server.server_address[1] for conn in _connections(child)
        )
    ]
    assert victims, "no worker process is talking to the provider"
    for victim in victims:
        victim.kill()  # SIGKILL: no cleanup, no acknowledgement
    release.set()

    job = wait_for_job(workspace_id, memory["id"], "embed", timeout=JOB_RETRY + JOB_TIMEOUT + 40)
    assert job.status == "succeeded"
    # The killed attempt counts; a slow machine may need one more before the 6 s task timeout.
    assert 2 <= job.attempts <= 3
    wait_for_job(workspace_id, memory["id"], "similarity", timeout=30)
    with workspace_context(workspace_id):
        assert MemoryEmbedding.objects.filter(memory_id=memory["id"]).count() == 1


def _connections(process: psutil.Process) -> list:
    try:
        return process.net_connections(kind="tcp")
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
