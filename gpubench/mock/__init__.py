"""The mock cloud: Lambda Cloud v1, Vast.ai and RunPod REST v2 (plus RunPod's legacy GraphQL)
on one local HTTP server, with a real sshd behind every launched instance.

Paths: Lambda under /api/v1, Vast under /api/v0 and /api/v1/instances/, RunPod under /v2 and
/graphql (RUNPOD_API_BASE_URL for the runpod SDK is the server root; the vastai CLI's --url is
the server root too). The SSH user is the OS user running the mock.

Two network modes (`cloud.mode`, and `network.mode` in GET /_mock/health):
- loopback (the default): instances listen on 127.0.0.1, each on its own port. Lambda's API has
  no port field, so its active instances carry a mock-only `ssh_port` beside `ip`; extra ports
  a create asks for get a public port of 127.0.0.1 that the mock forwards to the instance's port.
- netns (`netns=True`, `gpubench mock serve --netns`, GPUBENCH_MOCK_NETNS=1): each instance is
  a host of its own, a network namespace on the mock's bridge (netns.py), sshd on port 22 of
  its own address; public port = container port. Needs root; where namespaces cannot be made
  the mock falls back to loopback and `cloud.mode_note` says why.

    from gpubench.mock import MockCloud
    with MockCloud.start(state_dir=tmp, boot_delay=0.0, faults="") as cloud:
        os.environ.update(cloud.env())      # GPUBENCH_*_URL and the three test API keys
        cloud.set_faults("vast:429@2,lambda:no-capacity")
        cloud.node_dies("vast", "1234", after=2.0)   # netns mode: its link goes down in 2 s

Fault SPEC (for `--faults`, `MockCloud.set_faults` and `POST /_mock/faults {"spec": ...}`):
a comma-separated list of ``[PROVIDER:]FAULT[=VALUE][@N]``. PROVIDER is lambda, vast or runpod;
without it (or with ``*``) the fault holds for all three. Setting a SPEC replaces the previous
one; an empty SPEC clears every fault.

    bad-key          every request answers the provider's own 401
    429[=S]          every request answers 429 with Retry-After: S (default 1)
    500[=S], 503[=S] every request answers that status in the provider's error shape
                     (with Retry-After: S when S is given)
    slow[=S]         every response is delayed S seconds (default 2)
    no-capacity      catalogs show nothing free and launches fail with the capacity error
    never-boots      instances launched now stay booting/loading/PROVISIONING forever
    ssh-refuses      instances launched now run, but nothing listens on their SSH port
    dies[=S]         running instances die S seconds after boot (default 0): Lambda
                     `preempted`, Vast outbid (interruptible) or offline, RunPod ERROR
    terminate-lies   terminate answers success but the instance keeps running
    hide-from-list   instance lists leave out every instance (lookups by id still find them)
    bad-host=CHECK   the next instance launched fails that preflight check: throttle, pcie-x4,
                     ecc, small-shm, old-driver or slow-matmul (@N: the next N instances)
    node-dies[=S]    netns mode only: the next instance launched (@N: the next N) loses its
                     link S seconds after boot (default 0): packets vanish, no reset is sent,
                     the API still answers it running. For one given instance at any time:
                     `MockCloud.node_dies` or POST /_mock/node-dies
                     {"provider": P, "id": ID, "after": S}.

``@N`` (only for bad-key, 429, 500, 503, slow) limits the fault to the provider's next N
requests, e.g. ``runpod:503@2`` fails twice and then works; for hide-from-list it counts
list answers, e.g. ``vast:hide-from-list@1`` hides the instances from one list.
"""

from __future__ import annotations

import getpass
import json
import os
import urllib.request
from pathlib import Path

from gpubench.errors import UsageError
from gpubench.mock import apis
from gpubench.mock.engine import LOOPBACK, NETNS, Engine, NodeDiesError
from gpubench.mock.faults import FaultBoard, FaultSpecError, parse
from gpubench.mock.state import MockStateError

__all__ = ["MockCloud", "FaultSpecError", "NodeDiesError", "parse_faults", "LOOPBACK", "NETNS",
           "netns_requested"]

