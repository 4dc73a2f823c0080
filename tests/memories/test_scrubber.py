"""Credential scrubbing: a table of real-looking secrets (each must become its typed placeholder) and of
look-alikes (each must survive untouched). The secrets are made up; they only have the providers' shapes."""

from __future__ import annotations

import json

import pytest

from graphsvc import llm
from memories.scrubber import scrub_secrets, secret_kinds
from pipeline.services import jobs_run_pending
from tests.conftest import API
from tests.helpers.fake_openai import FakeProvider
from tests.memories.helpers import personal_workspace_id, stored

PEM_BODY = "MIIEowIBAAKCAQEA7bq9" + "x" * 60
SECRETS = [
    ("openai_key", "use sk-proj-4fJ2kQ9xZt7LmN3pR8sV1wY6bC0dE5gH for the bot", "sk-proj-4fJ2"),
    ("openai_key", "OPENAI key is sk-A1b2C3d4E5f6G7h8I9j0K1l2M3n4", "sk-A1b2"),
    ("anthropic_key", "claude: sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0", "sk-ant-api03"),
    ("aws_access_key", "aws creds AKIAIOSFODNN7EXAMPLE in us-east-1", "AKIAIOSFODNN7EXAMPLE"),
    ("github_token", "push with ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5", "ghp_aB3d"),
    ("github_token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv", "github_pat_11"),
    ("gitlab_token", "ci token glpat-xY7zW5vU3tS1rQ9pO7nM", "glpat-xY7"),
    ("slack_token", "slack bot xoxb-123456789012-abcdefGHIJKL", "xoxb-1234"),
    ("stripe_key", "billing uses sk_live_51HqLyjWDarjtT1zdp7dc", "sk_live_51"),
    ("google_api_key", "maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD"),
    ("huggingface_token", "hub token hf_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCb", "hf_Zx9Y"),
    (
        "jwt",
        "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGciOiJIUzI1NiJ9",
    ),
    ("bearer_token", "curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0'", "9f8e7d6c5b4a"),
    ("url_password", "DATABASE_URL=postgres://app:s3cr3t-Pa55@db.internal:5432/app", "s3cr3t-Pa55"),
    ("password", "the staging password = hunter2!x", "hunter2!x"),
    ("password", '{"password": "Tr0ub4dor&3"}', "Tr0ub4dor&3"),
    ("secret", "client_secret: 8a7b6c5d4e3f2a1b", "8a7b6c5d4e3f2a1b"),
    ("private_key", f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----", PEM_BODY),
    ("private_key", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n(cut off)", PEM_BODY),
]

LOOK_ALIKES = [
    "we use sk-learn and scikit-learn for the baseline",
    "the task-runner is called sk-8 internally",
    "rotate the API key every 90 days; the password reset flow emails a link",
    "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed it",
    "request id 550e8400-e29b-41d4-a716-446655440000",
    "see https://github.com/acme/x/blob/main/README.md",
    "connect to postgres://localhost:5432/cairn without a password",
    "ssh://git@github.com:22/acme/x.git",
    "he was the bearer of bad news",
    "the header reads Authorization: Bearer abcdefghijklmnopqrstuvwxyz",
    "password = os.environ['DB_PASSWORD']",
    "api_key: ${OPENAI_API_KEY}",
    "password: None",
    "token: 5",
    "AKIA is the prefix of AWS access key ids",
    "ghp_ tokens start with ghp_",
    "the header starts with eyJ because it is base64 JSON",
    "-----BEGIN PUBLIC KEY----- is fine to share",
    "email alice@example.com about it",
]


@pytest.mark.parametrize(
    ("kind", "text", "secret"), SECRETS, ids=[f"{k}-{i}" for i, (k, *_) in enumerate(SECRETS)]
)
def test_it_replaces_a_secret_by_its_typed_placeholder(kind: str, text: str, secret: str) -> None:
    scrubbed = scrub_secrets(text)
    assert secret not in scrubbed
    assert f"[REDACTED:{kind}]" in scrubbed
    assert secret_kinds(text)[0] == kind


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_it_leaves_look_alikes_alone(text: str) -> None:
    assert scrub_secrets(text) == text


def test_it_keeps_the_label_and_the_surrounding_text() -> None:
    scrubbed = scrub_secrets(
        "deploy with password=hunter2!x then restart; Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0 ok"
    )
    assert (
        scrubbed == "deploy with password=[REDACTED:password] then restart; Bearer [REDACTED:bearer_token] ok"
    )


def test_it_reads_unicode_spaces_as_spaces() -> None:
    scrubbed = scrub_secrets(
        "password\u00a0=\u00a0hunter2!x and Bearer\u00a09f8e7d6c5b4a39281706f5e4d3c2b1a0"
    )
    assert scrubbed == "password\u00a0=\u00a0[REDACTED:password] and Bearer\u00a0[REDACTED:bearer_token]"


def test_it_scrubs_around_lone_surrogates() -> None:
    # JSON escapes can carry them and RE2 reads only UTF-8: the text around them is scrubbed, they stay.
    assert scrub_secrets("\ud800 password = hunter2!x") == "\ud800 password = [REDACTED:password]"


def test_it_is_idempotent() -> None:
    once = scrub_secrets(" ".join(text for _, text, _ in SECRETS))
    assert scrub_secrets(once) == once


# --- wired into what leaves the machine: LLM prompts and context text ---------------------------------------

SECRET_NOTE = "Deploy key for staging is sk-proj-4fJ2kQ9xZt7LmN3pR8sV1wY6bC0dE5gH, use it in CI"


def _chat_answer(body: dict) -> str:
    system = body["messages"][0]["content"]
    if "extract entities and facts" in system:
        return json.dumps({"entities": [], "facts": []})
    if "typed relationships between a new note" in system:
        return json.dumps({"edges": []})
    return json.dumps({"relationship": "unrelated", "confidence": 0.9, "explanation": "-", "evidence": ""})


@pytest.fixture
def fake_provider(settings):
    provider = FakeProvider(chat_answer=_chat_answer)
    url = provider.start()
    settings.GRAPH_LLM_MODEL = "openai/cairn-test-model"
    settings.GRAPH_LLM_API_BASE = url
    settings.GRAPH_LLM_API_KEY = "test-key"
    settings.GRAPH_LLM_MAX_RETRIES = 0
    yield provider
    provider.stop()


def test_it_never_sends_a_secret_to_the_llm(personas, local_embedder, fake_provider):
    workspace_id = personal_workspace_id(personas.alice)
    personas.alice_api.add("Staging deploys run from the CI pipeline on merge")
    memory = personas.alice_api.add(SECRET_NOTE)
    jobs_run_pending(workspace_id=workspace_id)

    chats = [r["body"] for r in fake_provider.requests if r["path"].endswith("/chat/completions")]
    assert len(chats) >= 2  # relationship and extraction prompts both ran
    sent = json.dumps(chats)
    assert "sk-proj-4fJ2kQ9xZt7LmN3pR8sV1wY6bC0dE5gH" not in sent
    assert "[REDACTED:openai_key]" in sent
    # The stored memory keeps what the user wrote (scrub at rest is off by default).
    assert stored(workspace_id, memory["id"]).content == SECRET_NOTE


def test_it_scrubs_before_cutting_a_prompt_to_length():
    # Cut first, the key would be half there and no pattern would know it any more.
    text = "x" * 90 + " sk-proj-4fJ2kQ9xZt7LmN3pR8sV1wY6bC0dE5gH"
    fenced = llm.external(text, limit=110)
    assert "sk-proj-4fJ2" not in fenced
    assert "[REDACTED:openai" in fenced


def test_it_scrubs_context_text_but_returns_the_memory_as_written(alice_api):
    memory = alice_api.add("The staging DATABASE_URL is postgres://app:s3cr3t-Pa55@db.internal:5432/app")
    data = alice_api.ok("context/get", {"query": "staging database"})
    assert "s3cr3t-Pa55" not in data["context"]
    assert "postgres://app:[REDACTED:url_password]@db" in data["context"]
    assert data["memories"][0]["id"] == memory["id"]
    assert "s3cr3t-Pa55" in data["memories"][0]["content"]


def test_it_can_leave_context_text_alone_or_scrub_at_rest(personas):
    api = personas.alice_api
    patch(api, {"redactCredentials": False})
    api.add("ci token glpat-xY7zW5vU3tS1rQ9pO7nM for the runner")
    assert "glpat-xY7zW5vU3tS1rQ9pO7nM" in api.ok("context/get", {"query": "runner token"})["context"]

    patch(api, {"scrubAtRest": True})
    memory = api.add("runner password = hunter2!x")
    assert memory["content"] == "runner password = [REDACTED:password]"
    edited = api.ok("memories/edit", {"id": memory["id"], "content": "runner password = s3cond!pw"})
    assert edited["memory"]["content"] == "runner password = [REDACTED:password]"


def patch(api, body: dict) -> dict:
    response = api.client.patch(
        f"{API}/memories/settings",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )
    assert response.status_code == 200, response.content
    return response.json()["data"]
