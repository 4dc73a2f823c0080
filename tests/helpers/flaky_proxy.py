"""A small HTTP proxy in front of the live server that fails on purpose: it stands for the network and
load balancers between an SDK and Cairn (the part outside the product), so retries meet real sockets and
real answers.

Each request takes the next action of `plan` (then `forward` once the plan is spent):
- `forward`: pass the request to the upstream and its answer back;
- `503`: answer 503 with an envelope of the kind Cairn sends, without calling upstream;
- `502_html`: answer a bare HTML 502, as a proxy would;
- `lose_answer`: pass the request upstream (it takes effect) but answer 502, as if the answer were lost;
- `hang`: answer nothing for `hang_seconds` (the client's timeout should fire first), then 504;
- `cut_body`: pass the request upstream but send only the first half of its answer (a stream cut short).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    action: str
    status: int


@dataclass
class FlakyProxy:
    upstream: str
    plan: list[str] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    hang_seconds: float = 2.0

    def start(self) -> str:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def do_PATCH(self) -> None:
                self._handle()

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy._lock:
                    action = proxy.plan.pop(0) if proxy.plan else "forward"
                status, headers, content = proxy._act(
                    action, self.command, self.path, dict(self.headers), body
                )
                proxy.seen.append(Seen(self.command, self.path, dict(self.headers), action, status))
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(content)))
                    self.end_headers()
                    self.wfile.write(content)
                except OSError:
                    pass  # the client gave up waiting (hang): nobody to answer

        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True  # stop() must not wait for a hanging answer
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _act(
        self, action: str, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if action == "503":
            envelope = {
                "ok": False,
                "data": None,
                "error": {
                    "type": "internal_error",
                    "code": "SERVICE_UNAVAILABLE",
                    "message": "Try again.",
                    "status": 503,
                    "retryable": True,
                },
                "meta": {
                    "version": "test",
                    "endpoint": path,
                    "requestId": "proxy-503-request",
                    "timestamp": "",
                },
            }
            return 503, {"Content-Type": "application/json"}, json.dumps(envelope).encode()
        if action == "hang":
            time.sleep(self.hang_seconds)
            return 504, {"Content-Type": "text/html"}, b"<html><body>504 Gateway Timeout</body></html>"
        if action == "502_html":
            return 502, {"Content-Type": "text/html"}, b"<html><body>502 Bad Gateway</body></html>"
        forwarded = {name: value for name, value in headers.items() if name.lower() not in _HOP_HEADERS}
        upstream = httpx.request(method, self.upstream + path, headers=forwarded, content=body, timeout=60)
        if action == "lose_answer":
            return 502, {"Content-Type": "text/html"}, b"<html><body>upstream answer lost</body></html>"
        answer_headers = {
            name: value for name, value in upstream.headers.items() if name.lower() not in _HOP_HEADERS
        }
        answer_headers.pop("content-encoding", None)
        if action == "cut_body":  # a stream that breaks off: the first half of the answer, as if complete
            return upstream.status_code, answer_headers, upstream.content[: len(upstream.content) // 2]
        return upstream.status_code, answer_headers, upstream.content
