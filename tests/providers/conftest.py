"""`fake_api`: a scripted HTTP server on 127.0.0.1 answering from saved fixtures.

It ends with its test, failed or not: `close` stops the loop, wakes a handler that is
holding back a late answer, and joins every thread it started. A handler's error (a
client gone before its answer) is kept in `errors`, never printed: printed, it landed on
the stderr of whichever test ran next in the same worker process."""

from __future__ import annotations

import json
import re
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def fixture(name: str):
    return json.loads((FIXTURES / name).read_text())


class _Server(ThreadingHTTPServer):
    """Each request on a daemon thread it keeps (to join on close); a handler's error
    kept in `errors`, not printed to the process's stderr."""

    daemon_threads = True

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.handlers: list[threading.Thread] = []
        self.errors: list[str] = []

    def process_request(self, request, client_address) -> None:
        t = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                             name="fake-api-request", daemon=True)
        self.handlers.append(t)
        t.start()

    def handle_error(self, request, client_address) -> None:
        self.errors.append(traceback.format_exc())


class FakeApi:
    """Routes (method, path regex) -> queue of (status, body, headers). The last answer
    of a queue repeats. Every request is recorded as a dict."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, re.Pattern, list]] = []
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                record = {"method": self.command, "path": parts.path, "query": parse_qs(parts.query),
                          "headers": dict(self.headers), "json": json.loads(raw) if raw else None}
                status, body, headers = api._answer(record)
                headers = dict(headers)
                delay = float(headers.pop("X-Fake-Delay", 0))   # answer late (a read timeout)
                if delay and api._closing.wait(delay):
                    return                          # closed meanwhile: no answer, the client is gone
                data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       name="fake-api", daemon=True)
        self.thread.start()

    def route(self, method: str, path: str, *answers) -> "FakeApi":
        """answers: (status, body) or (status, body, headers); body may be a fixture name.
        A header "X-Fake-Delay: S" is not sent: the answer comes S seconds late."""
        queue = []
        for a in answers:
            status, body, headers = (a + ({},))[:3] if len(a) == 2 else a
            if isinstance(body, str) and body.endswith(".json"):
                body = fixture(body)
            queue.append((status, body, headers))
        self.routes.insert(0, (method, re.compile(path + "$"), queue))
        return self

    def _answer(self, record):
        with self._lock:
            self.requests.append(record)
            for method, pattern, queue in self.routes:
                if method == record["method"] and pattern.match(record["path"]):
                    return queue.pop(0) if len(queue) > 1 else queue[0]
        return 404, {"error": "no route in the fake API"}, {}

    def calls(self, method: str, path: str) -> list[dict]:
        return [r for r in self.requests if r["method"] == method and re.match(path + "$", r["path"])]

    @property
    def errors(self) -> list[str]:
        """Tracebacks of the handlers that failed (a client gone before its answer)."""
        return self.server.errors

    def close(self) -> None:
        """Stop serving and join every thread: nothing of this server outlives its test."""
        self._closing.set()                 # a late answer stops waiting
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
        for t in self.server.handlers:
            t.join(timeout=5)
        alive = [t.name for t in (self.thread, *self.server.handlers) if t.is_alive()]
        assert not alive, f"fake API threads still running after close: {alive}"


@pytest.fixture
def fake_api():
    api = FakeApi()
    try:
        yield api
    finally:
        api.close()


# --------------------------------------------------------------------------- volumes
@pytest.fixture
def volume_cloud(tmp_path, monkeypatch):
    """The mock cloud with quick client settings, for the volume tests of each provider."""
    from tests.helpers import QUICK_CLIENT, mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch, **QUICK_CLIENT)


@pytest.fixture
def ssh_key(tmp_path):
    """A fresh ed25519 key pair in tmp_path: the private key's path."""
    import subprocess

    path = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vol", "-f", str(path)],
                   check=True, timeout=30)
    return path
