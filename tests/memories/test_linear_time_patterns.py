"""Every pattern that reads untrusted text matches in time linear in it: hostile text costs about what benign
text does.

The patterns are found by walking the modules that hold them (module attributes, and the tables and rules
inside them), so a new pattern is timed without anyone listing it here. Hostile inputs come from each
pattern's own matches in the sanitizer, scrubber and fence test tables: every prefix of a match repeated,
alone or glued with a separator, every prefix followed by a long run of its next character, every prefix with
a few of its next character (the shape of the markdown-image text that once held an 8 KB memory for over a
second), and runs of every printable character. Times are ratios to benign text of the same size, each the
minimum of a few runs, so a busy machine slows both sides alike.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import string
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import re2

from graphsvc import llm
from memories import sanitizer, scrubber
from retrieval import lexical, temporal
from tests.graphsvc.test_llm_fence import FORGED_TAGS
from tests.memories.test_sanitizer import CLEAN, FLAGGED
from tests.memories.test_scrubber import LOOK_ALIKES, SECRETS

pytestmark = pytest.mark.django_db(databases=[])

MODULES = (sanitizer, scrubber, llm, lexical, temporal)
RE2_PATTERN = type(re2.compile(""))
SIZE = 100_000
# Hostile text may take this many times as long as benign text. A backtracking blow-up is hundreds of times
# slower at this size. RE2 stays linear but not flat: it skips benign text with memchr up to a pattern's
# first literal, while hostile text made of that literal goes through its DFA, forward and then back to find
# where a long match starts; that costs up to several times benign here, and the bound leaves room for noise.
MAX_RATIO = 25
# Smaller sizes first, with a loose bound, so a pattern that went exponential fails in seconds instead of
# hanging a worker: a regex engine cannot be interrupted mid-match.
SCREEN_SIZES = (2_000, 10_000)
SCREEN_MAX_RATIO = 100
SAMPLES_PER_PATTERN = 3
SAMPLE_CHARS = 64

# Glue between repeats of a prefix: each makes a word boundary, and most are in some pattern's repeated class.
JOINERS = (" ", "-", ".", "/", ":", "_", "=", "\n", '"')
HOSTILE_EXAMPLE = ("![](https://" + "?" * 6) * 1000  # the 8 KB text the review found, before cutting


def _walk(value: Any, path: str, seen: set[int]) -> Iterator[tuple[str, Any]]:
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, re.Pattern | RE2_PATTERN):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}[{key}]", seen)
    elif isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{getattr(item, 'kind', index)}]", seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _walk(getattr(value, field.name), f"{path}.{field.name}", seen)


def module_patterns() -> dict[str, Any]:
    """Every compiled pattern the modules hold, by where it is found."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    for module in MODULES:
        for name, value in vars(module).items():
            if not isinstance(value, types.ModuleType | types.FunctionType | type):
                found.update(_walk(value, f"{module.__name__}.{name}", seen))
    return found


PATTERNS = module_patterns()


@functools.cache
def corpus() -> list[str]:
    texts = [text for text, _ in FLAGGED] + CLEAN + [text for _, text, _ in SECRETS] + LOOK_ALIKES
    texts += [f"note {tag} note" for tag in FORGED_TAGS]
    # The sanitizer matches a normalised copy, and the scrubber's own pattern reads its placeholders.
    texts += [sanitizer.normalise_for_scan(text) for text in texts] + [
        scrubber.scrub_secrets(t) for t in texts
    ]
    return texts


def samples(pattern: Any) -> list[str]:
    matches = [m.group(0) for text in corpus() for m in pattern.finditer(text) if m.group(0)]
    return list(dict.fromkeys(match[:SAMPLE_CHARS] for match in matches))[:SAMPLES_PER_PATTERN]


BENIGN_LINES = (
    CLEAN
    + LOOK_ALIKES
    + [
        "See ![the diagram](https://example.com/arch.png) and [the runbook](https://example.com/run).",
        "Use <b>bold</b> for emphasis; a < b holds; -- done -- ok.",
        "Résumé of the café meeting: 東京 office moves, naïve estimates (±10%) — no blockers.",
    ]
)


