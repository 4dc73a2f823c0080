"""Prompt-injection flags for memory content (zeph.md, security.md §3).

Memory text is untrusted: it is read by the extraction LLM and later pasted into agents' prompts. Content is
flagged, never altered or refused (security notes legitimately quote these phrases); flagged memories stay
stored and searchable, and LLM extraction skips them. Matching runs on a normalised copy with zero-width and
other format characters removed, a known bypass of plain regexes.
"""

from __future__ import annotations

import re
import unicodedata

MAX_SCAN_CHARS = 65_536

_PATTERNS: dict[str, str] = {
    "instruction_override": r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|any)\b[^.\n]{0,20}\b(instructions?|prompts?|rules?|directions?|context)\b",
    "new_instructions": r"\b(new|updated|real|actual)\s+(system\s+)?instructions?\s*:",
    "role_reassignment": r"\byou\s+are\s+(now|no\s+longer)\b|\bact\s+as\s+(an?\s+)?(unrestricted|jailbroken|different)\b|\bfrom\s+now\s+on,?\s+you\b",
    "system_prompt_extraction": r"\b(reveal|print|show|repeat|output|leak)\b[^.\n]{0,30}\b(system\s+prompt|hidden\s+instructions?|initial\s+prompt)\b",
    "jailbreak_terms": r"\b(DAN\s+mode|developer\s+mode\s+enabled|jailbreak(ed)?|do\s+anything\s+now)\b",
    "delimiter_injection": r"</?\s*(system|assistant|user|tool[-_ ]?output|external[-_ ]data|instructions?)\s*>|\[/?(INST|SYS)\]|<\|im_(start|end)\|>",
    "execution_directive": r"\b(execute|run|call|invoke)\b[^.\n]{0,30}\b(shell|command|tool|function|curl|wget|rm\s+-rf)\b[^.\n]{0,40}\b(immediately|now|without\s+asking|silently)\b",
    "exfiltration": r"\b(send|post|upload|forward|exfiltrate)\b[^.\n]{0,40}\b(api[-_ ]?keys?|passwords?|secrets?|tokens?|credentials?)\b[^.\n]{0,40}\b(to|at)\b",
    "markdown_image_exfiltration": r"!\[[^\]]*\]\(\s*https?://[^)]*[?&][^)]*=",
    "encoded_payload": r"\b(base64|rot13)\b[^.\n]{0,30}\b(decode|execute|run|follow)\b",
}
_COMPILED = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in _PATTERNS.items()}


def normalise_for_scan(text: str) -> str:
    text = text[:MAX_SCAN_CHARS]
    # Drop format (Cf: zero-width, bidi controls) and control characters except whitespace.
    cleaned = "".join(ch for ch in text if unicodedata.category(ch) not in {"Cf", "Cc"} or ch in "\n\t ")
    return unicodedata.normalize("NFKC", cleaned)


def injection_flags(text: str) -> list[str]:
    """Names of the injection patterns found in `text` (empty when clean)."""
    scanned = normalise_for_scan(text)
    return [name for name, pattern in _COMPILED.items() if pattern.search(scanned)]
