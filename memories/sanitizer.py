"""Prompt-injection flags for memory content.

Memory text is untrusted: it is read by the extraction LLM and later pasted into agents' prompts. Content is
flagged, never altered or refused (security notes legitimately quote these phrases); flagged memories stay
stored and searchable, and LLM extraction skips them. Matching runs on a normalised copy with zero-width and
other format characters removed, a known bypass of plain regexes.

The patterns run on RE2, whose matching time is linear in the text whatever the pattern: a backtracking engine
let a crafted 8 KB memory hold every add and edit for over a second. RE2's word boundaries are ASCII, so a
trigger phrase right after a non-ASCII letter (Chinese text with no space before "ignore all previous
instructions") now counts as words too.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

import re2

MAX_SCAN_CHARS = 65_536

_PATTERNS: dict[str, str] = {
    "instruction_override": (
        r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|any)\b"
        r"[^.\n]{0,20}\b(instructions?|prompts?|rules?|directions?|context)\b"
    ),
    "new_instructions": r"\b(new|updated|real|actual)\s+(system\s+)?instructions?\s*:",
    "role_reassignment": (
        r"\byou\s+are\s+(now|no\s+longer)\b|\bact\s+as\s+(an?\s+)?(unrestricted|jailbroken|different)\b"
        r"|\bfrom\s+now\s+on,?\s+you\b"
    ),
    "system_prompt_extraction": (
        r"\b(reveal|print|show|repeat|output|leak)\b[^.\n]{0,30}"
        r"\b(system\s+prompt|hidden\s+instructions?|initial\s+prompt)\b"
    ),
    "jailbreak_terms": r"\b(DAN\s+mode|developer\s+mode\s+enabled|jailbreak(ed)?|do\s+anything\s+now)\b",
    "delimiter_injection": (
        r"</?\s*(system|assistant|user|tool[-_ ]?output|external[-_ ]data|instructions?)\s*>"
        r"|\[/?(INST|SYS)\]|<\|im_(start|end)\|>"
    ),
    "execution_directive": (
        r"\b(execute|run|call|invoke)\b[^.\n]{0,30}\b(shell|command|tool|function|curl|wget|rm\s+-rf)\b"
        r"[^.\n]{0,40}\b(immediately|now|without\s+asking|silently)\b"
    ),
    "exfiltration": (
        r"\b(send|post|upload|forward|exfiltrate)\b[^.\n]{0,40}"
        r"\b(api[-_ ]?keys?|passwords?|secrets?|tokens?|credentials?)\b[^.\n]{0,40}\b(to|at)\b"
    ),
    "markdown_image_exfiltration": r"!\[[^\]]*\]\(\s*https?://[^)]*[?&][^)]*=",
    "encoded_payload": r"\b(base64|rot13)\b[^.\n]{0,30}\b(decode|execute|run|follow)\b",
}


def _compile(pattern: str) -> re2._Regexp:
    options = re2.Options()
    options.case_sensitive = False
    # Only whether a pattern matches counts: without groups RE2 answers from its DFA alone, never an NFA pass.
    options.never_capture = True
    return re2.compile(pattern, options)


_COMPILED = {name: _compile(pattern) for name, pattern in _PATTERNS.items()}

# Dropped from the scanned copy: format characters (Cf: zero-width, bidi controls) hide words from the
# patterns, controls (Cc) carry nothing a reader sees, and lone surrogates (Cs, which only JSON escapes
# produce) are not UTF-8, the only text RE2 reads.
_DROPPED_CATEGORIES = {"Cf", "Cc", "Cs"}


# ASCII's format and control characters (Cc), but the white space the patterns read.
_ASCII_DROPPED = str.maketrans(dict.fromkeys([*range(0x20), 0x7F]) | {ord(c): c for c in "\n\t"})


def normalise_for_scan(text: str) -> str:
    text = text[:MAX_SCAN_CHARS]
    if text.isascii():
        # The same as below for ASCII (NFKC leaves it as it is), without a Python step per character: most
        # text is ASCII, and the loop was most of a write's scan (8 ms for 8 KB).
        return text.translate(_ASCII_DROPPED)
    cleaned = "".join(
        ch for ch in text if unicodedata.category(ch) not in _DROPPED_CATEGORIES or ch in "\n\t "
    )
    normalised = unicodedata.normalize("NFKC", cleaned)
    # RE2's \s is ASCII; the few separators NFKC leaves alone (U+2028 and the like) become plain spaces, so
    # "you<U+2028>are now" still reads as the words it shows.
    if not normalised.isascii():
        normalised = "".join(" " if ch.isspace() and ch not in "\n\t" else ch for ch in normalised)
    return normalised


def injection_flags(text: str) -> list[str]:
    """Names of the injection patterns found in `text` (empty when clean)."""
    scanned = normalise_for_scan(text)
    return [name for name, pattern in _COMPILED.items() if pattern.search(scanned)]


# Stored with a memory's flags (Memory.injection_scan_version). Raise it whenever the patterns or the fields
# scanned change: stored_rows_repair then finds the memories scanned by an older detector and scans them
# again, so a flag the new detector would raise is not missing from a memory written before it.
DETECTOR_VERSION = 2
# Metadata is walked for its keys and string values up to this many of them (metadata is at most 16 KB).
MAX_METADATA_STRINGS = 2_000
_FIELD_SEPARATOR = "\n.\n"


def _metadata_strings(value: Any) -> list[str]:
    found: list[str] = []
    stack = [value]
    while stack and len(found) < MAX_METADATA_STRINGS:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                found.append(str(key))
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def memory_injection_flags(
    *,
    content: str,
    tags: Sequence[str] | None = None,
    paths: Sequence[str] | None = None,
    category: str | None = None,
    metadata: Any = None,
) -> list[str]:
    """The injection flags of a memory: its content and every other field a model may read (tags, paths,
    category, the keys and strings of its metadata), the same whoever computes them (memories/add and edit,
    import, stored_rows_repair). The fields are scanned as one text with a separator no pattern reads
    across (a full stop on a line of its own), so one pass serves them all and a phrase split across two
    tags is not taken for one."""
    texts = [content, *(tags or []), *(paths or []), *([category] if category else [])]
    texts.extend(_metadata_strings(metadata))
    return injection_flags(_FIELD_SEPARATOR.join(texts))


def text_injection_flags(*texts: str | None) -> list[str]:
    """The injection flags of graph text (fact sentences, names, summaries, aliases)."""
    return injection_flags(_FIELD_SEPARATOR.join(text for text in texts if text))
