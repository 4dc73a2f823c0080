"""Repo → workspace routing helpers: the GitHub owner of a projectId picks the org a call lands in."""

from __future__ import annotations

import re

OWNER_PATTERN = re.compile(r"^[a-z\d](?:[a-z\d-]{0,38})$")
MAX_OWNER_MAPPINGS = 50


def normalize_owner(raw: str) -> str:
    """Trim, drop a leading @ and lower-case; raise ValueError when the result is not a valid GitHub owner."""
    owner = raw.strip().removeprefix("@").lower()
    if not OWNER_PATTERN.match(owner):
        raise ValueError(
            f"{raw!r} is not a valid GitHub owner: use 1–39 letters, digits or hyphens, starting with a "
            "letter or digit"
        )
    return owner


def github_owner_from_project(project_id: str | None) -> str | None:
    """`github.com/acme/api`, `https://github.com/acme/api.git` or `git@github.com:acme/api.git` → `acme`."""
    if not project_id:
        return None
    value = project_id.strip().lower()
    value = re.sub(r"^https?://", "", value)
    value = re.sub(r"^git@github\.com:", "github.com/", value)
    value = re.sub(r"\.git$", "", value)
    segments = [segment for segment in value.split("/") if segment]
    if len(segments) < 3 or segments[0] != "github.com":
        return None
    owner = segments[1]
    return owner if OWNER_PATTERN.match(owner) else None
