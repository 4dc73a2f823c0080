"""A session end to end on the real web server and worker (scripts/serve.py, as `make run` starts them) over
real HTTP: start → 201, three checkpoints stored as turns, end → a summary, the snapshot holds the three turns
in order, context/get finds the turn that answers a question about the conversation once the worker has
embedded it, and skill files from upsert to promote."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tenancy import services
from tests.conftest import API, make_user
from tests.helpers.serving import served

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def call(port: int, key: str, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{API}/{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_it_records_summarises_finds_and_promotes_a_session_on_the_served_app(tmp_path: Path):
    key = services.api_key_create(user=make_user("live-sessions")).raw_key
    with served(tmp_path / "serve.log") as server:
        port = server.port
        status, started = call(
            port, key, "POST", "sessions/start", {"title": "Backup review", "client": "live"}
        )
        assert status == 201, started
        session_id = started["data"]["sessionId"]
        said = [
            ("Where do the nightly database backups go now?", "Dana", "user"),
            ("To the cold storage bucket in Frankfurt, encrypted with the ops key.", "Lee", "assistant"),
            ("Great, then add a restore drill to the runbook.", "Dana", "user"),
        ]
        turn_ids = []
        for content, speaker, role in said:
            status, answer = call(
                port,
                key,
                "POST",
                "sessions/checkpoint",
                {"sessionId": session_id, "content": content, "speaker": speaker, "role": role},
            )
            assert status == 201, answer
            assert answer["data"]["event"]["memory"]["conversation"]["sessionId"] == session_id
            turn_ids.append(answer["data"]["eventId"])
        status, ended = call(port, key, "POST", "sessions/end", {"sessionId": session_id})
        assert status == 200, ended
        assert ended["data"]["summary"]["content"] and ended["data"]["session"]["status"] == "closed"
        status, snapshot = call(port, key, "GET", f"sessions/{session_id}/snapshot")
        assert status == 200, snapshot
        transcript = snapshot["data"]["snapshot"]["transcriptMd"]
        assert (
            transcript.index("nightly database")
            < transcript.index("cold storage")
            < transcript.index("drill")
        )

        # The worker embeds the turns; context/get (hybrid) then ranks the reply among the first.
        deadline = time.monotonic() + 120
        while True:
            status, context = call(
                port,
                key,
                "POST",
                "context/get",
                {"query": "Where are the nightly backups stored?", "strategy": "hybrid", "limit": 5},
            )
            assert status == 200, context
            found = [m["id"] for m in context["data"]["memories"]]
            applied = context["data"]["trace"]["semanticStrategyApplied"]
            if applied == "hybrid" and turn_ids[1] in found[:3]:
                break
            assert time.monotonic() < deadline, (applied, found, server.output()[-2000:])
            time.sleep(1)

        status, written = call(
            port,
            key,
            "POST",
            "skills/files/upsert",
            {"path": "skills/backup/SKILL.md", "content": "# Backups\n"},
        )
        assert status == 201, written
        status, listed = call(port, key, "POST", "skills/files/list", {})
        assert [f["path"] for f in listed["data"]["skillFiles"]] == ["skills/backup/SKILL.md"]
        status, promoted = call(
            port,
            key,
            "POST",
            "skills/files/promote",
            {
                "sessionId": session_id,
                "path": "skills/restore/SKILL.md",
                "title": "Restore",
                "procedureKey": "r",
            },
        )
        assert status == 201, promoted
        assert promoted["data"]["source"]["snapshotId"] == snapshot["data"]["snapshot"]["id"]
        status, listed = call(port, key, "POST", "skills/files/list", {})
        assert {f["path"] for f in listed["data"]["skillFiles"]} == {
            "skills/backup/SKILL.md",
            "skills/restore/SKILL.md",
        }
