"""Coalesced broker messages under concurrency, with real sessions on the real database: an add that rides on
a queued job (no message of its own) is never missed by a claim that runs while it is still uncommitted, and
an add never waits for a claim."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connections
from django_q.models import OrmQ

from memories.models import PipelineJob
from memories.selectors import MemoryScope
from pipeline import jobs
from pipeline import services as pipeline
from tenancy.rls import workspace_context
from tests.memories.helpers import personal_workspace_id

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def in_thread(target: Callable[[], object], results: list[object]) -> threading.Thread:
    def run() -> None:
        try:
            results.append(target())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            results.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def message_count() -> int:
    return OrmQ.objects.using("app").count()


def waiting_on_advisory_lock() -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        return cursor.fetchone()[0] > 0


def embed_status(workspace_id: int, content: str) -> str:
    with workspace_context(workspace_id):
        return PipelineJob.objects.get(memory__content=content, kind=jobs.Kind.EMBED).status


def test_it_makes_a_claim_wait_for_an_add_that_rides_on_its_batch(personas, local_embedder):
    ws = personal_workspace_id(personas.alice)
    with workspace_context(ws):
        pipeline.memory_add_flow(workspace_id=ws, scope=MemoryScope(), content="first, with the message")
    assert message_count() == 1
    wrote, commit = threading.Event(), threading.Event()
    seen: list[int] = []

    def add_and_hold() -> None:
        with workspace_context(ws):
            pipeline.memory_add_flow(
                workspace_id=ws, scope=MemoryScope(), content="second, riding on the first"
            )
            seen.append(message_count())  # in its own transaction: no message of its own
            wrote.set()
            assert commit.wait(timeout=30)

    writer_results: list[object] = []
    writer = in_thread(add_and_hold, writer_results)
    assert wrote.wait(timeout=30)
    assert seen == [1]

    # The worker takes the first add's message while the second add is still open: its claim must wait, or it
    # would claim only the first job and the second would have no message left.
    claim_results: list[object] = []
    claimer = in_thread(lambda: pipeline.job_run(workspace_id=ws, kind=jobs.Kind.EMBED), claim_results)
    claimer.join(timeout=1.5)
    assert claimer.is_alive() and waiting_on_advisory_lock()
    commit.set()
    writer.join(timeout=30)
    claimer.join(timeout=60)
    assert writer_results == [None]
    assert claim_results == [2]
    assert embed_status(ws, "second, riding on the first") == "succeeded"


def test_it_lets_an_add_bring_its_own_message_while_a_claim_runs(personas, local_embedder):
    ws = personal_workspace_id(personas.alice)
    with workspace_context(ws):
        pipeline.memory_add_flow(workspace_id=ws, scope=MemoryScope(), content="queued before the claim")
    OrmQ.objects.using("app").all().delete()  # the worker has dequeued it
    claimed, release = threading.Event(), threading.Event()

    def claim_and_hold() -> int:
        with workspace_context(ws):
            jobs.jobs_claim_lock(workspace_id=ws, kind=jobs.Kind.EMBED)
            taken = jobs.jobs_claim(workspace_id=ws, kind=jobs.Kind.EMBED, batch_size=64)
            claimed.set()
            assert release.wait(timeout=30)
        return len(taken)

    claim_results: list[object] = []
    claimer = in_thread(claim_and_hold, claim_results)
    assert claimed.wait(timeout=30)
    # The claim holds its lock: the add must not wait for it, and cannot ride on the claimed job either.
    add_results: list[object] = []
    adder = in_thread(lambda: _add(ws, "written during the claim"), add_results)
    adder.join(timeout=10)
    assert not adder.is_alive() and add_results == [None]
    assert message_count() == 1
    release.set()
    claimer.join(timeout=30)
    assert claim_results == [1]
    # Its own message (the one left in the queue) runs it.
    assert pipeline.job_run(workspace_id=ws, kind=jobs.Kind.EMBED) == 1
    assert embed_status(ws, "written during the claim") == "succeeded"


def _add(ws: int, content: str) -> None:
    with workspace_context(ws):
        pipeline.memory_add_flow(workspace_id=ws, scope=MemoryScope(), content=content)


def test_it_gives_up_a_claim_behind_a_long_open_add_and_runs_it_later(personas, local_embedder, monkeypatch):
    # A write that keeps its transaction open must not pin a worker until django-q2 kills it: the claim's wait
    # is bounded, the task fails, and the re-delivered message (here: the same call, later) claims both jobs.
    from django.db.utils import OperationalError

    monkeypatch.setattr(jobs, "claim_lock_timeout_ms", lambda: 300)
    ws = personal_workspace_id(personas.alice)
    _add(ws, "first, with the message")
    wrote, commit = threading.Event(), threading.Event()

    def add_and_hold() -> None:
        with workspace_context(ws):
            pipeline.memory_add_flow(workspace_id=ws, scope=MemoryScope(), content="second, held open")
            wrote.set()
            assert commit.wait(timeout=30)

    writer_results: list[object] = []
    writer = in_thread(add_and_hold, writer_results)
    assert wrote.wait(timeout=30)
    with pytest.raises(OperationalError):
        pipeline.job_run(workspace_id=ws, kind=jobs.Kind.EMBED)
    assert embed_status(ws, "first, with the message") == "queued"
    commit.set()
    writer.join(timeout=30)
    assert writer_results == [None]
    assert pipeline.job_run(workspace_id=ws, kind=jobs.Kind.EMBED) == 2
