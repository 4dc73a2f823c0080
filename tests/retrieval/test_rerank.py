"""The optional reranker: off by default; configured by the operator, it reorders the final candidates of
memories/search and context/get through litellm's rerank API (here against a local Cohere-style server),
with the operator's key only, and keeps the fused order when it is slow or fails. The trace says whether it
ran and how long it took."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.helpers.fake_openai import FakeProvider
from tests.memories.helpers import ids

QUERY = "which database do we run in production"


@pytest.fixture
def reranker(settings) -> Iterator[FakeProvider]:
    provider = FakeProvider()
    base = provider.start()
    settings.RERANK_MODEL = "cohere/rerank-english-v3.0"
    settings.RERANK_API_BASE = base.removesuffix("/v1")
    settings.RERANK_API_KEY = "operator-rerank-key"
    settings.RERANK_TIMEOUT_SECONDS = 2.0
    yield provider
    provider.stop()


@pytest.fixture
def memories(alice_api) -> dict[str, str]:
    """Lexical order (no vectors, so the default ranks by words): the chatty note first; the reranker knows
    the short answer is the one that answers."""
    chatty = alice_api.add("database database production production: we talked about which database to run")
    answer = alice_api.add("Postgres 16 on RDS is the production database")
    return {"chatty": chatty["id"], "answer": answer["id"]}


def prefer_answers(query: str, document: str) -> float:
    return 0.9 if document.startswith("Postgres") else 0.1


def test_it_is_off_unless_the_operator_configures_it(alice_api, memories):
    data = alice_api.ok("memories/search", {"query": QUERY})
    assert data["trace"]["reranker"] is None
    assert ids(data["memories"]) == [memories["chatty"], memories["answer"]]


def test_it_reorders_search_and_context_with_the_operators_key(alice_api, memories, reranker, monkeypatch):
    monkeypatch.setenv("COHERE_API_KEY", "someone-elses-key")
    reranker.rerank_score = prefer_answers
    data = alice_api.ok("memories/search", {"query": QUERY})
    assert ids(data["memories"]) == [memories["answer"], memories["chatty"]]
    trace = data["trace"]["reranker"]
    assert trace["model"] == "cohere/rerank-english-v3.0" and trace["ran"] is True
    assert trace["candidates"] == 2 and trace["fallbackReason"] is None and trace["durationMs"] > 0
    context = alice_api.ok("context/get", {"query": QUERY, "includeRules": False})
    assert ids(context["memories"])[:2] == [memories["answer"], memories["chatty"]]
    assert context["trace"]["reranker"]["ran"] is True
    calls = [request for request in reranker.requests if request["path"].endswith("/rerank")]
    assert len(calls) == 2  # one per call: context/get sends both tiers' candidates at once
    assert {call["authorization"] for call in calls} == {"Bearer operator-rerank-key"}
    assert calls[0]["body"]["query"] == QUERY and len(calls[0]["body"]["documents"]) == 2


def test_it_never_falls_back_to_keys_in_the_environment(alice_api, memories, reranker, monkeypatch, settings):
    settings.RERANK_API_KEY = ""
    monkeypatch.setenv("COHERE_API_KEY", "someone-elses-key")
    alice_api.ok("memories/search", {"query": QUERY})
    sent = [request["authorization"] for request in reranker.requests]
    assert sent and all("someone-elses-key" not in (value or "") for value in sent)


def test_it_keeps_the_fused_order_when_the_reranker_is_slow(alice_api, memories, reranker, settings):
    settings.RERANK_TIMEOUT_SECONDS = 0.3
    release = threading.Event()
    reranker.rerank_score = prefer_answers

    def hold(path: str, body: dict) -> None:
        release.wait(5)

    reranker.before_answer = hold
    started = time.monotonic()
    try:
        data = alice_api.ok("memories/search", {"query": QUERY})
    finally:
        release.set()
    assert time.monotonic() - started < 3
    assert ids(data["memories"]) == [memories["chatty"], memories["answer"]]
    trace = data["trace"]["reranker"]
    assert trace["ran"] is False and trace["fallbackReason"] == "rerank_timeout"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ((500, {"message": "overloaded"}), "rerank_error"),
        ((200, {"id": "x", "results": [{"index": 7, "relevance_score": 0.5}]}), "rerank_invalid_answer"),
    ],
)
def test_it_keeps_the_fused_order_when_the_reranker_fails(alice_api, memories, reranker, answer, reason):
    reranker.before_answer = lambda path, body: answer
    data = alice_api.ok("memories/search", {"query": QUERY})
    assert ids(data["memories"]) == [memories["chatty"], memories["answer"]]
    assert data["trace"]["reranker"]["ran"] is False
    assert data["trace"]["reranker"]["fallbackReason"] == reason


def test_it_sends_the_reranker_memory_text_scrubbed_as_llm_prompts_are(alice_api, memories, reranker):
    alice_api.add(
        "production database password rotation: deploy with sk-proj-4fJ2kQ9xZt7LmN3pR8sV1wY6bC0dE5gH"
    )
    alice_api.ok("memories/search", {"query": QUERY + " sk-A1b2C3d4E5f6G7h8I9j0K1l2M3n4"})
    calls = [request for request in reranker.requests if request["path"].endswith("/rerank")]
    assert calls and len(calls[0]["body"]["documents"]) == 3
    sent = " ".join(calls[0]["body"]["documents"]) + calls[0]["body"]["query"]
    assert "sk-proj-4fJ2" not in sent and "sk-A1b2" not in sent
    assert "deploy with" in sent  # the rest of the text is there: only the key was replaced
