"""Entity names as the graph stores them: cleaned of characters that hide text and normalised to one key."""

from __future__ import annotations

import re
import unicodedata

MIN_NAME_BYTES = 3
MAX_NAME_BYTES = 512
# Control, format (zero-width, bidi embeddings/overrides/isolates) and separator characters other than space.
_STRIP_CATEGORIES = {"Cc", "Cf", "Zl", "Zp"}


def truncate_utf8(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", errors="ignore")


def clean_text(text: str) -> str:
    """Strip control, zero-width and bidi characters (they make look-alike names and hide text)."""
    return "".join(ch for ch in text if unicodedata.category(ch) not in _STRIP_CATEGORIES)


def normalise_name(name: str) -> str | None:
    """trim → lowercase → strip control/bidi/zero-width → collapse spaces → ≤ 512 bytes; None when < 3
    bytes."""
    canonical = re.sub(r"\s+", " ", clean_text(name).strip().lower())
    canonical = truncate_utf8(canonical, MAX_NAME_BYTES).strip()
    if len(canonical.encode("utf-8")) < MIN_NAME_BYTES:
        return None
    return canonical
