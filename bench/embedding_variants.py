"""Local embedding variants side by side: speed, fidelity to float32 and LoCoMo semantic recall.

Every LoCoMo turn (as `locomo.py` writes it) and every question of categories 1–4 is embedded by each variant
of all-MiniLM-L6-v2; a question's R@10 is the share of its evidence turns among the 10 turns of its
conversation nearest to it (pure cosine, no importance blend or fusion, so the absolute value sits a little
under the API's; the difference between variants is what counts). Speed is texts per CPU-second of this
process (one thread, length-sorted batches of 32), which a loaded machine distorts less than wall time. Cosine
is between a turn's vector and its float32 vector.

    .venv/bin/python bench/embedding_variants.py [--data PATH] [--variants float32,int8,int8-onnx]
                                                 [--repeat 2]

Variants are the product's own embedders (`retrieval.embeddings.get_embedder`): what is measured is what runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

VARIANTS = {
    "float32": "local/all-MiniLM-L6-v2",
    "int8": "local/all-MiniLM-L6-v2-int8",
    "int8-onnx": "local/all-MiniLM-L6-v2-int8-onnx",
}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def recall_at(
    k: int, question_vectors: np.ndarray, turn_vectors: np.ndarray, evidence: list[set[int]]
) -> list[float]:
    scores = question_vectors @ turn_vectors.T
    top = np.argsort(-scores, axis=1)[:, :k]
    return [len(wanted & set(row.tolist())) / len(wanted) for row, wanted in zip(top, evidence, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
    )
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--repeat", type=int, default=2, help="speed runs per variant; the fastest counts")
    args = parser.parse_args()

    import django

    django.setup()
    from locomo import HEADLINE, load_conversations

    from retrieval.embeddings import get_embedder

    conversations = load_conversations(args.data, None)
    texts = [turn.content for conversation in conversations for turn in conversation.turns]
    print(f"{len(conversations)} conversations, {len(texts)} turns", flush=True)

    reference: np.ndarray | None = None
    for name in args.variants.split(","):
        embedder = get_embedder(VARIANTS[name])
        embedder.embed(texts[:64])  # load and warm
        best = float("inf")
        for _ in range(args.repeat):
            started = cpu_seconds()
            vectors = embedder.embed(texts)
            best = min(best, cpu_seconds() - started)
        if reference is None:
            reference = vectors
        cosines = np.sum(vectors * reference, axis=1)
        recalls: list[float] = []
        offset = 0
        for conversation in conversations:
            turn_vectors = vectors[offset : offset + len(conversation.turns)]
            position = {turn.dia_id: index for index, turn in enumerate(conversation.turns)}
            offset += len(conversation.turns)
            questions = [question for question in conversation.questions if question.category in HEADLINE]
            question_vectors = embedder.embed([question.text for question in questions])
            evidence = [{position[dia_id] for dia_id in question.evidence} for question in questions]
            recalls.extend(recall_at(10, question_vectors, turn_vectors, evidence))
        print(
            f"{name:10s} {VARIANTS[name]:36s} {len(texts) / best:7.1f} texts/CPU-s"
            f"  cosine mean {cosines.mean():.4f}"
            f" min {cosines.min():.4f}  R@10 1-4 {np.mean(recalls):.4f} ({len(recalls)} questions)",
            flush=True,
        )


if __name__ == "__main__":
    main()
