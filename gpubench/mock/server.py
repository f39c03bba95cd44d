"""The HTTP server: routes each request to its provider module, applies request-level faults
first, and serves the admin endpoints under /_mock/.

Routing: each provider's API module (the registry entry's mock_api; see apis.py) claims the
requests that are its own, and the surest claim answers: /v2/... and /graphql -> RunPod;
/api/v0/... -> Vast; /api/v1/instances/ (with its trailing slash, as the vastai CLI sends
it) or any /api/v1 call carrying the Vast key -> Vast; the rest of /api/v1/... -> Lambda.
A machine's own key (Vast.ai CONTAINER_API_KEY, RunPod's pod RUNPOD_API_KEY) is accepted
for removing that machine only (the module's self_removal).

Admin: GET /_mock/health (`{"ok": true, "network": {"mode": "loopback"|"netns", ...}}`),
GET /_mock/faults, POST /_mock/faults with `{"spec": "..."}`, and POST /_mock/node-dies with
`{"provider": "vast", "id": "1234", "after": 2.0}` (namespace mode: that instance's link goes
down `after` seconds from now).
"""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpubench.mock import apis
from gpubench.mock.engine import NodeDiesError
from gpubench.mock.faults import FaultSpecError
from gpubench.mock.web import Request, Response

log = logging.getLogger("gpubench.mock")
MAX_BODY = 8 * 1024 * 1024


def dispatch(req: Request, engine) -> Response:
    if req.path.startswith("/_mock/"):
        return _admin(req, engine)
    module = apis.for_request(req)
    if module is None:
        return Response(404, {"error": "not found"})
    provider = module.PROVIDER
    for fault in engine.faults.take_request_faults(provider):
        if fault.name == "slow":
            time.sleep(fault.value or 0.0)
        elif fault.name == "bad-key":
            return module.unauthorized()
        else:
            resp = module.fault_response(int(fault.name))
            if fault.value is not None:
                resp.headers["Retry-After"] = str(int(fault.value))
            return resp
    if not module.authorized(req) and not _machine_removing_itself(module, req, engine):
        return module.unauthorized()
    try:
        return module.handle(req, engine)
    except Exception:
        log.exception("mock %s handler failed on %s %s", provider, req.method, req.path)
        return module.fault_response(500)


def _machine_removing_itself(module, req: Request, engine) -> bool:
    """A machine's own key (Vast.ai, RunPod) is good for removing that machine only."""
    check = getattr(module, "self_removal", None)
    return check is not None and check(req, engine)


def _admin(req: Request, engine) -> Response:
    if req.path.rstrip("/") == "/_mock/health":
        return Response(200, {"ok": True, "network": engine.describe_network()})
    if req.path.rstrip("/") == "/_mock/node-dies" and req.method == "POST":
        return _node_dies(req, engine)
    if req.path.rstrip("/") == "/_mock/faults":
        if req.method == "POST":
            try:
                body = req.json() or {}
                spec = body.get("spec", "") if isinstance(body, dict) else str(body)
                engine.faults.set(spec)
            except (ValueError, FaultSpecError) as e:
                return Response(400, {"error": str(e)})
        return Response(200, {"spec": engine.faults.spec, "faults": engine.faults.describe()})
    return Response(404, {"error": "not found"})


def _node_dies(req: Request, engine) -> Response:
    try:
        body = req.json() or {}
        provider, iid = str(body["provider"]), str(body["id"])
        after = float(body.get("after") or 0.0)
    except (ValueError, TypeError, KeyError, AttributeError):
        return Response(400, {"error": 'node-dies takes {"provider": P, "id": ID, "after": SECONDS}'})
    if after < 0:
        return Response(400, {"error": "after must not be negative"})
    try:
        inst = engine.node_dies(provider, iid, after)
    except NodeDiesError as e:
        return Response(409, {"error": str(e)})
    if inst is None:
        return Response(404, {"error": f"no {provider} instance {iid}"})
    return Response(200, {"provider": provider, "id": iid, "link_down_at": inst.extra["link_down_at"]})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gpubench-mock"
    engine = None   # set on the subclass made per server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.send_error(413)
            return
        body = self.rfile.read(length) if length else b""
        req = Request.build(self.command, self.path, dict(self.headers.items()), body)
        resp = dispatch(req, self.engine)
        payload = resp.encoded()
        self.send_response(resp.status)
        if resp.body is not None:
            self.send_header("Content-Type", resp.content_type)
        for k, v in resp.headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if payload and self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

    def log_message(self, fmt, *args) -> None:   # keep stderr quiet; debug log instead
        log.debug("%s " + fmt, self.address_string(), *args)


class MockHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def handle_error(self, request, client_address) -> None:
        """A client gone before its answer (a machine that removed itself is killed while
        its DELETE is answered) is routine; anything else goes to the debug log, not to
        the terminal of whoever runs the mock."""
        log.debug("request from %s failed", client_address, exc_info=True)


def make_server(engine, port: int) -> MockHTTPServer:
    handler = type("Handler", (_Handler,), {"engine": engine})
    return MockHTTPServer(("127.0.0.1", port), handler)


def serve_in_thread(server: MockHTTPServer) -> threading.Thread:
    # shutdown() waits for the loop's next poll: a short one is a mock that stops at once
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                         name="mock-http", daemon=True)
    t.start()
    return t