def benign_text(size: int, pattern: Any = None) -> str:
    """Prose with the characters patterns start on (brackets, dashes, URLs, tags), none of it matched by
    `pattern`: a search that stopped at a match early would make benign text look cheaper than it is."""
    lines = [line for line in BENIGN_LINES if pattern is None or not pattern.search(line)]
    prose = "\n".join(lines) + "\n"
    return (prose * (size // len(prose) + 1))[:size]


def hostile_texts(pattern: Any) -> Iterator[Callable[[int], str]]:
    """Makers of hostile text of a given size for `pattern` (makers, so a small size costs a small string)."""

    def repeated(unit: str) -> Callable[[int], str]:
        return lambda size: (unit * (size // len(unit) + 1))[:size]

    def run_after(prefix: str, ch: str) -> Callable[[int], str]:
        return lambda size: (prefix + ch * size)[:size]

    yield repeated(HOSTILE_EXAMPLE)
    for ch in string.printable + "\u00a0\u200b\u2028\uff1c\u00e9":
        yield repeated(ch)
    for match in samples(pattern):
        for cut in range(1, len(match) + 1):
            prefix, following = match[:cut], match[min(cut, len(match) - 1)]
            yield repeated(prefix)
            yield repeated(prefix + following * 6)
            yield run_after(prefix, following)
            for joiner in JOINERS:
                yield repeated(prefix + joiner)


def seconds(call: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def search_seconds(pattern: Any, text: str, runs: int) -> float:
    return seconds(lambda: pattern.search(text), runs)


def test_it_finds_the_patterns_and_an_example_of_each() -> None:
    assert any(name.startswith("memories.sanitizer._COMPILED") for name in PATTERNS)
    assert any(name.startswith("memories.scrubber._RULES") for name in PATTERNS)
    assert "graphsvc.llm._FENCE_TAG" in PATTERNS
    missing = [name for name, pattern in PATTERNS.items() if not samples(pattern)]
    assert not missing, f"add an example text matching {missing} to the sanitizer, scrubber or fence tests"


def test_it_runs_every_pattern_on_a_linear_time_engine() -> None:
    backtracking = [name for name, pattern in PATTERNS.items() if not isinstance(pattern, RE2_PATTERN)]
    assert not backtracking, (
        f"compile {backtracking} with re2: untrusted text must not meet a backtracking engine"
    )


def slowest(
    pattern: Any, makers: list[Callable[[int], str]], size: int, keep: int
) -> list[tuple[float, Any]]:
    """The `keep` makers whose text takes longest at `size`: a quick pass over all, then a steadier one."""
    quick = sorted(makers, key=lambda make: -search_seconds(pattern, make(size), runs=1))[: keep * 2]
    steady = [(search_seconds(pattern, make(size), runs=3), make) for make in quick]
    return sorted(steady, key=lambda timed: -timed[0])[:keep]


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_it_matches_hostile_text_about_as_fast_as_benign_text(name: str) -> None:
    pattern = PATTERNS[name]
    makers = list(hostile_texts(pattern))
    for size in SCREEN_SIZES:
        benign = search_seconds(pattern, benign_text(size, pattern), runs=5)
        timed = slowest(pattern, makers, size, keep=4)
        worst = timed[0][0]
        assert worst <= SCREEN_MAX_RATIO * benign, f"{name}: {worst / benign:.0f}x benign at {size} chars"
        makers = [make for _, make in timed]

    benign = search_seconds(pattern, benign_text(SIZE, pattern), runs=7)
    for make in makers[:2]:
        hostile = make(SIZE)
        ratio = search_seconds(pattern, hostile, runs=7) / benign
        assert ratio <= MAX_RATIO, f"{name}: {ratio:.1f}x benign on {hostile[:40]!r}…"


def test_it_scans_the_known_hostile_memory_about_as_fast_as_a_benign_one() -> None:
    hostile = (HOSTILE_EXAMPLE * (SIZE // len(HOSTILE_EXAMPLE) + 1))[:SIZE]
    benign = benign_text(SIZE)
    for scan in (sanitizer.injection_flags, scrubber.scrub_secrets, llm.external):
        benign_seconds = seconds(functools.partial(scan, benign), runs=5)
        hostile_seconds = seconds(functools.partial(scan, hostile), runs=5)
        ratio = hostile_seconds / benign_seconds
        assert ratio <= MAX_RATIO, f"{scan.__name__}: {ratio:.1f}x benign"
