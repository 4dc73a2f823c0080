"""Does a new memory change an older one? A classifier without a model: *updates* (the newer one changes what
the older one says), *restates* (the same content again) or *unrelated*.

A wrong *updates* hides a true memory from retrieval, so the classifier asks for two kinds of evidence before
it says so: a change cue in the newer text that the older one does not already hold ("moved", "switched",
"replaced", "no longer", "now", "correction", "from X to Y", …) and something the change is about: the older
value named as what was left ("from Friday to Tuesday", "instead of Moment", "no longer uses tabs"), or a
substituted value of the same kind (a weekday, month, number or version). Both on the same subject: the two
texts must share most of their content words. A condition in the newer text that the older lacks ("during
the freeze", "for the export endpoints only") means the older still holds elsewhere, and costs confidence.

Everything is plain string code over whitespace and punctuation-split words: the texts are untrusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

UPDATES = "updates"
RESTATES = "restates"
UNRELATED = "unrelated"

# Texts longer than this are compared on their first MAX_CHARS characters (a memory is at most 50k).
MAX_CHARS = 4000
TOKEN_CHARS = frozenset("._-#+/@")

_WEEKDAYS = {
    "monday": "monday", "mon": "monday", "mondays": "monday",
    "tuesday": "tuesday", "tue": "tuesday", "tues": "tuesday", "tuesdays": "tuesday",
    "wednesday": "wednesday", "wed": "wednesday", "wednesdays": "wednesday",
    "thursday": "thursday", "thu": "thursday", "thurs": "thursday", "thursdays": "thursday",
    "friday": "friday", "fri": "friday", "fridays": "friday",
    "saturday": "saturday", "sat": "saturday", "saturdays": "saturday",
    "sunday": "sunday", "sun": "sunday", "sundays": "sunday",
}  # fmt: skip
_MONTHS = frozenset(
    {
        "january",
        "february",
        "march",
        "april",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    }  # fmt: skip
)
STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "nor",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "into",
        "onto",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "we",
        "our",
        "us",
        "you",
        "your",
        "i",
        "me",
        "my",
        "he",
        "him",
        "his",
        "she",
        "her",
        "they",
        "them",
        "their",
        "do",
        "does",
        "did",
        "done",
        "has",
        "have",
        "had",
        "having",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
        "not",
        "no",
        "yes",
        "so",
        "than",
        "then",
        "too",
        "very",
        "just",
        "also",
        "only",
        "all",
        "any",
        "each",
        "every",
        "some",
        "such",
        "own",
        "same",
        "other",
        "more",
        "most",
        "less",
        "least",
        "about",
        "after",
        "before",
        "over",
        "under",
        "again",
        "further",
        "once",
        "up",
        "down",
        "out",
        "off",
        "what",
        "which",
        "who",
        "whom",
        "when",
        "where",
        "why",
        "how",
        "if",
        "else",
        "while",
        "because",
        "until",
        "since",
        "per",
        "via",
        "new",
        "old",
        "use",
        "uses",
        "used",
        "using",
        "always",
        "never",
        "still",
        "get",
        "gets",
        "got",
        "make",
        "makes",
        "made",
        "go",
        "goes",
        "went",
        "one",
        "happen",
        "happens",
        "kept",
        "keep",
        "keeps",
        "live",
        "lives",
        "stored",
        "held",
    }  # fmt: skip
)
# Cue → weight. A cue counts only when the older text does not hold it too ("instead of" in both is the
# template of two different preferences, not a change).
STRONG_CUES = {
    "correction": 0.5, "corrected": 0.5, "actually": 0.3, "replaced": 0.45, "replaces": 0.45,
    "replace": 0.35, "replacing": 0.4, "switched": 0.45, "switch": 0.3, "switching": 0.4, "moved": 0.45,
    "migrated": 0.45, "deprecated": 0.45, "dropped": 0.4, "retired": 0.4, "changed": 0.4, "instead": 0.35,
    "anymore": 0.45, "updated": 0.35, "update": 0.3, "raised": 0.4, "lowered": 0.4, "increased": 0.35,
    "decreased": 0.35, "reduced": 0.35, "bumped": 0.35, "upgraded": 0.4, "downgraded": 0.4,
    "stopped": 0.35, "superseded": 0.5, "obsolete": 0.4, "now": 0.3, "longer": 0.0, "renamed": 0.45,
}  # fmt: skip
# Two-word cues, found on consecutive words.
PHRASE_CUES = {
    ("no", "longer"): 0.5,
    ("no", "more"): 0.35,
    ("any", "more"): 0.45,
    ("from", "now"): 0.3,
    ("not", "anymore"): 0.45,
}
# A negation one text holds and the other does not: never the same content said again.
NEGATIONS = frozenset(
    {"not", "never", "no", "don't", "dont", "doesn't", "isn't", "aren't", "without", "stop"}
)
# Words after which the next content word names what was left behind.
LEFT_MARKERS = frozenset({"from", "instead", "replaced", "replacing", "dropped", "longer", "over", "retired"})
# "not" names what was left only beside "anymore" ("does not prefer tabs anymore"): alone it is too common.
NEGATION = "not"
# Verbs that say how, not what: "no longer wants raw SQL" left raw SQL, not wanting; skipped when looking for
# what was left behind.
GENERIC_VERBS = frozenset(
    {
        "prefer",
        "prefers",
        "want",
        "wants",
        "like",
        "likes",
        "need",
        "needs",
        "use",
        "uses",
        "run",
        "runs",
        "work",
        "works",
        "do",
        "does",
        "allow",
        "allows",
        "recommend",
        "recommends",
        "support",
        "supports",
    }  # fmt: skip
)
# "X was replaced by Y": the cue in the passive names its subject as what was left.
PASSIVE_AUXILIARIES = frozenset({"was", "is", "are", "were", "been", "be", "got", "gets", "being"})
# A condition the older text lacks: the newer one may hold only in a special case.
CONDITIONS = frozenset(
    {
        "during",
        "except",
        "unless",
        "only",
        "temporarily",
        "temporary",
        "if",
        "while",
        "exception",
        "sometimes",
    }
)
# Where the threshold sits and why: bench/README.md (update detection).
DEFAULT_THRESHOLD = 0.7
LONG_TEXT_WORDS = 35
RESTATE_MIN_JACCARD = 0.8


@dataclass(frozen=True)
class Decision:
    relation: str  # updates | restates | unrelated
    confidence: float
    rule: str  # the signals that decided, joined by "+": "cue:moved+left:friday+substituted:weekday"
    cue: str | None = None
    old_span: str | None = None  # what the older memory said that changed
    new_span: str | None = None  # what the newer one says instead
    overlap: float = 0.0
    signals: list[str] = field(default_factory=list)

    def evidence(self) -> dict[str, object]:
        return {
            "cue": self.cue,
            "oldSpan": self.old_span,
            "newSpan": self.new_span,
            "overlap": round(self.overlap, 3),
            "rule": self.rule,
        }


@dataclass(frozen=True)
class _Text:
    words: list[str]  # lower case, in order, stop words kept (cues are phrases)
    content: set[str]  # stems of content words, markers included
    markers: dict[str, str]  # marker → its kind (weekday, month, number)


def _tokens(text: str) -> list[str]:
    words: list[str] = []
    current: list[str] = []
    for char in text[:MAX_CHARS].lower():
        if char.isalnum() or (char in TOKEN_CHARS and current):
            current.append(char)
            continue
        if current:
            words.append("".join(current).rstrip("._-/"))
            current = []
    if current:
        words.append("".join(current).rstrip("._-/"))
    return [word for word in words if word]


def stem(word: str) -> str:
    if not word.isalpha() or len(word) <= 3:
        return word
    for suffix, replacement in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + replacement
    return word


def _marker_kind(word: str) -> str | None:
    if word in _WEEKDAYS:
        return "weekday"
    if word in _MONTHS:
        return "month"
    digits = sum(character.isdigit() for character in word)
    if digits and digits >= len(word) - 2:  # 30, 3.12, v2, 14d, 60s, #1207
        return "number"
    return None


def _text(raw: str) -> _Text:
    words = _tokens(raw)
    content: set[str] = set()
    markers: dict[str, str] = {}
    for word in words:
        kind = _marker_kind(word)
        if kind is not None:
            value = _WEEKDAYS.get(word, word)
            markers[value] = kind
            content.add(value)
        elif word not in STOP_WORDS and word not in STRONG_CUES and len(word) > 1:
            content.add(stem(word))
    return _Text(words, content, markers)


def _cues(newer: _Text, older: _Text) -> list[tuple[str, float]]:
    older_words = set(older.words)
    found: dict[str, float] = {}
    for word in newer.words:
        weight = STRONG_CUES.get(word)
        if weight and word not in older_words:
            found[word] = max(found.get(word, 0.0), weight)
    for first, second in zip(newer.words, newer.words[1:], strict=False):
        weight = PHRASE_CUES.get((first, second))
        if weight and not _has_phrase(older.words, first, second):
            found[f"{first} {second}"] = weight
    return sorted(found.items(), key=lambda item: -item[1])


def _has_phrase(words: list[str], first: str, second: str) -> bool:
    return any(a == first and b == second for a, b in zip(words, words[1:], strict=False))


def _left_behind(newer: _Text, older: _Text) -> tuple[str, str | None, bool] | None:
    """A value of the older text that the newer one names as left behind: "from Friday (to Tuesday)",
    "instead of X", "no longer (wants) X", "X was replaced by (Y)"; with what replaced it when the text says,
    and whether X is the sentence's subject (the passive: the thing replaced is what both texts are about).
    Only the first word that says what (generic verbs skipped) counts, and not when the older text had left
    it behind already ("moved from Redis" then "switched the broker from Redis": two changes, not one)."""
    words = newer.words
    markers = LEFT_MARKERS | ({NEGATION} if "anymore" in words else set())
    for index, word in enumerate(words):
        if word not in markers:
            continue
        probe = index + 1
        while (
            probe < len(words)
            and probe <= index + 4
            and (words[probe] in STOP_WORDS or words[probe] in STRONG_CUES or words[probe] in GENERIC_VERBS)
        ):
            probe += 1
        if probe >= len(words):
            continue
        left = _WEEKDAYS.get(words[probe], words[probe])
        if not _in_older(left, older) or _left_in(older, left):
            continue
        replacement = None
        for after in range(probe + 1, min(len(words), probe + 4)):
            if words[after] == "to" and after + 1 < len(words):
                replacement = words[after + 1]
                break
        return left, replacement, False
    for index, word in enumerate(words):
        if word in ("replaced", "deprecated", "retired", "dropped") and index > 1:
            if words[index - 1] not in PASSIVE_AUXILIARIES:
                continue
            for back in range(index - 2, max(-1, index - 5), -1):
                candidate = words[back]
                if candidate in STOP_WORDS:
                    continue
                if _in_older(candidate, older) and not _left_in(older, candidate):
                    replacement = None
                    if index + 2 < len(words) and words[index + 1] == "by":
                        replacement = words[index + 2]
                    return candidate, replacement, True
                break
    return None


def _in_older(word: str, older: _Text) -> bool:
    return word in older.content or stem(word) in older.content


def _left_in(text: _Text, value: str) -> bool:
    """Whether `text` itself names `value` as left behind (a marker right before it)."""
    words = text.words
    return any(
        _WEEKDAYS.get(word, word) == value and position > 0 and words[position - 1] in LEFT_MARKERS
        for position, word in enumerate(words)
    )


def _substituted(newer: _Text, older: _Text) -> tuple[str, str, str] | None:
    """A marker of one kind in the older text only, and one of the same kind in the newer text only."""
    for old_value, kind in older.markers.items():
        if old_value in newer.markers:
            continue
        for new_value, new_kind in newer.markers.items():
            if new_kind == kind and new_value not in older.markers:
                return kind, old_value, new_value
    return None


def classify(*, older: str, newer: str, threshold: float = DEFAULT_THRESHOLD) -> Decision:
    """How `newer` relates to `older` (the newer written after the older, in the same scope)."""
    old, new = _text(older), _text(newer)
    if not old.content or not new.content:
        return Decision(UNRELATED, 0.0, "empty")
    plain_old = {word for word in old.content if word not in old.markers}
    plain_new = {word for word in new.content if word not in new.markers}
    shared = plain_old & plain_new
    smaller = max(1, min(len(plain_old), len(plain_new)))
    overlap = len(shared) / smaller
    union = old.content | new.content
    jaccard = len(old.content & new.content) / max(1, len(union))
    cues = _cues(new, old)
    left = _left_behind(new, old)
    substituted = _substituted(new, old)
    conditions = sorted(w for w in set(new.words) & CONDITIONS if w not in set(old.words))

    if not cues and substituted is None and left is None:
        old_only, new_only = old.content - new.content, new.content - old.content
        negated = (set(old.words) & NEGATIONS) != (set(new.words) & NEGATIONS)
        if jaccard >= RESTATE_MIN_JACCARD and not (old_only and new_only) and not negated:
            return Decision(RESTATES, round(jaccard, 3), "overlap", overlap=overlap)
        return Decision(UNRELATED, 0.0, "no_change_cue", overlap=overlap)

    changed: set[str] = set()
    if left is not None and not left[2]:
        changed = {stem(value) for value in left[:2] if value} | {value for value in left[:2] if value}
    if substituted is not None:
        changed |= {substituted[1], substituted[2]}
    subject = shared - changed
    # The same subject: most of the shorter text's words shared; a passive "X was replaced by Y" is about X
    # itself, so X in both is enough there.
    if not subject or overlap < (0.15 if left is not None and left[2] else 0.3):
        # Nothing in common but the value that changed: two subjects that had the same value.
        return Decision(UNRELATED, 0.0, "different_subject", overlap=overlap)

    signals: list[str] = []
    score = 0.0
    cue = cues[0][0] if cues else None
    if cues:
        score += cues[0][1] + 0.1 * min(2, len(cues) - 1)
        signals.append(f"cue:{cue}")
    old_span = new_span = None
    if left is not None:
        score += 0.35
        old_span, new_span = left[0], left[1]
        signals.append(f"left:{old_span}")
        cue = cue or "left"
    if substituted is not None:
        kind, old_value, new_value = substituted
        score += 0.3
        signals.append(f"substituted:{kind}")
        old_span = old_span or old_value
        new_span = new_span or new_value
    score += 0.35 * min(1.0, overlap)
    if conditions:
        score -= 0.35
        signals.append(f"condition:{conditions[0]}")
    if len(new.words) > LONG_TEXT_WORDS:
        # A long message that mentions a change in passing (a conversation turn) more often than it records
        # one: the cue may belong to another sentence than the value.
        score -= 0.25
        signals.append("long_text")
    if not cues:
        # A value changed with no word saying so: two notes about different occasions as often as a change.
        score = min(score, threshold - 0.05)
        signals.append("no_cue")
    elif left is None and substituted is None:
        # A cue with nothing it is about: "now" in a text that adds to the older one.
        score -= 0.2 if overlap < 0.6 else 0.1
        signals.append("cue_only")
    confidence = round(max(0.0, min(0.99, score)), 3)
    if old_span is None:
        old_span = " ".join(sorted(old.content - new.content)[:4]) or None
    if new_span is None:
        new_span = " ".join(sorted(new.content - old.content)[:4]) or None
    relation = UPDATES if confidence >= threshold else UNRELATED
    return Decision(
        relation,
        confidence,
        "+".join(signals),
        cue=cue,
        old_span=old_span,
        new_span=new_span,
        overlap=overlap,
        signals=signals,
    )
