"""kill -9 of real qcluster workers, repeatedly, while they embed, link similar memories and call the LLM:
every job still ends succeeded or dead_letter, no edge is duplicated, no memory is lost. The cluster's
heartbeat makes /readyz ready while it runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from django.db import connections
from django.test import Client

from memories.models import Memory, PipelineJob
from retrieval.embeddings import reset_embedders
from tenancy import services
from tenancy.rls import workspace_context
from tests.conftest import SdkClient, make_user
from tests.helpers.fake_openai import FakeProvider

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT, JOB_RETRY = 5, 6
MEMORIES, KILL_ROUNDS = 6, 4
CHAT_ANSWER = (
    '{"entities": [{"name": "Ada", "type": "person"}, {"name": "Postgres", "type": "tool"}], '
    '"facts": [], "edges": [], "relationship": "unrelated", "confidence": 0.9, "explanation": "-", '
    '"evidence": ""}'
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


@pytest.fixture
def provider():
    fake = FakeProvider(dimension=8)

    def slow(path: str, body: dict) -> None:
        time.sleep(0.4)  # long enough that a kill lands in the middle of a call

    fake.before_answer = slow
    fake.chat_answer = lambda body: CHAT_ANSWER
    fake.start()
    reset_embedders()
    yield fake
    fake.stop()
    reset_embedders()


@pytest.fixture
def cluster(provider, tmp_path, settings):
    url = f"http://127.0.0.1:{provider.server.server_address[1]}/v1"
    settings.EMBEDDING_MODEL, settings.EMBEDDING_API_BASE, settings.EMBEDDING_DIMENSION = (
        "openai/fake-embed",
        url,
        8,
    )
    settings.EMBEDDING_API_KEY = "test-key"
    settings.GRAPH_LLM_MODEL, settings.GRAPH_LLM_API_BASE, settings.GRAPH_LLM_API_KEY = (
        "openai/fake-chat",
        url,
        "k",
    )
    env = {
        **os.environ,
        "CAIRN_DATABASE_NAME": connections["default"].settings_dict["NAME"],
        "EMBEDDING_MODEL": "openai/fake-embed",
        "EMBEDDING_API_BASE": url,
        "EMBEDDING_API_KEY": "test-key",
        "EMBEDDING_DIMENSION": "8",
        "GRAPH_LLM_MODEL": "openai/fake-chat",
        "GRAPH_LLM_API_BASE": url,
        "GRAPH_LLM_API_KEY": "test-key",
        "GRAPH_LLM_MAX_RETRIES": "0",
        "WORKER_PROCESSES": "2",
        "JOB_TIMEOUT_SECONDS": str(JOB_TIMEOUT),
        "JOB_RETRY_SECONDS": str(JOB_RETRY),
        "OPS_HEARTBEAT_SECONDS": "1",
    }
    log = (tmp_path / "qcluster.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
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


def busy_workers(cluster: subprocess.Popen, port: int) -> list[psutil.Process]:
    busy = []
    for child in psutil.Process(cluster.pid).children(recursive=True):
        try:
            if any(conn.raddr and conn.raddr[1] == port for conn in child.net_connections(kind="tcp")):
                busy.append(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return busy


def jobs_of(workspace_id: int) -> list[tuple[str, str]]:
    with workspace_context(workspace_id):
        return list(PipelineJob.objects.filter(workspace_id=workspace_id).values_list("kind", "status"))


def test_it_survives_repeated_kill_9_of_workers_mid_job(cluster, provider, settings):
    settings.OPS_READYZ_REQUIRE_WORKER = True
    user = make_user("kill-target")
    api = SdkClient(Client(), services.api_key_create(user=user).raw_key)
    workspace_id = user.personal_workspace.id
    ids = [api.add(f"Ada keeps the billing ledger in Postgres, note {n}")["id"] for n in range(MEMORIES)]

    port, killed, rounds = provider.server.server_address[1], 0, 0
    deadline = time.monotonic() + 60
    while rounds < KILL_ROUNDS and time.monotonic() < deadline:
        victims = busy_workers(cluster, port)
        if victims:
            for victim in victims:
                victim.kill()  # SIGKILL mid-call: no cleanup, no acknowledgement
            killed += len(victims)
            rounds += 1
            time.sleep(1.5)  # let the sentinel start replacements and pick up the next message
        time.sleep(0.1)
    assert killed >= 1, "never caught a worker mid-job"

    finished = {"succeeded", "dead_letter"}
    deadline = time.monotonic() + 8 * (JOB_RETRY + JOB_TIMEOUT) + 60
    while time.monotonic() < deadline:
        states = jobs_of(workspace_id)
        if states and all(status in finished for _, status in states):
            break
        time.sleep(0.5)
    states = jobs_of(workspace_id)
    assert states and all(status in finished for _, status in states), states
    assert {kind for kind, _ in states} >= {"embed", "similarity", "extract"}

    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        assert Memory.objects.filter(workspace_id=workspace_id, deleted_at__isnull=True).count() == len(ids)
        cursor.execute(
            "SELECT from_node_id, to_node_id, edge_type, count(*) FROM graph_edges WHERE workspace_id = %s "
            "AND expired_at IS NULL GROUP BY 1, 2, 3, evidence_memory_id HAVING count(*) > 1",
            [workspace_id],
        )
        assert cursor.fetchall() == []
        cursor.execute(
            "SELECT count(*) FROM memory_embeddings WHERE workspace_id = %s GROUP BY memory_id "
            "HAVING count(*) > 1",
            [workspace_id],
        )
        assert cursor.fetchall() == []

    ready = Client().get("/readyz")  # the replacement workers' cluster kept beating
    assert ready.status_code == 200, ready.json()
