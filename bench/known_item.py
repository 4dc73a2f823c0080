"""Known-item retrieval on the seeded 100k bench workspace: how often a search made of a memory's own words
finds that memory, for several values of SEARCH_BM25_POSTINGS_PER_TERM (the head of each word's postings
BM25 reads).

LoCoMo's workspaces hold ~600 memories, so no word there has more postings than any cap worth considering;
this is the quality measure at the scale where the cap matters. Reuses cairn_bench as seeded by
context_latency.py (run that first). The bench's vectors are synthetic clusters, not embeddings of the
text, so only the lexical numbers say something about quality; hybrid is there to show what the cap costs
end to end.

    .venv/bin/python bench/known_item.py [--queries 200] [--words 4] [--caps 100000 2000 1000 500]
                                         [--strategies lexical hybrid] [--seed 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import context_latency  # noqa: E402,F401 - the bench database is the one context_latency.py seeds

os.environ["CAIRN_DATABASE_NAME"] = "cairn_bench"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

WORD = re.compile(r"[A-Za-z]{4,}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=200, help="memories drawn as known items")
    parser.add_argument("--words", type=int, default=4, help="distinct words of 4+ letters per query")
    parser.add_argument("--caps", type=int, nargs="+", default=[100_000, 2000, 1000, 500])
    parser.add_argument(
        "--strategies", nargs="+", default=["lexical", "hybrid"], choices=["lexical", "hybrid"]
    )
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "known_item.json")
    args = parser.parse_args()
    if args.queries < 1 or args.words < 1 or min(args.caps) < 1:
        parser.error("--queries, --words and every cap must be at least 1")
    return args


def known_items(workspace_id: int, *, count: int, words: int, seed: int) -> list[tuple[Any, str]]:
    """(memory id, query) pairs: shared long-term memories, each queried with `words` of its own words."""
    from memories.models import Memory

    rng = random.Random(seed)
    shared = Memory.objects.filter(
        workspace_id=workspace_id, user_id=None, scope="global", layer="long_term", deleted_at__isnull=True
    )
    ids = list(shared.values_list("id", flat=True))
    contents = dict(shared.filter(id__in=rng.sample(ids, min(count, len(ids)))).values_list("id", "content"))
    items = []
    for memory_id in sorted(contents):
        distinct = list(dict.fromkeys(WORD.findall(contents[memory_id])))
        if len(distinct) >= words:
            items.append((memory_id, " ".join(rng.sample(distinct, words))))
    return items


def measure(workspace_id: int, items: list[tuple[Any, str]], *, strategy: str, cap: int) -> dict[str, float]:
    from django.conf import settings

    from memories.selectors import MemoryScope
    from retrieval import search

    settings.SEARCH_BM25_POSTINGS_PER_TERM = cap
    hit1 = hit10 = 0
    started = time.perf_counter()
    for memory_id, query in items:
        found = [
            m.id
            for m in search.memory_search(
                workspace_id=workspace_id, scope=MemoryScope(), query=query, limit=10, strategy=strategy
            ).memories
        ]
        hit10 += memory_id in found
        hit1 += bool(found) and found[0] == memory_id
    return {
        "hit@1": round(hit1 / len(items), 3),
        "hit@10": round(hit10 / len(items), 3),
        "msPerQuery": round(1000 * (time.perf_counter() - started) / len(items), 1),
    }


def main() -> None:
    args = parse_args()
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from tenancy import services as tenancy_services
    from tenancy.rls import workspace_context

    user = get_user_model().objects.get(username="bench")
    workspace_id = tenancy_services.personal_workspace_ensure(user=user).id
    report: dict[str, Any] = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "loadavg": os.getloadavg(),
        "results": {},
    }
    with workspace_context(workspace_id):
        items = known_items(workspace_id, count=args.queries, words=args.words, seed=args.seed)
        if not items:
            raise SystemExit("no memory has enough words; seed the bench with context_latency.py first")
        report["queries"] = len(items)
        for strategy in args.strategies:
            for cap in args.caps:
                print(f"{strategy} cap {cap}…", file=sys.stderr, flush=True)
                result = measure(workspace_id, items, strategy=strategy, cap=cap)
                report["results"].setdefault(strategy, {})[str(cap)] = result
                print(
                    f"{strategy:8} cap {cap:>6}: hit@1 {result['hit@1']:.3f}  hit@10 {result['hit@10']:.3f}  "
                    f"{result['msPerQuery']} ms/query"
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out} ({len(items)} queries)")


if __name__ == "__main__":
    main()
