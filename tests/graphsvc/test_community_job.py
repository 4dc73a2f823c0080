"""graph/communities with refresh: a background job (202 and a jobId) that a worker runs: detection, then the
summaries, its phase and done/total visible through jobs/status while it runs; admins only; another tenant
never sees it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections
from django.test import Client

from pipeline import tasks
from tests.conftest import SdkClient
from tests.graphsvc.test_communities import two_clusters
from tests.memories.helpers import ACME_SCOPE

SUMMARY = "A small team that works together. They share one service."


# The job's progress is written on a connection of its own and read back over HTTP from the fake model's
# thread while the job waits for an answer: both need committed rows.
@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_refreshes_communities_in_a_job_whose_progress_shows_while_it_runs(alice_ws, personas, fake_llm):
    api = personas.alice_api
    two_clusters(alice_ws)
    seen: list[dict[str, Any]] = []
    job_id = ""

    def answer(user: str) -> dict[str, str]:
        # The worker is waiting for this answer: what does jobs/status say meanwhile?
        try:
            seen.append(SdkClient(Client(), api.key).ok("jobs/status", {"id": job_id}))
        finally:
            connections.close_all()
        return {"summary": SUMMARY}

    fake_llm.answers["community_summary"] = answer
    response = api.post("graph/communities", {"refresh": True})
    assert response.status_code == 202, response.content
    accepted = response.json()["data"]
    job_id = accepted["jobId"]
    assert accepted["job"]["status"] == "queued" and accepted["job"]["kind"] == "graph_communities_refresh"
    # Nothing ran in the request, and asking again while it is queued gives the same job.
    assert api.ok("graph/communities", {})["communities"] == [] and fake_llm.calls == []
    again = api.post("graph/communities", {"refresh": True})
    assert again.status_code == 202 and again.json()["data"]["jobId"] == job_id

    assert tasks.background_job_run(alice_ws, job_id) == "succeeded"
    assert len(fake_llm.calls_for("community_summary")) == 2
    assert seen and seen[0]["status"] == "running"
    assert (seen[0]["phase"], seen[0]["done"], seen[0]["total"]) == ("summarize", 0, 2)

    done = api.ok("jobs/status", {"id": job_id})
    assert (done["status"], done["phase"], done["done"], done["total"]) == ("succeeded", "summarize", 2, 2)
    assert done["result"]["communities"] == 2 and done["result"]["summarized"] == 2
    listed = api.ok("graph/communities", {})
    assert [c["size"] for c in listed["communities"]] == [4, 3] and listed["lastRunAt"] is not None
    assert all(c["summary"] == SUMMARY for c in listed["communities"])

    # Finished: the next refresh is a new job.
    assert api.post("graph/communities", {"refresh": True}).json()["data"]["jobId"] != job_id


def test_it_refuses_a_member_and_queues_nothing(personas):
    bob = personas.bob_api
    error = bob.error(
        "graph/communities", {"refresh": True, "scope": ACME_SCOPE}, status=403, code="FORBIDDEN_ROLE"
    )
    assert error["details"]["requiredRole"] == "admin"
    assert bob.ok("jobs/list", {"scope": ACME_SCOPE})["jobs"] == []
    # Listing stays a read.
    assert bob.ok("graph/communities", {"scope": ACME_SCOPE})["communities"] == []


def test_it_keeps_the_job_from_another_tenant(alice_ws, personas):
    alice, charlie = personas.alice_api, personas.charlie_api
    two_clusters(alice_ws)
    job_id = alice.ok("graph/communities", {"refresh": True}, status=202)["jobId"]
    charlie.error("jobs/status", {"id": job_id}, status=404, code="JOB_NOT_FOUND")
    assert charlie.ok("jobs/list", {})["jobs"] == []
    # charlie naming acme's project lands in his own workspace: his refresh is his own job.
    charlies = charlie.ok("graph/communities", {"refresh": True, "scope": ACME_SCOPE}, status=202)["jobId"]
    assert charlies != job_id
    assert [j["id"] for j in alice.ok("jobs/list", {})["jobs"]] == [job_id]
