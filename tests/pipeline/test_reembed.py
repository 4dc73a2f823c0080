"""Changing the embedding model: `reembed` fills in vectors of the new model; searches never mix models."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from memories.models import MemoryEmbedding
from pipeline import services as pipeline
from retrieval.embeddings import reset_embedders
from tenancy.rls import workspace_context
from tests.helpers.fake_openai import FakeProvider
from tests.memories.helpers import personal_workspace_id


@pytest.fixture
def provider():
    fake = FakeProvider(dimension=8)
    base = fake.start()
    yield fake, base
    fake.stop()
    reset_embedders()


def test_it_reembeds_with_a_new_model_and_never_mixes_models(
    alice_api, personas, settings, provider, local_embedder
):
    fake, base = provider
    workspace_id = personal_workspace_id(personas.alice)
    first = alice_api.add("Our production database is PostgreSQL 16.")
    second = alice_api.add("Deploys happen on Fridays.")
    pipeline.jobs_run_pending(workspace_id=workspace_id)

    settings.EMBEDDING_MODEL = "openai/fake-embed"
    settings.EMBEDDING_API_BASE = base
    settings.EMBEDDING_API_KEY = "k"
    settings.EMBEDDING_DIMENSION = 8
    reset_embedders()
    # Nothing of the new model yet: semantic search does not fall back on the old model's vectors.
    found = alice_api.ok("memories/search", {"query": "database", "strategy": "semantic"})
    assert found["trace"]["fallbackReason"] == "vectors_unavailable"

    err = StringIO()
    call_command("reembed", "--workspace", str(workspace_id), stdout=StringIO(), stderr=err)
    assert f"workspace {workspace_id}" in err.getvalue() and "2/2" in err.getvalue()
    with workspace_context(workspace_id):
        models = sorted(MemoryEmbedding.objects.values_list("model", "dimension"))
    assert models == [("local/all-MiniLM-L6-v2-int8-onnx", 384)] * 2 + [("openai/fake-embed", 8)] * 2

    found = alice_api.ok("memories/search", {"query": "database", "strategy": "semantic"})
    assert found["trace"]["appliedStrategy"] == "semantic"
    assert {m["id"] for m in found["memories"]} == {first["id"], second["id"]}

    call_command(
        "reembed",
        "--workspace",
        str(workspace_id),
        "--drop-other-models",
        stdout=StringIO(),
        stderr=StringIO(),
    )
    with workspace_context(workspace_id):
        # Nothing was missing, so nothing ran and the old vectors are still there until a run with work.
        assert MemoryEmbedding.objects.filter(model="openai/fake-embed").count() == 2


def test_it_queues_only_default_following_memories_for_make_run(alice_api, personas, settings, provider):
    # `make run` runs `reembed --enqueue --default-only`: after a change of EMBEDDING_MODEL the workers
    # re-embed what follows the default, and a memory's own embeddingModel is never overridden.
    fake, base = provider
    workspace_id = personal_workspace_id(personas.alice)
    follows = alice_api.add("Deploys happen on Fridays.")
    pinned = alice_api.add("Pinned to its own model.", embeddingModel="local/all-MiniLM-L6-v2")
    settings.EMBEDDING_MODEL = "openai/fake-embed"
    settings.EMBEDDING_API_BASE, settings.EMBEDDING_API_KEY, settings.EMBEDDING_DIMENSION = base, "k", 8
    reset_embedders()

    out = StringIO()
    call_command(
        "reembed",
        "--enqueue",
        "--default-only",
        "--workspace",
        str(workspace_id),
        stdout=out,
        stderr=StringIO(),
    )
    assert "openai/fake-embed: 1 memories queued for the workers" in out.getvalue()
    pipeline.jobs_run_pending(workspace_id=workspace_id)
    with workspace_context(workspace_id):
        models = {str(m): model for m, model in MemoryEmbedding.objects.values_list("memory_id", "model")}
    assert models == {follows["id"]: "openai/fake-embed", pinned["id"]: "local/all-MiniLM-L6-v2"}
