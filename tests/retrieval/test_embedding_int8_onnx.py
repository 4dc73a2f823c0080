"""The default local model: MiniLM quantised to int8 on ONNX Runtime — close to float32, a model of its own,
built once per machine from the packaged weights and never replaced by something else behind its name."""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings as live_settings

from memories.models import MemoryEmbedding
from pipeline import services as pipeline
from retrieval import embeddings, onnx_embedding
from retrieval.embeddings import EmbeddingUnavailable, LocalEmbedder, get_embedder
from retrieval.onnx_embedding import OnnxMiniLM, OnnxUnavailable
from tenancy.rls import workspace_context
from tests.helpers.embedding_model import model_dir
from tests.memories.helpers import personal_workspace_id

INT8_ONNX = "local/all-MiniLM-L6-v2-int8-onnx"
FLOAT32 = "local/all-MiniLM-L6-v2"

TEXTS = [
    "Use connection pooling for Postgres in the payments service",
    'Melanie said, "We went camping with the kids last weekend, the boys loved it."',
    "The cat sat on the mat",
    "Ünïcode, emoji 🙂 and 日本語",
    "a much longer memory " * 120,
]


def test_it_is_the_default_model():
    assert live_settings.EMBEDDING_MODEL == live_settings.DEFAULT_EMBEDDING_MODEL == INT8_ONNX


def test_it_embeds_close_to_float32_under_its_own_name(local_embedder):
    assert local_embedder.model == INT8_ONNX and local_embedder.dimension == 384
    quantised = local_embedder.embed(TEXTS)
    assert local_embedder.backend == "onnx"
    reference = get_embedder(FLOAT32).embed(TEXTS)
    assert quantised.shape == (len(TEXTS), 384) and quantised.dtype == np.float32
    assert np.allclose(np.linalg.norm(quantised, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(quantised * reference, axis=1)
    assert cosines.min() >= embeddings.QUANTISED_MIN_COSINE
    # Close, not equal: equal vectors would mean the quantisation did not happen.
    assert float(np.abs(quantised - reference).max()) > 1e-3
    # The caller's order, though batches are sorted by length inside.
    assert np.allclose(local_embedder.embed(TEXTS[::-1]), quantised[::-1], atol=1e-5)


def test_it_keeps_paraphrases_closer_than_unrelated_texts(local_embedder):
    pooled, paraphrase, unrelated = local_embedder.embed(
        [TEXTS[0], "Postgres connections should go through a pool in payments", TEXTS[2]]
    )
    assert float(pooled @ paraphrase) > 0.7 > float(pooled @ unrelated)


def test_it_never_falls_back_to_another_model(settings, monkeypatch):
    def unavailable(**kwargs):
        raise OnnxUnavailable("onnxruntime not installed: test")

    monkeypatch.setattr(OnnxMiniLM, "load", unavailable)
    settings.EMBEDDING_LOCAL_BACKEND = "auto"  # even where float32 may fall back to torch
    # Torch's int8 or float32 vectors would be stored under this model's name: a retryable error instead.
    with pytest.raises(EmbeddingUnavailable, match="onnxruntime"):
        LocalEmbedder(model=INT8_ONNX, dimension=384).embed(["no fallback"])


def test_it_reuses_the_quantised_graph(monkeypatch):
    built = OnnxMiniLM.ensure_exported(
        model_dir=model_dir(), cache_dir=embeddings.onnx_cache_dir(), quantised=True
    )
    assert built.name.endswith("-int8.onnx") and built.exists()

    def must_not_build(*args):
        raise AssertionError("built again")

    monkeypatch.setattr(onnx_embedding, "_export", must_not_build)
    monkeypatch.setattr(onnx_embedding, "_quantise", must_not_build)
    assert (
        OnnxMiniLM.ensure_exported(
            model_dir=model_dir(), cache_dir=embeddings.onnx_cache_dir(), quantised=True
        )
        == built
    )


def test_it_refuses_a_quantised_graph_that_drifted(tmp_path, monkeypatch):
    # Build from the cached float32 graph rather than export again: only the int8 step is under test.
    float_graph = OnnxMiniLM.ensure_exported(model_dir=model_dir(), cache_dir=embeddings.onnx_cache_dir())
    (tmp_path / float_graph.name).symlink_to(float_graph)
    monkeypatch.setattr(onnx_embedding, "QUANTISED_MIN_COSINE", 1.01)
    with pytest.raises(OnnxUnavailable, match="drifted"):
        OnnxMiniLM.ensure_exported(model_dir=model_dir(), cache_dir=tmp_path, quantised=True)
    # Nothing half-built is left to be trusted next time.
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([".export.lock", float_graph.name])


def test_it_records_the_model_on_vectors_and_keeps_charlie_out(alice_api, personas, local_embedder):
    workspace_id = personal_workspace_id(personas.alice)
    memory = alice_api.add("Alice's deploy key rotates every Monday.")
    pipeline.jobs_run_pending(workspace_id=workspace_id)
    with workspace_context(workspace_id):
        stored = list(
            MemoryEmbedding.objects.filter(workspace_id=workspace_id).values_list("memory_id", "model")
        )
    assert [(str(memory_id), model) for memory_id, model in stored] == [(memory["id"], INT8_ONNX)]

    found = alice_api.ok(
        "memories/search", {"query": "when does the deploy key rotate", "strategy": "semantic"}
    )
    assert found["trace"]["appliedStrategy"] == "semantic"
    assert [m["id"] for m in found["memories"]] == [memory["id"]]
    found = personas.charlie_api.ok("memories/search", {"query": "deploy key", "strategy": "semantic"})
    assert found["memories"] == []


def test_it_gives_a_text_the_same_vector_whatever_else_is_embedded_with_it(local_embedder):
    # Dynamic int8 scales activations per run; a job run twice must write the same vector (idempotent rows).
    alone = local_embedder.embed([TEXTS[0]])[0]
    in_company = local_embedder.embed([TEXTS[4], TEXTS[0], TEXTS[1]])[1]
    assert np.array_equal(alone, in_company)
