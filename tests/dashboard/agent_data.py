"""The 300 memories of a coding agent (memories/fixtures/agent-memories-300.jsonl) loaded the way an agent
writes them: memories/add bodies through the real pipeline (mapping, embeddings, similarity), and LLM
extraction for the update pairs answered by a scripted fake model (contradicts, supersedes, a condition,
entities and facts that replace earlier ones). Used by the browser tests, the demo screenshots and
bench/explorer_render.py (which scales the set up with `copies`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.test import override_settings

FIXTURE = Path(__file__).resolve().parents[2] / "memories" / "fixtures" / "agent-memories-300.jsonl"

# (older note, newer note, relationship, explanation, quote from the newer note). Matched in the classifier's
# prompt only in that order (note A older, note B newer), so the older memory's own job sees "unrelated".
PAIRS = [
    (
        "every Friday afternoon with a blue-green deploy",
        "moved production deploys from Friday to Tuesday",
        "contradicts",
        "Note A says the api deploys on Fridays; note B says production deploys moved to Tuesday.",
        "moved production deploys from Friday to Tuesday",
    ),
    (
        "API pagination uses offset and limit.",
        "moved from offset to cursor-based",
        "refines",
        "B replaces offset pagination with cursors and deprecates offset.",
        "moved from offset to cursor-based",
    ),
    (
        "refreshed from prod every Sunday night",
        "Staging refresh moved from Sunday to Wednesday",
        "refines",
        "The staging refresh moved from Sunday to Wednesday night.",
        "moved from Sunday to Wednesday night",
    ),
    (
        "Use Moment.js for date formatting",
        "Moment.js was replaced by date-fns",
        "contradicts",
        "A says to use Moment.js; B says Moment.js was replaced and must not be imported.",
        "do not add new Moment imports",
    ),
    (
        "Emails are sent with SendGrid.",
        "switched email from SendGrid to Postmark",
        "refines",
        "Email moved from SendGrid to Postmark.",
        "switched email from SendGrid to Postmark",
    ),
    (
        "Marcus prefers CSS modules over Tailwind",
        "does not prefer CSS modules anymore",
        "contradicts",
        "Marcus's preference flipped from CSS modules to Tailwind.",
        "does not prefer CSS modules anymore",
    ),
]
# What the entity extractor answers per note (matched on the note being extracted from).
EXTRACTIONS: dict[str, dict[str, Any]] = {
    "every Friday afternoon with a blue-green deploy": {
        "entities": [
            {"name": "api", "type": "project", "summary": "The backend service"},
            {"name": "Friday", "type": "event", "summary": None},
        ],
        "facts": [
            {
                "source": "api",
                "target": "Friday",
                "relation": "deploys_on",
                "fact": "The api deploys to production on Fridays.",
                "edge_class": "temporal",
                "confidence": 0.9,
                "temporal_hint": None,
                "valid_from": "2025-01-06",
                "replaces_previous": False,
            }
        ],
    },
    "moved production deploys from Friday to Tuesday": {
        "entities": [
            {"name": "Lena", "type": "person", "summary": "SRE lead who owns deploys"},
            {"name": "api", "type": "project", "summary": "The backend service"},
            {"name": "Tuesday", "type": "event", "summary": None},
        ],
        "facts": [
            {
                "source": "api",
                "target": "Tuesday",
                "relation": "deploys_on",
                "fact": "The api deploys to production on Tuesdays.",
                "edge_class": "temporal",
                "confidence": 0.95,
                "temporal_hint": None,
                "valid_from": "2025-03-03",
                "replaces_previous": True,
            },
            {
                "source": "Lena",
                "target": "api",
                "relation": "owns_deploys_of",
                "fact": "Lena owns the production deploys of the api.",
                "edge_class": "entity",
                "confidence": 0.85,
                "temporal_hint": None,
                "valid_from": None,
                "replaces_previous": False,
            },
        ],
    },
    "Emails are sent with SendGrid.": {
        "entities": [
            {"name": "api", "type": "project", "summary": "The backend service"},
            {"name": "SendGrid", "type": "tool", "summary": "E-mail delivery service"},
        ],
        "facts": [
            {
                "source": "api",
                "target": "SendGrid",
                "relation": "sends_email_with",
                "fact": "The api sends e-mail with SendGrid.",
                "edge_class": "entity",
                "confidence": 0.9,
                "temporal_hint": None,
                "valid_from": "2024-11-01",
                "replaces_previous": False,
            }
        ],
    },
    "switched email from SendGrid to Postmark": {
        "entities": [
            {"name": "api", "type": "project", "summary": "The backend service"},
            {"name": "Postmark", "type": "tool", "summary": "E-mail delivery service"},
        ],
        "facts": [
            {
                "source": "api",
                "target": "Postmark",
                "relation": "sends_email_with",
                "fact": "The api sends e-mail with Postmark.",
                "edge_class": "entity",
                "confidence": 0.95,
                "temporal_hint": None,
                "valid_from": "2025-02-10",
                "replaces_previous": True,
            }
        ],
    },
}
CONDITIONS = {
    "During the December holiday freeze": ("conditional_on", "time:holiday_freeze"),
}
# A semantic relationship between memories: (new note, earlier note it is caused by).
CAUSES = {"Code freeze now starts Monday noon": "moved production deploys from Friday to Tuesday"}


def llm_notes() -> list[str]:
    """The notes that go through LLM extraction (both sides of each pair, and the extraction notes)."""
    notes = [text for pair in PAIRS for text in pair[:2]]
    return list(dict.fromkeys([*notes, *EXTRACTIONS, *CONDITIONS, *CAUSES]))


FIRST_COPY = 300


def agent_memories(copies: int = 1) -> list[dict[str, Any]]:
    """memories/add bodies: the fixture, and for copies > 1 variants of it from other teams (their own repos,
    the same tags), so a bigger workspace has the same shape."""
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    bodies = [dict(row) for row in rows]
    for copy in range(1, copies):
        for row in rows:
            body = json.loads(json.dumps(row))
            body["content"] = f"Team {copy + 1}: {row['content']}"
            scope = body.get("scope") or {}
            if scope.get("projectId"):
                scope["projectId"] = f"{scope['projectId']}-{copy + 1}"
            bodies.append(body)
    return bodies


def _pairwise(user: str) -> dict[str, Any]:
    for older, newer, relationship, explanation, evidence in PAIRS:
        a, b = user.find(older), user.find(newer)
        if a != -1 and b != -1 and a < b:
            return {
                "relationship": relationship,
                "confidence": 0.9,
                "explanation": explanation,
                "evidence": evidence,
            }
    return {
        "relationship": "unrelated",
        "confidence": 0.9,
        "explanation": "different subjects",
        "evidence": "",
    }


def _semantic(user: str) -> dict[str, Any]:
    new = user.split("Earlier notes:", 1)[0]
    for needle, (edge_type, condition) in CONDITIONS.items():
        if needle in new:
            return {
                "edges": [
                    {
                        "type": edge_type,
                        "target_memory_index": None,
                        "condition_key": condition,
                        "direction": "from_new",
                        "confidence": 0.8,
                        "evidence": "During the December holiday freeze",
                    }
                ]
            }
    for needle, cause in CAUSES.items():
        if needle not in new:
            continue
        earlier = user.split("Earlier notes:", 1)[1]
        for line in earlier.splitlines():
            found = re.match(r"(\d+)\. ", line)
            if found and cause in line:
                return {
                    "edges": [
                        {
                            "type": "caused_by",
                            "target_memory_index": int(found.group(1)),
                            "condition_key": None,
                            "direction": "from_new",
                            "confidence": 0.85,
                            "evidence": "since releases moved to Tuesday",
                        }
                    ]
                }
    return {"edges": []}


def _extraction(user: str) -> dict[str, Any]:
    note = user.split("Note to extract from:", 1)[-1]
    for needle, answer in EXTRACTIONS.items():
        if needle in note:
            return answer
    return {"entities": [], "facts": []}


def llm_answers() -> dict[str, Callable[[str], dict[str, Any]]]:
    """The fake model's scripts per purpose (tests/graphsvc/conftest.py FakeLlm.answers)."""
    return {"pairwise": _pairwise, "semantic": _semantic, "entity_extraction": _extraction}


