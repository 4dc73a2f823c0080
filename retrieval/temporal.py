"""Time in retrieval: when a memory happened, for temporal decay and time windows.

A conversation turn happened when it was said (its saidAt, which sessions/checkpoint and sessions/turns take
from the caller: a conversation held earlier is uploaded later). Any other memory happened at its
`metadata.sessionTime` when it carries one (an import of old notes: the server sets createdAt to the moment of
the write), else at its createdAt."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from memories import selectors
from memories.models import Memory
from memories.selectors import MemoryScope

SESSION_TIME_KEY = "sessionTime"
# An ISO 8601 time is at most ~35 characters; anything longer is not one and is not parsed.
MAX_TIME_TEXT = 40


def memory_time(memory: Memory) -> datetime:
    """When a conversation turn was said (its saidAt), else metadata.sessionTime (ISO 8601; without a time
    zone, UTC) when present and valid, else createdAt."""
    if memory.said_at is not None:
        return memory.said_at
    metadata = memory.metadata
    if isinstance(metadata, dict):
        raw = metadata.get(SESSION_TIME_KEY)
        if isinstance(raw, str) and len(raw) <= MAX_TIME_TEXT:
            moment = _parse_time(raw)
            if moment is not None:
                return moment
    return memory.created_at


def _parse_time(raw: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# --- time expressions in a query ----------------------------------------------------------------------------
#
# "what did we decide yesterday", "in May 2023", "last week", "before the migration": the expression leaves
# the text query (its words match nothing useful) and becomes a window on the memory's time. Everything here
# is plain string code over whitespace-separated words (the query is untrusted): a word check decides first
# whether there is anything temporal at all, so most queries never reach the date parser, and only a short
# span of recognised words is ever handed to it.

MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4, "may": 5,
    "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sep": 9, "sept": 9,
    "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
}  # fmt: skip
# Month names that are also everyday words ("may I", "march on", "Jan said"): months only next to a day, a
# year or a preposition of time.
AMBIGUOUS_MONTHS = frozenset({"may", "march", "mar", "jan", "dec", "jun", "jul", "aug", "sep", "oct", "nov"})
DAYS_NAMED = frozenset({"yesterday", "today", "tonight"})
UNITS = frozenset({"day", "days", "week", "weeks", "weekend", "month", "months", "year", "years"})
MODIFIERS = frozenset({"last", "past", "this", "previous"})
NUMBER_WORDS = frozenset({"a", "an", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                          "ten", "eleven", "twelve", "few", "couple"})  # fmt: skip
PREPOSITIONS = frozenset({"in", "on", "during", "from", "of"})
BOUNDARIES = frozenset({"before", "after", "since", "until"})
# Words that may open an event a boundary refers to ("before the migration", "since we moved").
EVENT_OPENERS = frozenset({"the", "our", "my", "we", "i", "you", "they", "a", "an"})
# An event is a point in time only when it is one occurrence: "before a release" is any release (a rule, a
# habit), "before I push a change" is every push; "since we moved", in the past tense, is one.
INDEFINITE_OPENERS = frozenset({"a", "an"})
PRONOUN_OPENERS = frozenset({"we", "i", "you", "they"})
IRREGULAR_PAST = frozenset(
    {
        "was",
        "were",
        "had",
        "did",
        "went",
        "came",
        "got",
        "made",
        "took",
        "left",
        "began",
        "saw",
        "met",
        "told",
        "said",
        "wrote",
        "built",
        "broke",
        "ran",
        "shipped",
        "moved",
        "paid",
        "bought",
        "found",
        "lost",
        "sold",
        "spent",
        "sent",
        "won",
        "fell",
        "gave",
        "kept",
        "heard",
        "felt",
        "rebuilt",
        "rewrote",
        "switched",
    }  # fmt: skip
)
# A question about what to do ("what should I run before the migration?") asks about a procedure, not about
# what happened before an event: no window.
PROCEDURAL_WORDS = frozenset(
    {
        "should",
        "must",
        "shall",
        "need",
        "needs",
        "always",
        "whenever",
        "never",
        "required",
        "checklist",
        "steps",
    }
)
PROCEDURAL_PAIRS = frozenset(
    {("do", "i"), ("do", "we"), ("can", "i"), ("can", "we"), ("how", "to"), ("have", "to"), ("has", "to")}
)
EVENT_MAX_WORDS = 6
_EDGE_PUNCTUATION = ",.;:!?\"'()[]{}"
# Longest span handed to the date parser, and most words scanned: a query is at most 500 characters.
MAX_SPAN_CHARS = 40
MAX_WORDS = 120
_ORDINAL_SUFFIXES = ("st", "nd", "rd", "th")


@dataclass(frozen=True)
class Word:
    text: str  # lower case, edge punctuation stripped
    start: int  # offsets of the raw word in the query
    end: int
    ends_clause: bool  # the raw word ended with , . ; : ! or ?


@dataclass(frozen=True)
class TimeWindow:
    """[start, end) on a memory's time; either side may be open (None)."""

    start: datetime | None
    end: datetime | None
    expression: str  # the words of the query it came from
    anchor_query: str | None = None  # for "before <event>": the event's words, resolved to a time by search
    boundary: str | None = None  # before | after | since | until, for an event window

    def contains(self, moment: datetime) -> bool:
        return (self.start is None or moment >= self.start) and (self.end is None or moment < self.end)

    def trace(self, *, anchor_id: str | None = None) -> dict[str, Any]:
        return {
            "expression": self.expression,
            "start": self.start,
            "end": self.end,
            "anchorMemoryId": anchor_id,
        }