parse_faults = parse
NETNS_VAR = "GPUBENCH_MOCK_NETNS"


def netns_requested(environ=os.environ) -> bool:
    """Whether the environment asks for namespace mode (GPUBENCH_MOCK_NETNS=1/true/yes)."""
    return str(environ.get(NETNS_VAR, "")).strip().lower() in ("1", "true", "yes", "on")


# The test API key each provider's mock accepts, by provider name (every registry entry
# that names a mock API module).
API_KEYS = {m.PROVIDER: m.API_KEY for m in apis.modules()}


def env_for(base_url: str) -> dict[str, str]:
    """The variables that point gpubench (and the official clients' keys) at the mock:
    for every registered provider the mock serves, its URL override (the mock root plus
    the API's own base path) and its API key."""
    from gpubench.providers import registry

    env: dict[str, str] = {}
    for entry in registry.entries():
        if entry.name in API_KEYS:
            env[entry.url_var] = base_url + entry.api_path
            env[entry.key_var] = API_KEYS[entry.name]
    # Lambda's images log in as ubuntu; a mock instance's sshd logs in the user running the mock.
    env["GPUBENCH_LAMBDA_SSH_USER"] = getpass.getuser()
    return env


class MockCloud:
    """The mock server running in a background thread of this process."""

    def __init__(self, engine: Engine, server, thread) -> None:
        self.engine = engine
        self._server = server
        self._thread = thread
        self.port = server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"

    @property
    def mode(self) -> str:
        """"netns" or "loopback" (see the module docstring)."""
        return self.engine.mode

    @property
    def mode_note(self) -> str:
        """Why namespace mode was asked for and not given ("" otherwise)."""
        return self.engine.mode_note

    @classmethod
    def start(cls, state_dir: Path, boot_delay: float = 0.0, faults: str = "",
              port: int = 0, netns: bool = False) -> "MockCloud":
        """Serve the mock. `netns`: namespace mode, falling back to loopback (with
        `mode_note` saying why) where namespaces cannot be made here."""
        from gpubench.mock.server import make_server, serve_in_thread

        if not 0 <= int(port) <= 65535:
            raise UsageError(f"bad port {port}: use 0 (any free port) to 65535")
        if boot_delay < 0:
            raise UsageError(f"bad boot delay {boot_delay}: must not be negative")
        board = FaultBoard(faults)     # a bad SPEC fails here, before anything starts
        state_dir = Path(state_dir).expanduser()
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
            probe = state_dir / ".writable"
            probe.write_text("")
            probe.unlink()
        except OSError as e:
            raise MockStateError(f"state directory {state_dir} is not writable: {e.strerror or e}") from None
        try:
            server = make_server(None, int(port))
        except OSError as e:
            raise UsageError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") from None
        engine = Engine(state_dir, boot_delay, board, netns_mode=netns)
        server.RequestHandlerClass.engine = engine
        engine.start()
        try:
            board.check_mode()     # node-dies in --faults needs the namespaces just asked for
        except FaultSpecError:
            server.server_close()
            engine.close()
            raise
        return cls(engine, server, serve_in_thread(server))

    def env(self) -> dict[str, str]:
        return env_for(self.base_url)

    def set_faults(self, spec: str) -> None:
        self.engine.faults.set(spec)

    def node_dies(self, provider: str, iid: str, after: float = 0.0) -> None:
        """Take one instance's link down `after` seconds from now (namespace mode only;
        NodeDiesError otherwise, KeyError if there is no such instance)."""
        if self.engine.node_dies(provider, iid, after) is None:
            raise KeyError(f"no {provider} instance {iid}")

    def address(self, provider: str, iid: str) -> str:
        """The address the instance's sshd is reached at from this machine."""
        inst = self.engine.store.get(provider, str(iid))
        if inst is None:
            raise KeyError(f"no {provider} instance {iid}")
        return self.engine.host.address(inst)

    def admin(self, path: str = "/_mock/faults", body: dict | None = None) -> dict:
        """Call an admin endpoint over HTTP (what an out-of-process test would do)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method="POST" if data else "GET",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
        self.engine.close()

    def __enter__(self) -> "MockCloud":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
