"""Precision and recall of the update detector (memories.updates.classify) on a labelled set of memory pairs.

    .venv/bin/python bench/update_detection.py [--pairs bench/data/update_pairs.jsonl] [--threshold 0.7]
        [--sweep] [--show-errors]

Each line of the set is {"older", "newer", "label": updates | restates | unrelated, "source"}. Precision and
recall are reported for *updates* (what hides a memory when wrong) and for *restates*; --sweep prints them
for a range of thresholds, so where the default sits can be checked."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memories import updates  # noqa: E402 - pure module: no Django setup needed


def _scores(pairs: list[dict[str, str]], threshold: float) -> dict[str, dict[str, float]]:
    result = {}
    predicted = [updates.classify(older=p["older"], newer=p["newer"], threshold=threshold) for p in pairs]
    for label in (updates.UPDATES, updates.RESTATES):
        tp = sum(
            1 for p, d in zip(pairs, predicted, strict=True) if d.relation == label and p["label"] == label
        )
        fp = sum(
            1 for p, d in zip(pairs, predicted, strict=True) if d.relation == label and p["label"] != label
        )
        fn = sum(
            1 for p, d in zip(pairs, predicted, strict=True) if d.relation != label and p["label"] == label
        )
        result[label] = {
            "precision": round(tp / (tp + fp), 3) if tp + fp else 1.0,
            "recall": round(tp / (tp + fn), 3) if tp + fn else 1.0,
            "tp": tp,
            "fp": fp,
            "fn": fn,
        }
    return result


FAMILY = {"rule": "claim", "decision": "claim", "fact": "claim", "note": "claim", "skill": "skill"}


def _dataset(path: Path, threshold: float) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    compared = found = 0
    for j, newer in enumerate(rows):
        for i in range(j):
            older = rows[i]
            if (older.get("scope") or {}) != (newer.get("scope") or {}):
                continue
            if FAMILY.get(older.get("type", "note")) != FAMILY.get(newer.get("type", "note")):
                continue
            compared += 1
            decision = updates.classify(older=older["content"], newer=newer["content"], threshold=threshold)
            if decision.relation != updates.UNRELATED:
                found += 1
                print(f"  lines {i + 1} → {j + 1}: {decision.relation} {decision.confidence} {decision.rule}")
    print(f"{path.name}: {compared} comparable pairs, {found} decided")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=Path, default=ROOT / "bench" / "data" / "update_pairs.jsonl")
    parser.add_argument("--threshold", type=float, default=updates.DEFAULT_THRESHOLD)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--show-errors", action="store_true")
    parser.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="also classify every pair of memories/add bodies of this JSONL that the detector would compare "
        "(same scope, compatible types, file order = write order) and list what it decides",
    )
    args = parser.parse_args()
    pairs = [json.loads(line) for line in args.pairs.read_text().splitlines() if line.strip()]
    counts = {
        label: sum(1 for p in pairs if p["label"] == label) for label in ("updates", "restates", "unrelated")
    }
    print(f"{len(pairs)} pairs: {counts}")
    scores = _scores(pairs, args.threshold)
    for label, values in scores.items():
        print(f"{label:9s} threshold {args.threshold:.2f}: {values}")
    if args.sweep:
        print("threshold  updates P / R     restates P / R")
        for step in range(40, 96, 5):
            threshold = step / 100
            swept = _scores(pairs, threshold)
            print(
                f"{threshold:9.2f}  {swept['updates']['precision']:.3f} / {swept['updates']['recall']:.3f}"
                f"     {swept['restates']['precision']:.3f} / {swept['restates']['recall']:.3f}"
            )
    if args.dataset is not None:
        _dataset(args.dataset, args.threshold)
    if args.show_errors:
        for pair in pairs:
            decision = updates.classify(older=pair["older"], newer=pair["newer"], threshold=args.threshold)
            if decision.relation != pair["label"]:
                print(f"\n[{pair['label']} → {decision.relation} {decision.confidence} {decision.rule}]")
                print(f"  old: {pair['older']}\n  new: {pair['newer']}")


if __name__ == "__main__":
    main()
