"""The int8 local model: close to float32 MiniLM, but a model of its own, recorded on vectors, never mixed."""

from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from memories.models import MemoryEmbedding
from pipeline import services as pipeline
from retrieval import embeddings
from retrieval.embeddings import EmbeddingUnavailable, LocalEmbedder, get_embedder
from tenancy.rls import workspace_context
from tests.memories.helpers import personal_workspace_id

INT8 = "local/all-MiniLM-L6-v2-int8"
FLOAT32 = "local/all-MiniLM-L6-v2"

TEXTS = [
    "Use connection pooling for Postgres in the payments service",
    'Melanie said, "We went camping with the kids last weekend, the boys loved it."',
    "The cat sat on the mat",
    "",
    "Ünïcode, emoji 🙂 and 日本語",
    "a much longer memory " * 120,
]


@pytest.fixture(scope="session")
def int8_embedder() -> LocalEmbedder:
    embedder = get_embedder(INT8)
    embedder.warm()
    return embedder


def test_it_embeds_close_to_float32_under_its_own_name(int8_embedder):
    quantised = int8_embedder.embed(TEXTS)
    reference = get_embedder(FLOAT32).embed(TEXTS)
    assert int8_embedder.model == INT8 and int8_embedder.dimension == 384
    assert int8_embedder.backend == "torch"
    assert quantised.shape == (len(TEXTS), 384) and quantised.dtype == np.float32
    assert np.allclose(np.linalg.norm(quantised, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(quantised * reference, axis=1)
    # Close, not equal: equal vectors would mean the quantisation did not happen. The empty text (two special
    # tokens, no words) drifts most (0.93); memories are never empty.
    assert all(c >= embeddings.QUANTISED_MIN_COSINE for c, text in zip(cosines, TEXTS, strict=True) if text)
    assert cosines.min() >= 0.9
    assert float(np.abs(quantised - reference).max()) > 1e-3
    # Order is the caller's even though batches are sorted by length inside.
    assert np.allclose(int8_embedder.embed(TEXTS[::-1]), quantised[::-1], atol=1e-5)


def test_it_runs_int8_on_torch_even_when_onnx_is_asked_for(settings):
    settings.EMBEDDING_LOCAL_BACKEND = "onnx"
    embedder = LocalEmbedder(model=INT8, dimension=384)
    assert embedder.embed(["still int8"]).shape == (1, 384)
    assert embedder.backend == "torch"


def test_it_refuses_an_int8_model_that_drifted_from_float32(settings, monkeypatch):
    monkeypatch.setattr(embeddings, "QUANTISED_MIN_COSINE", 1.01)
    with pytest.raises(EmbeddingUnavailable, match="drifted"):
        LocalEmbedder(model=INT8, dimension=384).embed(["x"])


def test_it_records_the_int8_model_on_vectors_and_never_mixes_it_with_float32(
    alice_api, personas, settings, local_embedder, int8_embedder
):
    workspace_id = personal_workspace_id(personas.alice)
    settings.EMBEDDING_MODEL = FLOAT32
    old = alice_api.add("Our production database is PostgreSQL 16.")
    pipeline.jobs_run_pending(workspace_id=workspace_id)

    settings.EMBEDDING_MODEL = INT8
    # Only float32 vectors exist: the int8 query vector is not compared with them.
    found = alice_api.ok("memories/search", {"query": "database", "strategy": "semantic"})
    assert found["trace"]["fallbackReason"] == "vectors_unavailable"

    new = alice_api.add("The analytics database runs on PostgreSQL too.")
    pipeline.jobs_run_pending(workspace_id=workspace_id)
    with workspace_context(workspace_id):
        models = dict(MemoryEmbedding.objects.values_list("memory_id", "model"))
    assert {str(k): v for k, v in models.items()} == {old["id"]: FLOAT32, new["id"]: INT8}

    found = alice_api.ok("memories/search", {"query": "database", "strategy": "semantic"})
    assert found["trace"]["appliedStrategy"] == "semantic"
    assert [m["id"] for m in found["memories"]] == [new["id"]]

    # The re-embed command migrates the older memory to the int8 model; then both are found.
    call_command("reembed", "--workspace", str(workspace_id), stdout=StringIO(), stderr=StringIO())
    found = alice_api.ok("memories/search", {"query": "database", "strategy": "semantic"})
    assert {m["id"] for m in found["memories"]} == {old["id"], new["id"]}

    settings.EMBEDDING_MODEL = FLOAT32
    found = alice_api.ok("memories/search", {"query": "database", "strategy": "semantic"})
    # Back on float32: only the float32 vector of the old memory answers; the new one has int8 only.
    assert [m["id"] for m in found["memories"]] == [old["id"]]


def test_it_keeps_charlie_out_of_alices_int8_vectors(alice_api, personas, settings, int8_embedder):
    settings.EMBEDDING_MODEL = INT8
    alice_api.add("Alice's deploy key rotates every Monday.")
    pipeline.jobs_run_pending(workspace_id=personal_workspace_id(personas.alice))
    found = personas.charlie_api.ok("memories/search", {"query": "deploy key", "strategy": "semantic"})
    assert found["memories"] == []


def test_it_gives_a_text_the_same_vector_whatever_else_is_embedded_with_it(int8_embedder):
    alone = int8_embedder.embed([TEXTS[0]])[0]
    assert np.array_equal(alone, int8_embedder.embed([TEXTS[5], TEXTS[0], TEXTS[1]])[1])
