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


MAX_RELATION_CHARS = 120


def normalise_relation(raw: str) -> str | None:
    """A relation or edge type as facts store it: lowercased, runs of spaces and hyphens as one underscore
    ("Works  On", "works-on" and "works on" are all works_on). Plain string code: relations come from users
    and models."""
    words = clean_text(raw).strip().lower().replace("-", " ").split()
    relation = "_".join(words)[:MAX_RELATION_CHARS].strip("_")
    return relation or None


# Values of a series that a name or a sentence can differ in while every other word matches: "Friday" and
# "Thursday", "Q1" and "Q2", "Python 2" and "Python 3" are different things however close their embeddings.
_WEEKDAYS = {
    "monday": ("mon",),
    "tuesday": ("tue", "tues"),
    "wednesday": ("wed",),
    "thursday": ("thu", "thur", "thurs"),
    "friday": ("fri",),
    "saturday": ("sat",),
    "sunday": ("sun",),
}
_MONTHS = {
    "january": ("jan",),
    "february": ("feb",),
    "march": ("mar",),
    "april": ("apr",),
    "may": (),
    "june": ("jun",),
    "july": ("jul",),
    "august": ("aug",),
    "september": ("sep", "sept"),
    "october": ("oct",),
    "november": ("nov",),
    "december": ("dec",),
}
_SERIES = {
    alias: name
    for table in (_WEEKDAYS, _MONTHS)
    for name, aliases in table.items()
    for alias in (name, *aliases)
}
# Spelled numbers count in names ("Second Floor" is not "Third Floor"); in sentences "one of the …" is too
# common to mark a different claim.
_NUMBER_WORDS = {
    word: str(value)
    for value, words in enumerate(
        [
            (),
            ("one", "first"),
            ("two", "second"),
            ("three", "third"),
            ("four", "fourth"),
            ("five", "fifth"),
            ("six", "sixth"),
            ("seven", "seventh"),
            ("eight", "eighth"),
            ("nine", "ninth"),
            ("ten", "tenth"),
            ("eleven", "eleventh"),
            ("twelve", "twelfth"),
        ]
    )
    for word in words
}
_ORDINAL_SUFFIXES = ("st", "nd", "rd", "th")


def _tokens(text: str) -> list[str]:
    """Runs of letters, digits and dots (a version's dots stay inside it), lowercased, dots trimmed."""
    tokens, current = [], []
    for ch in text.lower()[:4096]:
        if ch.isalnum() or ch == ".":
            current.append(ch)
        elif current:
            tokens.append("".join(current))
            current = []
    if current:
        tokens.append("".join(current))
    return [token.strip(".") for token in tokens if token.strip(".")]


def _number(token: str) -> str | None:
    """A token's number: "3", "3.11", "007" (as "7"), "21st" (as "21"), "v2"/"q1"/"gpt4" (the trailing
    number); not digits in the middle of a word ("k8s", "e2e")."""
    head = token.rstrip("0123456789")
    if head == token:
        for suffix in _ORDINAL_SUFFIXES:
            if token.endswith(suffix) and token[: -len(suffix)].isdigit():
                return str(int(token[: -len(suffix)]))
        return None
    digits = token[len(head) :]
    if not head:
        return str(int(digits))
    if head.endswith("."):
        parts = token.split(".")
        if all(part.isdigit() for part in parts):
            return ".".join([str(int(parts[0])), *parts[1:]])
        return None
    return str(int(digits)) if head.isalpha() else None


def distinct_markers(text: str, *, number_words: bool = True) -> list[str]:
    """What tells apart two names (or claims) that otherwise read alike: their numbers and versions, ordinals,
    weekday and month names (abbreviations count as the full name), and with `number_words` spelled numbers.
    Sorted, so two texts carry the same markers exactly when the lists are equal."""
    markers = []
    for token in _tokens(text):
        number = _number(token)
        if number is not None:
            markers.append(number)
        elif token in _SERIES:
            markers.append(_SERIES[token])
        elif number_words and token in _NUMBER_WORDS:
            markers.append(_NUMBER_WORDS[token])
    return sorted(markers)
