"""gunicorn settings used by `make run` and the Procfile."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import ssl
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any, cast

from gunicorn.http import errors as http_errors
from gunicorn.util import write_nonblock
from gunicorn.workers.gthread import ThreadWorker
from prometheus_client import multiprocess

bind = os.environ.get("BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
timeout = 60
graceful_timeout = 20

# --- Slow clients ---
# Threads wait on clients; request slots run the application. A sync worker reads a request's body inside the
# application, so one client trickling an upload held the whole process, and two of them every sync worker of
# a default deployment (bench/slow_clients.py). Here a worker has WEB_THREADS threads to read requests and
# WEB_REQUEST_SLOTS of them may run the application at once; a thread that waits for more of a body gives its
# slot back meanwhile. A client gets WEB_CLIENT_TIMEOUT_SECONDS to send a request's head, the same again (plus
# a second per 100 KB of a larger body) to send its body, and as long to take each part of the answer.
worker_class = "config.gunicorn_conf.CairnThreadWorker"
threads = int(os.environ.get("WEB_THREADS", "8"))
REQUEST_SLOTS = int(os.environ.get("WEB_REQUEST_SLOTS", "1"))
CLIENT_TIMEOUT_SECONDS = float(os.environ.get("WEB_CLIENT_TIMEOUT_SECONDS", "30"))
# Bodies past 1 MB (workspace/import takes up to 50 MB) get more time at this rate, the slowest allowed.
CLIENT_MIN_BYTES_PER_SECOND = 100_000
CLIENT_BODY_ALLOWANCE_BYTES = 1_048_576
# Long enough for a client to send its next request on the same connection, short enough to free its socket.
keepalive = 5


class _ClientReads:
    """The socket a request's head and body are read from, as gunicorn's parser sees it: every read ends by a
    deadline (a client that stops sending is cut off, as is one that trickles), and a thread that holds a
    request slot gives it back while it waits for the client, so a slow upload never keeps another request
    from running. Everything else (writes, fileno, …) goes to the real socket."""

    def __init__(self, sock: socket.socket, *, seconds: float) -> None:
        self.sock = sock
        self.deadline = time.monotonic() + seconds
        self.slot: threading.Semaphore | None = None
        # Set once the client was cut off: the rest of its body will never be read, so the connection closes.
        self.cut = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)

    def recv(self, size: int) -> bytes:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self.cut = True
            raise _too_slow()
        slot = self.slot
        try:
            if slot is not None:
                self.sock.settimeout(0.0)
                try:
                    return self.sock.recv(size)
                except (BlockingIOError, ssl.SSLWantReadError):
                    pass  # nothing there yet: wait for it without the slot
                slot.release()
            try:
                self.sock.settimeout(remaining)
                return self.sock.recv(size)
            except TimeoutError:
                self.cut = True
                raise _too_slow() from None
            finally:
                if slot is not None:
                    slot.acquire()
        finally:
            self.sock.settimeout(CLIENT_TIMEOUT_SECONDS)  # what each write of the answer may take


def _too_slow() -> ConnectionResetError:
    # A reset, as far as gunicorn and Django are concerned: gunicorn drops the connection quietly (a timeout
    # would be logged with a traceback per slow client), Django's request.body raises UnreadablePostError,
    # which the API answers with 408 (config.api).
    return ConnectionResetError(errno.ECONNRESET, "the client did not send its request in time")


def _content_length(req: Any) -> int:
    for name, value in req.headers:
        if name == "CONTENT-LENGTH" and value.isdigit():
            return int(value)
    return 0


# --- Requests gunicorn refuses before Django sees them ---
# gunicorn answers a request it cannot parse (a header over limit_request_field_size, 8,190 bytes; more than
# limit_request_fields headers; a request line over limit_request_line) with an HTML page. Clients of the API
# read the JSON envelope, so these refusals are written as one too, with a code and what to fix.
_SIZE_LIMITS = "8,190 bytes a header, 100 headers, a request line of 4,094 bytes"


def _head_refusal(exc: BaseException) -> tuple[int, str, str, str] | None:
    """(status, reason, code, message) of a request refused while its head is read; None otherwise."""
    if isinstance(exc, http_errors.LimitRequestHeaders):
        return (
            431,
            "Request Header Fields Too Large",
            "HEADERS_TOO_LARGE",
            f"A header, or the number of headers, is over what this server reads ({_SIZE_LIMITS}). An API "
            "key is 68 characters: send `Authorization: Bearer mem_…` with the key alone.",
        )
    if isinstance(exc, http_errors.LimitRequestLine):
        return 414, "URI Too Long", "REQUEST_LINE_TOO_LONG", f"The request line is too long ({_SIZE_LIMITS})."
    if isinstance(
        exc,
        (
            http_errors.InvalidRequestLine,
            http_errors.InvalidRequestMethod,
            http_errors.InvalidHTTPVersion,
            http_errors.InvalidHeader,
            http_errors.InvalidHeaderName,
            http_errors.ObsoleteFolding,
            http_errors.InvalidSchemeHeaders,
        ),
    ):
        return (
            400,
            "Bad Request",
            "MALFORMED_REQUEST",
            f"The request is not valid HTTP/1.1: {type(exc).__name__}.",
        )
    return None


def _write_envelope(client: Any, status: int, reason: str, code: str, message: str) -> None:
    body = json.dumps(
        {
            "ok": False,
            "data": None,
            "error": {
                "type": "validation_error",
                "code": code,
                "message": message,
                "status": status,
                "retryable": False,
            },
            "meta": {
                "requestId": str(uuid.uuid4()),
                "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            },
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1")
    write_nonblock(client, head + body)


class CairnThreadWorker(ThreadWorker):
    """gunicorn's gthread worker with request slots and bounded client reads (see the settings above)."""

    def init_process(self) -> None:
        self.slots = threading.BoundedSemaphore(REQUEST_SLOTS) if REQUEST_SLOTS > 0 else None
        super().init_process()

    def handle(self, conn: Any) -> Any:
        # In a pool thread, as soon as the client sent something: the head must follow within the timeout.
        reads = _ClientReads(conn.sock, seconds=CLIENT_TIMEOUT_SECONDS)
        conn.parser.unreader.sock = reads
        conn.cairn_reads = reads
        try:
            return super().handle(conn)
        finally:
            conn.parser.unreader.sock = conn.sock

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        refusal = _head_refusal(exc)
        if refusal is None:
            super().handle_error(req, client, addr, exc)
            return
        self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        with contextlib.suppress(OSError):  # the client is gone: nothing to tell it
            _write_envelope(client, *refusal)

    def handle_request(self, req: Any, conn: Any) -> Any:
        reads: _ClientReads = conn.cairn_reads
        extra = max(0, _content_length(req) - CLIENT_BODY_ALLOWANCE_BYTES) / CLIENT_MIN_BYTES_PER_SECOND
        reads.deadline = time.monotonic() + CLIENT_TIMEOUT_SECONDS + extra
        if self.slots is None:
            keepalive = super().handle_request(req, conn)
        else:
            self.slots.acquire()
            reads.slot = self.slots
            try:
                keepalive = super().handle_request(req, conn)
            finally:
                reads.slot = None
                self.slots.release()
        return keepalive and not reads.cut


def post_worker_init(worker: object) -> None:
    # Load the local embedding model in the background so the first semantic search does not wait for it.
    from django.conf import settings

    if settings.EMBEDDING_MODEL.startswith("local/"):
        from retrieval.embeddings import LocalEmbedder, get_embedder

        # A local/ model name always builds a LocalEmbedder.
        cast(LocalEmbedder, get_embedder()).ready(load_in_background=True)


# --- /metrics across gunicorn workers ---
# Each worker is its own process: prometheus_client's multiprocess mode keeps their samples in files under
# this directory, set here in the master so every worker inherits it, and emptied at start so a dead run's
# counts go.
_multiproc_dir = os.environ.setdefault(
    "PROMETHEUS_MULTIPROC_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "prometheus")
)


def on_starting(server: object) -> None:
    import shutil

    shutil.rmtree(_multiproc_dir, ignore_errors=True)
    os.makedirs(_multiproc_dir, exist_ok=True)


def child_exit(server: object, worker: object) -> None:
    # prometheus_client is imported when this file loads, never here: gunicorn calls child_exit from its
    # signal handler, and a second signal (Ctrl-C twice, SIGTERM during shutdown) arriving in the middle of
    # an import left a half-initialised module and an ImportError traceback on the way out.
    multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]