@dataclass(frozen=True)
class TimeQuery:
    """A query split into its text (what the ranking matches) and the window its time expression names.
    `rejected`: an expression that read like time but is not a point in it, and why (no window)."""

    text: str
    window: TimeWindow | None
    rejected: tuple[str, str] | None = None


def _words(query: str) -> list[Word]:
    words: list[Word] = []
    index, length = 0, len(query)
    while index < length and len(words) < MAX_WORDS:
        while index < length and query[index].isspace():
            index += 1
        start = index
        while index < length and not query[index].isspace():
            index += 1
        if start == index:
            break
        raw = query[start:index]
        words.append(Word(raw.strip(_EDGE_PUNCTUATION).lower(), start, index, raw[-1] in ",.;:!?"))
    return words


def _is_year(text: str) -> bool:
    return len(text) == 4 and text.isdigit() and 1900 <= int(text) <= 2099


def _is_day(text: str) -> bool:
    if text.endswith(_ORDINAL_SUFFIXES) and text[:-2].isdigit():
        text = text[:-2]
    return text.isdigit() and 1 <= len(text) <= 2 and 1 <= int(text) <= 31


def _is_iso_date(text: str) -> bool:
    parts = text.split("-")
    return (
        len(parts) == 3
        and _is_year(parts[0])
        and all(part.isdigit() and 1 <= len(part) <= 2 for part in parts[1:])
    )


def has_time_cue(query: str) -> bool:
    """The cheap first check: does any word look temporal at all (a month name, a year, yesterday, ago, last
    week, before, …)? Most queries stop here, without parsing."""
    for word in _words(query):
        text = word.text
        if (
            text in MONTHS
            or text in DAYS_NAMED
            or text in UNITS
            or text in BOUNDARIES
            or text == "ago"
            or _is_year(text)
            or _is_iso_date(text)
        ):
            return True
    return False


def _anchors(text: str) -> bool:
    """A word that pins an expression to a point in time (what a bare "two weeks" lacks)."""
    return (
        text in MONTHS
        or text in DAYS_NAMED
        or text in MODIFIERS
        or text == "ago"
        or _is_year(text)
        or _is_iso_date(text)
    )


