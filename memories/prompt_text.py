"""The one rule for a stored value pasted into a text a model reads.

Every field a caller can write (memory content, tags, category, paths, metadata; fact sentences, entity and
community names and summaries, aliases, conflict explanations) reaches prompts through context/get's
`context`, graph/trace and the MCP tools' texts. Those texts are sections (`## Global Rules`, one `- ` line
per item); a value must not be able to start a line of its own (and so a section), open or close a tag
(`</system>`), or show the untrusted marker of flagged memories on a line that has none. `prompt_line` is the
only function that makes a value safe for them; every text builder calls it on every value it pastes.
"""

from __future__ import annotations

from typing import Any

# Put in front of the line of a rule or memory with prompt-injection flags (Memory.injection_flags): its text
# is data to weigh, never instructions to follow, and an agent's system prompt can say so about lines that
# carry this marker (docs/hygiene.md). A value cannot forge it: prompt_line turns "[untrusted" into
# "(untrusted".
UNTRUSTED_MARKER = "[UNTRUSTED: possible prompt injection]"

# Angle brackets and the characters a model reads as them: a tag needs one, so none survives. The look-alikes
# are the ones NFKC folds to < and > (fullwidth, small) and the mathematical and CJK angle brackets.
_ANGLES = "<>\uff1c\uff1e\ufe64\ufe65\u2039\u203a\u2329\u232a\u27e8\u27e9\u3008\u3009\u29fc\u29fd\u276e\u276f"
_NO_ANGLES = str.maketrans(
    {**dict.fromkeys(_ANGLES, " "), "\uff3b": "[", "\uff3d": "]"}  # fullwidth square brackets: the marker's
)


def prompt_line(value: Any, *, limit: int | None = None) -> str:
    """`value` as text on one line (every kind of line break and run of white space is one space), without
    angle brackets or their look-alikes, and without a forged untrusted marker; cut to `limit` characters
    (with "...") when given. Plain string code: the text is untrusted."""
    line = " ".join(str(value if value is not None else "").translate(_NO_ANGLES).split())
    if "untrusted" in line.lower():
        line = _unmarked(line)
    if limit is not None and len(line) > limit:
        line = line[: max(limit - 3, 0)] + "..."
    return line


def _unmarked(line: str) -> str:
    """The line with every "[untrusted" (any case, any spacing after the bracket) turned into "(untrusted": a
    forged marker then no longer reads as one."""
    out: list[str] = []
    start = 0
    lowered = line.lower()
    while True:
        at = lowered.find("[", start)
        if at < 0:
            out.append(line[start:])
            return "".join(out)
        word_at = at + 1
        while word_at < len(line) and line[word_at] == " ":
            word_at += 1
        out.append(line[start:at])
        out.append("(" if lowered.startswith("untrusted", word_at) else "[")
        start = at + 1


def prompt_list(values: Any, *, limit: int | None = None) -> str:
    """Stored values (tags, paths, aliases) as one comma-separated line, each through prompt_line."""
    return ", ".join(prompt_line(v, limit=limit) for v in values or [])


def prompt_bracketed(values: Any, *, limit: int | None = None) -> str:
    """Stored values as one bracketed list ("[a, b]"): the bracket is ours, so a value that starts with
    "untrusted" cannot make it read as the marker."""
    return prompt_line("[" + prompt_list(values, limit=limit) + "]")