@contextmanager
def fake_llm_server() -> Iterator[str]:
    """A fake OpenAI-compatible chat server answering with llm_answers(); yields its base URL."""
    from tests.graphsvc.conftest import FakeLlm
    from tests.helpers.fake_openai import FakeProvider

    provider = FakeProvider()
    fake = FakeLlm(provider=provider, answers=dict(llm_answers()))
    provider.chat_answer = fake._answer
    provider.before_answer = fake._before
    url = provider.start()
    try:
        yield url
    finally:
        provider.stop()


def load(
    *,
    workspace_id: int,
    add: Callable[[dict[str, Any]], dict[str, Any]],
    copies: int = 1,
    llm: bool = True,
) -> dict[str, str]:
    """Add the memories with `add` (a memories/add call) and run the pipeline in this process; the LLM notes
    go last, with the fake model on, so their older partners are embedded before they are related. Returns
    content → memory id."""
    from tests.memories.helpers import run_jobs

    bodies = agent_memories(copies)
    special = set(llm_notes())
    # Only the first copy goes through the model: bigger workspaces keep the same few conflicts.
    is_special = [
        i < FIRST_COPY and any(s in body["content"] for s in special) for i, body in enumerate(bodies)
    ]
    ids: dict[str, str] = {}
    for body, late in zip(bodies, is_special, strict=True):
        if not late or not llm:
            ids[body["content"]] = add(body)["id"]
    run_jobs(workspace_id)
    if not llm:
        return ids
    with (
        fake_llm_server() as url,
        override_settings(
            GRAPH_LLM_MODEL="openai/cairn-test-model",
            GRAPH_LLM_API_BASE=url,
            GRAPH_LLM_API_KEY="test-key",
            GRAPH_LLM_MAX_RETRIES=0,
            GRAPH_LLM_TIMEOUT_SECONDS=5,
            GRAPH_LLM_AMBIGUOUS_SIMILARITY_MIN=0.0,
            GRAPH_LLM_AMBIGUOUS_SIMILARITY_MAX=1.0,
            # Every close neighbour is asked about, so an update meets the note it changes.
            GRAPH_LLM_PAIRWISE_MAX_CALLS=20,
        ),
    ):
        # In the order of the file: an older note is embedded (and related) before its update.
        for body, late in zip(bodies, is_special, strict=True):
            if late:
                ids[body["content"]] = add(body)["id"]
                run_jobs(workspace_id)
    return ids
