"""The summary model of sessions/end and skills/files/promote: the local fake OpenAI server over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.fake_openai import FakeProvider


@pytest.fixture
def summary_model(settings):
    """The summary model behind the local fake OpenAI server; `answers` scripts what it says."""
    provider = FakeProvider()
    answers: dict[str, Any] = {
        "summary": {"summary": "Dana and Lee agreed to move billing to the new queue."}
    }

    def answer(body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        if "summarise a recorded conversation" in system:
            return json.dumps(answers["summary"])
        if "reusable procedure" in system:
            return json.dumps(answers.get("steps", {"steps": []}))
        return json.dumps({"entities": [], "facts": []})

    provider.chat_answer = answer
    url = provider.start()
    settings.GRAPH_LLM_MODEL = "openai/cairn-test-model"
    settings.GRAPH_LLM_API_BASE = url
    settings.GRAPH_LLM_API_KEY = "test-key"
    settings.GRAPH_LLM_MAX_RETRIES = 0
    settings.GRAPH_LLM_TIMEOUT_SECONDS = 5
    yield provider, answers
    provider.stop()
