"""A local stand-in for an OpenAI-compatible provider (embeddings and chat) and a Cohere-style rerank server
(as Infinity and Text-Embeddings-Inference's Cohere route answer), for tests only.

Behaviour is scripted per test: fixed delays, error statuses, or a hold that blocks a request until released.
Vectors are deterministic functions of the text, so repeated runs produce identical rows.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def fake_vector(text: str, dimension: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [(digest[i % len(digest)] - 127.5) / 127.5 for i in range(dimension)]
    norm = sum(x * x for x in raw) ** 0.5 or 1.0
    return [x / norm for x in raw]


def word_overlap(query: str, document: str) -> float:
    """The share of the query's words the document holds: a deterministic stand-in for a rerank model."""
    words = {w.strip("?.,!").lower() for w in query.split()}
    held = {w.strip("?.,!").lower() for w in document.split()}
    return round(len(words & held) / (len(words) or 1), 6)


@dataclass
class FakeProvider:
    dimension: int = 8
    requests: list[dict[str, Any]] = field(default_factory=list)
    # Called before answering; may sleep, block on an event, or return (status, body) to answer with an error.
    before_answer: Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]] | None] | None = None
    chat_answer: Callable[[dict[str, Any]], str] | None = None
    # Rerank: the relevance of each document to the query (default: the share of the query's words it holds).
    rerank_score: Callable[[str, str], float] | None = None
    first_request: threading.Event = field(default_factory=threading.Event)

    def start(self) -> str:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                provider.requests.append(
                    {"path": self.path, "body": body, "authorization": self.headers.get("Authorization")}
                )
                provider.first_request.set()
                if provider.before_answer is not None:
                    override = provider.before_answer(self.path, body)
                    if override is not None:
                        return self._send(*override)
                if self.path.endswith("/embeddings"):
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = [
                        {"object": "embedding", "index": i, "embedding": fake_vector(t, provider.dimension)}
                        for i, t in enumerate(texts)
                    ]
                    return self._send(
                        200,
                        {
                            "object": "list",
                            "data": data,
                            "model": body.get("model"),
                            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
                        },
                    )
                if self.path.endswith("/rerank"):
                    score = provider.rerank_score or word_overlap
                    documents = [d if isinstance(d, str) else d.get("text", "") for d in body["documents"]]
                    results = sorted(
                        (
                            {"index": i, "relevance_score": score(body["query"], d)}
                            for i, d in enumerate(documents)
                        ),
                        key=lambda r: -r["relevance_score"],
                    )[: body.get("top_n") or len(documents)]
                    meta = {"billed_units": {"search_units": 1}}
                    return self._send(200, {"id": "rerank-test", "results": results, "meta": meta})
                if self.path.endswith("/chat/completions"):
                    content = provider.chat_answer(body) if provider.chat_answer else "{}"
                    return self._send(
                        200,
                        {
                            "id": "chatcmpl-test",
                            "object": "chat.completion",
                            "created": 0,
                            "model": body.get("model"),
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content},
                                }
                            ],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                        },
                    )
                return self._send(404, {"error": {"message": "unknown path"}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
