"""A real HTTP server on loopback that takes webhook POSTs (Slack-compatible JSON), for the
notification tests (unit, supervise and cluster: the cluster's nodes share the host's
network). It can refuse the POSTs sent from given places (as a node that cannot reach the
webhook would fail), to show the login node sending them later."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Webhook:
    """The server's state: the bodies taken, and which senders it refuses (503)."""

    def __init__(self) -> None:
        self.taken: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.refuse_from: tuple[str, ...] = ()
        self.lock = threading.Lock()
        self.url = ""

    def events(self) -> list[tuple[str, str]]:
        """(job id, event) of each notice taken, in order."""
        with self.lock:
            return [(b["hpclaunch"]["job_id"], b["hpclaunch"]["event"]) for b in self.taken]

    def of_job(self, job_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [b for b in self.taken if b["hpclaunch"]["job_id"] == job_id]


@contextmanager
def webhook_server(path: str = "/hooks/T0/B0/x'$(touch pwned)") -> Iterator[Webhook]:
    """A running server; its ``url`` ends in ``path`` (shell characters by default: a URL is
    data, never a command)."""
    hook = Webhook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length))
            sender = str(body.get("hpclaunch", {}).get("sent_from", ""))
            with hook.lock:
                refuse = any(sender.startswith(r) for r in hook.refuse_from)
                (hook.refused if refuse else hook.taken).append(body)
            self.send_response(503 if refuse else 200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    from urllib.parse import quote

    hook.url = f"http://127.0.0.1:{server.server_address[1]}{quote(path, safe='/$()')}"
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()
