"""Credential scrubbing: secrets in memory text become typed placeholders like `[REDACTED:openai_key]`.

Applied to everything sent to an LLM (graphsvc.llm) and to context text (retrieval.context); to stored
content only when the workspace turns on "scrub at rest". The patterns favour precision: each one wants a
provider's prefix, a fixed shape or an assignment, so prose about keys and passwords ("rotate the API key",
"sk-learn", a git SHA, a UUID) survives. Placeholders match no pattern, so scrubbing twice changes nothing.

The patterns run on RE2, whose matching time is linear in the text whatever the pattern: with a backtracking
engine, text such as "eyJ-" repeated restarts a long scan at every repeat. RE2 has no look-around, so the
conditions that needed it (a bearer token holds a digit, a URL password is not a placeholder yet) are checked
on the match instead. RE2's word boundaries are ASCII: a key right after a non-ASCII letter ("ésk-…") is
caught too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import re2

PLACEHOLDER = "[REDACTED:{kind}]"

# Python's \s, for use inside a character class: RE2's own \s is ASCII only, and a no-break space pasted from
# a web page between `password` and `=` must not hide the value.
_SPACE = r"\t\n\x0b\f\r\x1c-\x1f\x85\p{Z}"


def placeholder(kind: str) -> str:
    return PLACEHOLDER.format(kind=kind)


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re2._Regexp
    # Rewrites one match; the default replaces the whole match with the placeholder.
    replace: Callable[[re2._Match], str] | None = None

    def rewrite(self, match: re2._Match) -> str:
        return self.replace(match) if self.replace else placeholder(self.kind)


def _compile(pattern: str) -> re2._Regexp:
    # No capture groups: RE2 finds where a match starts and ends with a DFA at a few nanoseconds a byte, but
    # filling in groups takes a second, NFA pass over the match, tens of times slower on a long one. The
    # callbacks below split their match themselves.
    options = re2.Options()
    options.never_capture = True
    return re2.compile(pattern, options)


def _bearer(match: re2._Match) -> str:
    # `Bearer`, spaces, the token.
    text = match.group(0)
    token = text[len("Bearer") :].lstrip()
    if not any(ch.isdigit() for ch in token):
        return text
    return text[: len(text) - len(token)] + placeholder("bearer_token")


def _url_password(match: re2._Match) -> str:
    # scheme://user:password@ — neither the scheme nor the user name holds a `:`.
    text = match.group(0)
    password_start = text.index(":", text.index("://") + 3) + 1
    if text.startswith("[REDACTED", password_start):
        return text
    return text[:password_start] + placeholder("url_password") + "@"


# Values of `password = …` that are references to a secret, not the secret itself: keep them.
_REFERENCE_PREFIXES = (
    "os.environ",
    "os.getenv",
    "process.env",
    "env(",
    "getenv",
    "settings.",
    "config.",
    "$",
    "<",
    "{{",
    "%(",
    "[redacted",
)
_PLACEHOLDER_VALUES = {
    "none",
    "null",
    "true",
    "false",
    "changeme",
    "xxxxxx",
    "******",
    "redacted",
    "required",
    "optional",
    "string",
}


_VALUE_STOPS = "\"',;"


def _split_assignment(text: str) -> tuple[str, str, str]:
    """Label, separator and value of a `secret` match, split where the pattern splits them.

    The label ends at the first quote, space, `=` or `:` and takes a closing quote; spaces around the
    operator are taken whole (no value starts with one). `=>` is the operator only where `=` cannot be: the
    pattern tries `=` first, and its value would then start at the `>` and need six characters, none of them
    a quote, comma, semicolon or space.
    """
    end = 0
    while not (text[end] in "\"'=:" or text[end].isspace()):
        end += 1
    if text[end] in "\"'":
        end += 1
    start = end
    while text[start].isspace():
        start += 1
    if text[start] == "=" and text[start + 1 : start + 2] == ">":
        head = text[start + 1 : start + 7]
        arrow = len(head) < 6 or any(ch in _VALUE_STOPS or ch.isspace() for ch in head)
        start += 2 if arrow else 1
    else:
        start += 1
    while start < len(text) and text[start].isspace():
        start += 1
    return text[:end], text[end:start], text[start:]


def _assignment(match: re2._Match) -> str:
    label, separator, value = _split_assignment(match.group(0))
    bare = value.strip("\"'")
    if (
        bare.lower().startswith(_REFERENCE_PREFIXES)
        or bare.lower() in _PLACEHOLDER_VALUES
        or set(bare) <= {"*", "x", "X", "."}
    ):
        return match.group(0)
    kind = "password" if "pass" in label.lower() or "pwd" in label.lower() else "secret"
    return label + separator + placeholder(kind)


# Order matters: specific provider shapes first, so a key inside an assignment gets its own type.
_RULES: tuple[_Rule, ...] = (
    _Rule(
        "private_key",
        _compile(
            r"(?s)-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)"
        ),
    ),
    _Rule("anthropic_key", _compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    _Rule("openai_key", _compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    _Rule("stripe_key", _compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    _Rule("aws_access_key", _compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    _Rule("github_token", _compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    _Rule("gitlab_token", _compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    _Rule("slack_token", _compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    _Rule("google_api_key", _compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    _Rule("huggingface_token", _compile(r"\bhf_[A-Za-z0-9]{30,}")),
    _Rule("jwt", _compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    # `Bearer <token>`: a token is long and has a digit (_bearer checks); "bearer of bad news" has neither.
    _Rule("bearer_token", _compile(rf"\b[Bb]earer[{_SPACE}]+[A-Za-z0-9._~+/\-]{{16,}}=*"), _bearer),
    # scheme://user:password@host — the user name stays, the password goes.
    _Rule(
        "url_password",
        _compile(rf"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^{_SPACE}:/@]+:[^{_SPACE}@/]+@"),
        _url_password,
    ),
    # password=…, "api_key": "…", secret: … (the label stays; references such as os.environ[...] survive).
    _Rule(
        "secret",
        _compile(
            r"(?i)\b(?:password|passwd|pwd|passphrase|secret|client[_\-]?secret|secret[_\-]?key|"
            r"api[_\-]?key|access[_\-]?key|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|"
            r"private[_\-]?key|token)"
            rf"""\b["']?[{_SPACE}]*(?:=|:|=>)[{_SPACE}]*"""
            rf"""(?:"[^"{_SPACE}]{{6,}}"|'[^'{_SPACE}]{{6,}}'|[^"',;{_SPACE}]{{6,}})"""
        ),
        _assignment,
    ),
)

_PLACEHOLDER_KIND = _compile(r"\[REDACTED:[a-z_]+\]")


def _scrub(text: str) -> str:
    for rule in _RULES:
        text = rule.pattern.sub(rule.rewrite, text)
    return text


def _is_surrogate(ch: str) -> bool:
    return "\ud800" <= ch <= "\udfff"


def scrub_secrets(text: str) -> str:
    """`text` with every secret replaced by its typed placeholder."""
    try:
        return _scrub(text)
    except UnicodeEncodeError:
        # RE2 reads UTF-8, which has no lone surrogates (JSON escapes can make them): scrub around them.
        pieces = []
        for surrogates, chars in itertools.groupby(text, key=_is_surrogate):
            run = "".join(chars)
            pieces.append(run if surrogates else _scrub(run))
        return "".join(pieces)


def secret_kinds(text: str) -> list[str]:
    """Which kinds of secret `text` holds (for tests and diagnostics), in rule order, without duplicates."""
    scrubbed = scrub_secrets(text)
    return list(dict.fromkeys(found[len("[REDACTED:") : -1] for found in _PLACEHOLDER_KIND.findall(scrubbed)))