def _core(words: list[Word], index: int) -> bool:
    """Whether words[index] belongs to a time expression, judged with its neighbours."""
    text = words[index].text
    before = words[index - 1].text if index > 0 else ""
    after = words[index + 1].text if index + 1 < len(words) else ""
    if text in DAYS_NAMED or text == "ago" or _is_year(text) or _is_iso_date(text):
        return True
    if text in MONTHS:
        if text not in AMBIGUOUS_MONTHS:
            return True
        return (
            before in PREPOSITIONS
            or before in BOUNDARIES
            or before in ("early", "late", "mid")
            or _is_day(before)
            or _is_day(after)
            or _is_year(after)
        )
    if text in UNITS:
        return before in MODIFIERS or before in NUMBER_WORDS or _is_day(before) or after == "ago"
    if text in MODIFIERS:
        return after in UNITS or after in MONTHS
    if text in NUMBER_WORDS or _is_day(text):
        # "3 days ago", "two weeks ago", "3 June", "June 3", "the 3rd of May"
        return (
            after in UNITS
            or after in MONTHS
            or before in MONTHS
            or (after == "of" and index + 2 < len(words) and words[index + 2].text in MONTHS)
        )
    return False


@dataclass(frozen=True)
class _Span:
    first: int  # word indexes, inclusive
    last: int
    boundary: str | None  # before | after | since | until
    length: timedelta | None = (
        None  # "the week before X", "two days after X": how far from X the window reaches
    )


def _spans(words: list[Word]) -> list[_Span]:
    """Maximal runs of time words ("of", "the" and commas may join them), each with the preposition or
    boundary word right before it."""
    spans: list[_Span] = []
    index = 0
    while index < len(words):
        if not _core(words, index):
            index += 1
            continue
        first = last = index
        probe = index + 1
        while probe < len(words):
            if _core(words, probe):
                last = probe
            elif words[probe].text in ("of", "the") and probe + 1 < len(words) and _core(words, probe + 1):
                pass
            else:
                break
            probe += 1
        if not any(_anchors(words[position].text) for position in range(first, last + 1)):
            # "two weeks", "the week": a length of time, not a point in it ("two weeks before May 3").
            index = last + 1
            continue
        boundary, length = None, None
        if first > 0 and words[first - 1].text in BOUNDARIES:
            boundary = words[first - 1].text
            first -= 1
            first, length = _length_before(words, first)
        elif first > 0 and words[first - 1].text in PREPOSITIONS:
            first -= 1
            if first > 0 and words[first - 1].text in BOUNDARIES:  # "since in" is rare, but "until on" …
                boundary = words[first - 1].text
                first -= 1
        spans.append(_Span(first, last, boundary, length))
        index = last + 1
    return spans


_UNIT_DAYS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "weekend": 7, "month": 31, "months": 31,
              "year": 366, "years": 366}  # fmt: skip
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "couple": 2, "three": 3, "few": 3, "four": 4, "five": 5,
           "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}  # fmt: skip


def _length_before(words: list[Word], boundary: int) -> tuple[int, timedelta | None]:
    """ "the week before" / "two days after": the unit (and count) right before the boundary word at
    `boundary`, as a length, and where the span then starts."""
    unit = boundary - 1
    if unit < 0 or words[unit].text not in _UNIT_DAYS:
        return boundary, None
    count, first = 1, unit
    before = words[unit - 1].text if unit > 0 else ""
    if before in _COUNTS or (before.isdigit() and len(before) <= 2):
        count, first = (_COUNTS[before] if before in _COUNTS else int(before)), unit - 1
    return first, timedelta(days=_UNIT_DAYS[words[unit].text] * max(count, 1))


def _event_span(words: list[Word]) -> tuple[int, int, str] | None:
    """The boundary word of "before the migration", then an event of at most EVENT_MAX_WORDS words up to
    the end of the clause. Only when the event opens with a determiner or a pronoun: "before deploying" is a
    step, not a point in time."""
    for index, word in enumerate(words[:-1]):
        if word.text not in BOUNDARIES or words[index + 1].text not in EVENT_OPENERS or word.ends_clause:
            continue
        last = index + 1
        while last + 1 < len(words) and last - index < EVENT_MAX_WORDS and not words[last].ends_clause:
            last += 1
        return index, last, word.text
    return None


