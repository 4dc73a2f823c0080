"""Credential scrubbing: secrets in memory text become typed placeholders like `[REDACTED:openai_key]`.

Applied to everything sent to an LLM (graphsvc.llm) and to context text (memories.context); to stored content only
when the workspace turns on "scrub at rest". The patterns favour precision: each one wants a provider's
prefix, a fixed shape or an assignment, so prose about keys and passwords ("rotate the API key", "sk-learn",
a git SHA, a UUID) survives. Placeholders match no pattern, so scrubbing twice changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

PLACEHOLDER = "[REDACTED:{kind}]"


def placeholder(kind: str) -> str:
    return PLACEHOLDER.format(kind=kind)


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    # Rewrites one match; the default replaces the whole match with the placeholder.
    replace: Callable[[re.Match[str]], str] | None = None


def _keep_prefix(kind: str) -> Callable[[re.Match[str]], str]:
    """Keep group 1 (a label such as `Bearer ` or `password=`) so the text still reads, and hide the value."""

    def replace(match: re.Match[str]) -> str:
        return match.group(1) + placeholder(kind)

    return replace


# Values of `password = …` that are references to a secret, not the secret itself: keep them.
_REFERENCE_VALUE = re.compile(
    r"^(?:os\.environ|os\.getenv|process\.env|env\(|getenv|settings\.|config\.|\$|<|\{\{|%\(|\[REDACTED)",
    re.IGNORECASE,
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


def _assignment(match: re.Match[str]) -> str:
    value = match.group(3)
    bare = value.strip("\"'")
    if (
        _REFERENCE_VALUE.match(bare)
        or bare.lower() in _PLACEHOLDER_VALUES
        or set(bare) <= {"*", "x", "X", "."}
    ):
        return match.group(0)
    return (
        match.group(1)
        + match.group(2)
        + placeholder(
            "password" if "pass" in match.group(1).lower() or "pwd" in match.group(1).lower() else "secret"
        )
    )


# Order matters: specific provider shapes first, so a key inside an assignment gets its own type.
_RULES: tuple[_Rule, ...] = (
    _Rule(
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"|\Z)",
            re.DOTALL,
        ),
    ),
    _Rule("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    _Rule("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    _Rule("stripe_key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    _Rule("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    _Rule("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    _Rule("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    _Rule("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    _Rule("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    _Rule("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    _Rule("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    # `Bearer <token>`: a token is long and has a digit; "bearer of bad news" has neither.
    _Rule(
        "bearer_token",
        re.compile(r"(\b[Bb]earer\s+)(?=[A-Za-z0-9._~+/\-]*\d)[A-Za-z0-9._~+/\-]{16,}=*"),
        _keep_prefix("bearer_token"),
    ),
    # scheme://user:password@host — the user name stays, the password goes.
    _Rule(
        "url_password",
        re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:)(?!\[REDACTED)[^\s@/]+(?=@)"),
        _keep_prefix("url_password"),
    ),
    # password=…, "api_key": "…", secret: … (the label stays; references such as os.environ[...] survive).
    _Rule(
        "secret",
        re.compile(
            r"""(?i)(\b(?:password|passwd|pwd|passphrase|secret|client[_\-]?secret|secret[_\-]?key|api[_\-]?key|"""
            r"""access[_\-]?key|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|private[_\-]?key|token)\b["']?)"""
            r"""(\s*(?:=|:|=>)\s*)("[^"\s]{6,}"|'[^'\s]{6,}'|[^\s"',;]{6,})"""
        ),
        _assignment,
    ),
)


def scrub_secrets(text: str) -> str:
    """`text` with every secret replaced by its typed placeholder."""
    for rule in _RULES:
        text = rule.pattern.sub(rule.replace or (lambda _m, kind=rule.kind: placeholder(kind)), text)
    return text


def secret_kinds(text: str) -> list[str]:
    """Which kinds of secret `text` holds (for tests and diagnostics), in rule order, without duplicates."""
    scrubbed = scrub_secrets(text)
    return list(dict.fromkeys(re.findall(r"\[REDACTED:([a-z_]+)\]", scrubbed)))
