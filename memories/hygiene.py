"""Scores of memory hygiene, pure functions: write-time importance, A-MAC admission, upsert keys.

Importance and admission follow Zeph's write-time importance and A-MAC admission control; the upsert key
follows memories.sh consolidation. Memories have no chat role, so the role prior reads `metadata.role` when
the caller gives one (user, assistant, tool, system) and otherwise the memory type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# --- importance ---------------------------------------------------------------------------------------------

_MARKERS = ("remember:", "important:", "always:", "never forget:", "key point:", "critical:")
_IMPORTANCE_ROLE = {"user": 0.7, "assistant": 0.4}
# Without a role, a memory's type says how deliberate it is: rules and decisions are stated on purpose.
_IMPORTANCE_TYPE = {"rule": 0.7, "decision": 0.7, "fact": 0.6, "skill": 0.6, "note": 0.5}


def memory_role(metadata: dict[str, Any] | None) -> str | None:
    role = (metadata or {}).get("role")
    return role.strip().lower() if isinstance(role, str) and role.strip() else None


def _has_marker(content: str) -> bool:
    head = content[:200].lstrip().lower()
    if head.startswith(_MARKERS):
        return True
    return any(line.lstrip().lower().startswith(_MARKERS) for line in content[:500].splitlines())


def importance_score(*, content: str, memory_type: str, role: str | None) -> float:
    """Zeph: clamp(0.5·marker + 0.3·density + 0.2·role, 0, 1), density = x/(1+x) with x = chars/300."""
    marker = 1.0 if _has_marker(content) else 0.0
    chars = len(content) / 300
    density = chars / (1 + chars)
    prior = _IMPORTANCE_ROLE.get(role, 0.5) if role else _IMPORTANCE_TYPE.get(memory_type, 0.5)
    return round(min(1.0, max(0.0, 0.5 * marker + 0.3 * density + 0.2 * prior)), 4)


# --- admission (A-MAC) --------------------------------------------------------------------------------------

_HEDGES = (
    "maybe",
    "might",
    "perhaps",
    "i think",
    "i believe",
    "not sure",
    "could be",
    "possibly",
    "probably",
    "uncertain",
    "not certain",
    "i'm not sure",
    "im not sure",
    "not confident",
)
_HEDGE_PATTERN = re.compile(r"\b(?:" + "|".join(re.escape(h) for h in _HEDGES) + r")\b")
_ADMISSION_ROLE = {"user": 0.7, "assistant": 0.6, "tool": 0.8, "tool_result": 0.8, "system": 0.3}
_ADMISSION_TYPE = {"rule": 0.8, "decision": 0.8, "fact": 0.7, "skill": 0.7, "note": 0.6}
WEIGHTS = {
    "future_utility": 0.30,
    "factual_confidence": 0.15,
    "semantic_novelty": 0.30,
    "temporal_recency": 0.10,
    "content_type_prior": 0.15,
}


def factual_confidence(content: str) -> float:
    """max(1 − 0.1·k, 0.2) where k is how many distinct hedging markers appear."""
    found = {match.group(0) for match in _HEDGE_PATTERN.finditer(content.lower())}
    return max(1.0 - 0.1 * len(found), 0.2)


def content_type_prior(*, memory_type: str, role: str | None) -> float:
    if role:
        return _ADMISSION_ROLE.get(role, 0.5)
    return _ADMISSION_TYPE.get(memory_type, 0.5)


@dataclass(frozen=True)
class AdmissionScore:
    factors: dict[str, float]

    @property
    def composite(self) -> float:
        return round(sum(WEIGHTS[name] * value for name, value in self.factors.items()), 4)


def admission_score(
    *, content: str, memory_type: str, role: str | None, max_cosine: float | None, future_utility: float = 0.5
) -> AdmissionScore:
    """The weighted A-MAC factors; `future_utility` is 0.5 on the heuristic path, a model's rating
    otherwise."""
    novelty = 1.0 if max_cosine is None else max(1.0 - max_cosine, 0.0)
    return AdmissionScore(
        {
            "future_utility": future_utility,
            "factual_confidence": factual_confidence(content),
            "semantic_novelty": round(novelty, 4),
            "temporal_recency": 1.0,
            "content_type_prior": content_type_prior(memory_type=memory_type, role=role),
        }
    )


# --- consolidation upsert key -------------------------------------------------------------------------------

_PREFIX_MAX_WORDS = 6


def _normalise_key(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def upsert_key(*, content: str, category: str | None) -> str:
    """category, else the first line's prefix before a colon, else its first six words; normalised.

    A "prefix" longer than six words is a sentence with a colon in it, not a label: the first six words then.
    """
    if category and _normalise_key(category):
        return "category:" + _normalise_key(category)
    first_line = content.strip().splitlines()[0] if content.strip() else ""
    if ":" in first_line:
        prefix = _normalise_key(first_line.split(":", 1)[0])
        if prefix and len(prefix.split()) <= _PREFIX_MAX_WORDS:
            return "prefix:" + prefix
    return "words:" + " ".join(_normalise_key(first_line).split()[:6])
