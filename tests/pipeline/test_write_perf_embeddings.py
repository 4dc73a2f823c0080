"""The local model on ONNX Runtime is the same model as on torch: same vectors, same name, torch kept."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval import embeddings, onnx_embedding
from retrieval.embeddings import EmbeddingUnavailable, LocalEmbedder
from retrieval.onnx_embedding import OnnxMiniLM, OnnxUnavailable
from tests.helpers.embedding_model import model_dir

TEXTS = [
    "Use connection pooling for Postgres in the payments service",
    "Postgres connections should go through a pool in payments",
    "The cat sat on the mat",
    "",
    "Ünïcode, emoji 🙂 and 日本語",
    "a much longer memory " * 120,
]


def local(settings, backend: str) -> LocalEmbedder:
    settings.EMBEDDING_LOCAL_BACKEND = backend
    return LocalEmbedder(model="local/all-MiniLM-L6-v2", dimension=384)


def test_it_gives_torchs_vectors_on_onnx(settings):
    onnx = local(settings, "onnx")
    onnx_vectors = onnx.embed(TEXTS)
    assert onnx.backend == "onnx"
    torch = local(settings, "torch")
    torch_vectors = torch.embed(TEXTS)
    assert torch.backend == "torch"
    assert onnx_vectors.shape == torch_vectors.shape == (len(TEXTS), 384)
    assert onnx_vectors.dtype == np.float32
    assert float(np.abs(onnx_vectors - torch_vectors).max()) < onnx_embedding.MAX_ABS_DIFFERENCE
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)
    # Order is the caller's even though batches are sorted by length inside.
    assert np.allclose(onnx.embed(TEXTS[::-1]), onnx_vectors[::-1], atol=1e-6)


def test_it_keeps_torch_as_default_and_the_model_name_on_either(settings):
    from django.conf import settings as live

    assert live.EMBEDDING_LOCAL_BACKEND == "torch"
    for backend, expected in (("auto", "onnx"), ("torch", "torch")):
        embedder = local(settings, backend)
        embedder.embed(["warm"])
        assert embedder.backend == expected
        assert embedder.model == "local/all-MiniLM-L6-v2" and embedder.dimension == 384


def test_it_falls_back_to_torch_when_onnx_is_unavailable(settings, monkeypatch):
    def unavailable(**kwargs):
        raise OnnxUnavailable("onnxruntime not installed: test")

    monkeypatch.setattr(OnnxMiniLM, "load", unavailable)
    embedder = local(settings, "auto")
    assert embedder.embed(["still works"]).shape == (1, 384)
    assert embedder.backend == "torch"
    # Asked for onnx explicitly, the failure is a retryable embedding error, not a silent switch.
    with pytest.raises(EmbeddingUnavailable, match="onnxruntime"):
        local(settings, "onnx").embed(["no fallback"])


def test_it_reuses_the_exported_graph(settings, monkeypatch):
    exported = OnnxMiniLM.ensure_exported(model_dir=model_dir(), cache_dir=embeddings.onnx_cache_dir())

    def must_not_export(*args):
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_embedding, "_export", must_not_export)
    assert (
        OnnxMiniLM.ensure_exported(model_dir=model_dir(), cache_dir=embeddings.onnx_cache_dir()) == exported
    )


def test_it_refuses_a_graph_that_does_not_match_torch(tmp_path, monkeypatch):
    monkeypatch.setattr(onnx_embedding, "MAX_ABS_DIFFERENCE", -1.0)  # any difference at all is too much
    with pytest.raises(OnnxUnavailable, match="differ from torch"):
        OnnxMiniLM.ensure_exported(model_dir=model_dir(), cache_dir=tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == [".export.lock"]
