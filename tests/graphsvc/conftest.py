"""A fake OpenAI-compatible chat server for LLM extraction tests: litellm talks to it over real HTTP.

Answers are scripted per purpose (recognised from the system prompt): tests set `fake_llm.answers[purpose]` to
a dict, a list of dicts (one per call, the last repeating), a raw string (malformed output) or a callable
taking the user prompt. `fake_llm.fail[purpose]` = (status, body) answers with an error instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.helpers.fake_openai import FakeProvider

PURPOSE_MARKERS = {
    "pairwise": "how two notes stored by an AI agent relate",
    "semantic": "typed relationships between a new note",
    "entity_extraction": "extract entities and facts",
    "entity_disambiguation": "same real-world thing",
    "community_summary": "summarize a group of related entities",
}


def purpose_of(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    for purpose, marker in PURPOSE_MARKERS.items():
        if marker in system:
            return purpose
    raise AssertionError(f"unknown prompt: {system[:80]}")


@dataclass
class FakeLlm:
    provider: FakeProvider
    answers: dict[str, Any] = field(default_factory=dict)
    fail: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    delay: dict[str, float] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def calls_for(self, purpose: str) -> list[str]:
        return [user for p, user in self.calls if p == purpose]

    def _answer(self, body: dict[str, Any]) -> str:
        purpose = purpose_of(body)
        user = body["messages"][1]["content"]
        script = self.answers.get(
            purpose,
            {"entities": [], "facts": []}
            if purpose == "entity_extraction"
            else {"edges": []}
            if purpose == "semantic"
            else {"same_entity": False}
            if purpose == "entity_disambiguation"
            else {"relationship": "unrelated", "confidence": 0.9, "explanation": "-", "evidence": ""},
        )
        if isinstance(script, list):
            index = min(len(self.calls_for(purpose)) - 1, len(script) - 1)
            script = script[index]
        if callable(script):
            script = script(user)
        return script if isinstance(script, str) else json.dumps(script)

    def _before(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        if not path.endswith("/chat/completions"):
            return None
        purpose = purpose_of(body)
        self.calls.append((purpose, body["messages"][1]["content"]))
        if purpose in self.delay:
            time.sleep(self.delay[purpose])
        return self.fail.get(purpose)


@pytest.fixture
def fake_llm(settings) -> Any:
    provider = FakeProvider()
    fake = FakeLlm(provider=provider)
    provider.chat_answer = fake._answer
    provider.before_answer = fake._before
    url = provider.start()
    settings.GRAPH_LLM_MODEL = "openai/cairn-test-model"
    settings.GRAPH_LLM_API_BASE = url
    settings.GRAPH_LLM_API_KEY = "test-key"
    settings.GRAPH_LLM_MAX_RETRIES = 0
    settings.GRAPH_LLM_TIMEOUT_SECONDS = 5
    yield fake
    provider.stop()


def script_for(mapping: dict[str, Any]) -> Callable[[str], Any]:
    """An answer chosen by a substring of the user prompt (first match wins)."""

    def answer(user: str) -> Any:
        # Match the note being processed, not the earlier notes shown as context.
        if "Note to extract from:" in user:
            user = user.split("Note to extract from:", 1)[1]
        elif "Earlier notes:" in user:
            user = user.split("Earlier notes:", 1)[0]
        for needle, value in mapping.items():
            if needle in user:
                return value
        return mapping.get("*", {})

    return answer
