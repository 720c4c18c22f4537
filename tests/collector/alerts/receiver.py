"""A real HTTP receiver on 127.0.0.1 for notification tests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """Records the JSON bodies POSTed to it and answers ``status``.

    With ``hold_first``, the first request is recorded, ``got_first`` is set, and its answer
    waits until ``release`` is set: a sender can be killed while it waits for the answer.
    """

    def __init__(self, *, hold_first: bool = False) -> None:
        self.bodies: list[tuple[str, Any]] = []
        self.status = 200
        self.lock = threading.Lock()
        self.hold_first = hold_first
        self.got_first = threading.Event()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                with receiver.lock:
                    receiver.bodies.append((self.path, body))
                    hold = receiver.hold_first and not receiver.got_first.is_set()
                    receiver.got_first.set()
                if hold:
                    receiver.release.wait(timeout=300)
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def snapshot(self) -> list[tuple[str, Any]]:
        with self.lock:
            return list(self.bodies)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