@functools.lru_cache(maxsize=1024)
def _parse_span(text: str, today: date) -> tuple[datetime, str] | None:
    """(moment, period) of a short time phrase ("may 3, 2023", "last week", "2 weeks ago") relative to noon of
    `today`; period is day, week, month or year. Remembered per phrase and day: dateparser costs ~0.7 ms per
    phrase on the bench machine."""
    from dateparser.date import DateDataParser

    parser = DateDataParser(
        languages=["en"],
        settings={
            "PREFER_DATES_FROM": "past",
            "RELATIVE_BASE": datetime(today.year, today.month, today.day, 12, 0),
            "RETURN_AS_TIMEZONE_AWARE": False,
        },
    )
    try:
        data = parser.get_date_data(text)
    except (ValueError, OverflowError, TypeError):  # "on 31 february 2023", a year past 9999: no window
        return None
    if data is None or data.date_obj is None:
        return None
    return data.date_obj, data.period or "day"


def _period_window(moment: datetime, period: str) -> tuple[datetime, datetime]:
    day = datetime(moment.year, moment.month, moment.day, tzinfo=UTC)
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if period == "month":
        start = day.replace(day=1)
        following = (
            start.replace(year=start.year + 1, month=1)
            if start.month == 12
            else start.replace(month=start.month + 1)
        )
        return start, following
    if period == "year":
        start = day.replace(month=1, day=1)
        return start, start.replace(year=start.year + 1)
    return day, day + timedelta(days=1)


def _bounded(
    boundary: str | None, start: datetime, end: datetime, length: timedelta | None = None
) -> tuple[datetime | None, datetime | None]:
    """The window a boundary word makes of a period: open on one side, or `length` long ("the week
    before")."""
    if boundary == "before":
        return (start - length if length else None), start
    if boundary == "until":
        return (end - length if length else None), end
    if boundary == "after":
        return end, (end + length if length else None)
    if boundary == "since":
        return start, (start + length if length else None)
    return start, end


def _without(query: str, words: list[Word], first: int, last: int) -> str:
    """The query without words[first..last]; the whole query when nothing searchable would be left."""
    rest = " ".join((query[: words[first].start] + " " + query[words[last].end :]).split())
    return rest if any(character.isalnum() for character in rest) else query


def time_query(query: str, *, now: datetime) -> TimeQuery:
    """Split `query` into its text and the window of its first time expression (relative ones count from
    `now`). No expression: the query unchanged and no window."""
    if not has_time_cue(query):
        return TimeQuery(query, None)
    words = _words(query)
    for span in _spans(words):
        core = span.first
        while core < span.last and (
            words[core].text in BOUNDARIES
            or words[core].text in PREPOSITIONS
            or words[core].text in _UNIT_DAYS
            or words[core].text in _COUNTS
            or (span.length is not None and words[core].text.isdigit() and core < span.last - 1)
        ):
            core += 1
        phrase = " ".join(word.text for word in words[core : span.last + 1])
        if len(phrase) > MAX_SPAN_CHARS:
            continue
        parsed = _parse_span(phrase, now.date())
        if parsed is None:
            continue
        start, end = _period_window(*parsed)
        low, high = _bounded(span.boundary, start, end, span.length)
        expression = " ".join(word.text for word in words[span.first : span.last + 1])
        return TimeQuery(_without(query, words, span.first, span.last), TimeWindow(low, high, expression))
    event = _event_span(words)
    if event is not None:
        first, last, boundary = event
        anchor = " ".join(word.text for word in words[first + 1 : last + 1])
        expression = " ".join(word.text for word in words[first : last + 1])
        rejection = event_rejection(words, first)
        if rejection is not None:
            return TimeQuery(query, None, rejected=(expression, rejection))
        # The event's words stay in the text: they are what the question is about ("how did she feel after
        # the accident"); only the boundary word goes.
        return TimeQuery(
            _without(query, words, first, first),
            TimeWindow(None, None, expression, anchor_query=anchor, boundary=boundary),
        )
    return TimeQuery(query, None)


def _looks_past(word: str) -> bool:
    return word in IRREGULAR_PAST or (len(word) > 3 and word.endswith("ed"))


def event_rejection(words: list[Word], boundary: int) -> str | None:
    """Why the event after words[boundary] ("before the migration") is not a point in time, or None when it
    may be one: indefinite_event ("before a release"), habitual_clause ("before I push", present tense),
    procedural_question ("what should I check before the migration")."""
    opener = words[boundary + 1].text
    if opener in INDEFINITE_OPENERS:
        return "indefinite_event"
    if opener in PRONOUN_OPENERS:
        verb = words[boundary + 2].text if boundary + 2 < len(words) else ""
        if not _looks_past(verb):
            return "habitual_clause"
    texts = [word.text for word in words]
    if any(text in PROCEDURAL_WORDS for text in texts) or any(
        pair in PROCEDURAL_PAIRS for pair in zip(texts, texts[1:], strict=False)
    ):
        return "procedural_question"
    return None


def event_matches(anchor_query: str, content: str) -> bool:
    """Whether a memory tells of the event: it holds every word of the event's description (its opener and
    short words aside; a word matches on its first five letters, so "migrated" tells of "the migration")."""
    wanted = [
        word.text
        for word in _words(anchor_query)
        if word.text not in EVENT_OPENERS and len(word.text) > 2 and word.text not in ("and", "for", "with")
    ]
    if not wanted:
        return False
    held = {word.text[:5] for word in _words(content[:4000])}
    return all(word[:5] in held for word in wanted)


def anchored(window: TimeWindow, moment: datetime) -> TimeWindow:
    """An event window once its event is found: before / until it, or after / since it."""
    if window.boundary in ("before", "until"):
        return TimeWindow(None, moment, window.expression, window.anchor_query, window.boundary)
    return TimeWindow(moment, None, window.expression, window.anchor_query, window.boundary)


# The memories of a window, newest first: those written in it (on createdAt, memories_ws_recent serves it)
# that are not turns, and the conversation turns said in it (on saidAt, memories_ws_said_at), whenever they
# were stored. A memory whose time is a metadata.sessionTime is boosted when the ranking finds it, but joins
# the candidates this way only when it was also written in the window.
_IN_WINDOW_SQL = """
SELECT * FROM (
    (SELECT {columns} FROM memories m
     WHERE {readable} AND m.created_at >= %(window_start)s AND m.created_at < %(window_end)s
       AND m.said_at IS NULL {extra}
     ORDER BY m.created_at DESC, m.id DESC LIMIT %(window_limit)s)
    UNION ALL
    (SELECT {columns} FROM memories m
     WHERE {readable} AND m.said_at >= %(window_start)s AND m.said_at < %(window_end)s {extra}
     ORDER BY m.said_at DESC, m.id DESC LIMIT %(window_limit)s)
) w
ORDER BY coalesce(w.said_at, w.created_at) DESC, w.id DESC
LIMIT %(window_limit)s
"""


def memories_in_window(
    *,
    workspace_id: int,
    scope: MemoryScope,
    window: TimeWindow,
    type: str | None,
    layers: list[str] | None,
    limit: int,
) -> list[Memory]:
    params: dict[str, Any] = {
        "workspace_id": workspace_id,
        "window_start": window.start or datetime.min.replace(tzinfo=UTC),
        "window_end": window.end or datetime.max.replace(tzinfo=UTC),
        "window_limit": limit,
    }
    extra = selectors.type_layer_sql(params, type=type, layer=None)
    if layers:
        params["window_layers"] = list(layers)
        extra += " AND m.layer = ANY(%(window_layers)s::text[])"
    sql = _IN_WINDOW_SQL.format(
        columns=selectors.MEMORY_COLUMNS, readable=selectors.read_rule(scope, params).sql(), extra=extra
    )
    return selectors.memories_from_sql(sql, params)
