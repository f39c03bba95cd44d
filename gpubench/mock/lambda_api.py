"""Lambda Cloud API v1 (lambda.openapi.json 1.10.0) under /api/v1.

Envelopes: `{"data": ...}` on success, `{"error": {code, message, suggestion?}}` on failure.
Auth: `Authorization: Bearer KEY`, or Basic with `KEY:` (or the bare key) as credentials.
Status words: booting -> active; preempted when a `dies` fault kills it; terminating for a
moment after terminate (as long as the boot delay, at most TERMINATING_S), then gone (404).
Launch takes `tags` ([{key, value}], the spec's RequestedTagEntry) and instances show them.
Filesystems (list, create, delete, and mounting one at launch) are in lambda_filesystems.py;
an instance shows the filesystems it mounts (file_system_names, file_system_mounts).

Mock extension: an active instance carries `ssh_user` beside `ip`, because a mock instance
logs in the OS user running the mock (where Lambda's images log in `ubuntu`), and in loopback
mode `ssh_port`, because its sshd listens on 127.0.0.1 on its own port (where a real one
listens on ip:22). In namespace mode `ip` is the instance's own address with sshd on port 22,
as on Lambda, and `private_ip` a second address on the same link (so a client's choice of
private over public shows), and `ssh_port` is left out, as in a real answer.
"""

from __future__ import annotations

import getpass
import re
import subprocess
import tempfile
import time
import uuid
import weakref
from pathlib import Path

from gpubench.mock import billing, catalog, lambda_filesystems
from gpubench.mock.state import DEAD, PENDING, RUNNING, MockInstance
from gpubench.mock.web import BY_PATH, NOT_MINE, Request, Response

PROVIDER = "lambda"
API_KEY = "secret_gpubench-mock_6c0a3f5e9d2b4e81a7c3d5f1b2e4a6c8"
_INSTANCE = re.compile(r"^/api/v1/instances/([^/]+)/?$")
_SSH_KEY = re.compile(r"^/api/v1/ssh-keys/([^/]+)/?$")
_TAG_KEY = re.compile(r"^[a-z][a-z0-9-:]+$")
TERMINATING_S = 2.0
# Machine images (GET /images), as spec 1.10.0 describes them; one per region.
IMAGES = (("ubuntu-22.04", "ubuntu-lts", "22.04", "Ubuntu 22.04 LTS"),
          ("ubuntu-24.04", "ubuntu-lts", "24.04", "Ubuntu 24.04 LTS"),
          ("lambda-stack-24.04", "lambda-stack", "24.04", "Lambda Stack 24.04"))
# Instances terminated a moment ago, per engine: id -> (gone at, body as last shown).
_terminating: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def claim(req: Request) -> int:
    """Whether `req` is for this API (see apis.py): every /api/v1 path, unless Vast.ai's
    API claims it surely (vast_api.claim)."""
    return BY_PATH if req.path.startswith("/api/v1/") else NOT_MINE


def error(status: int, code: str, message: str, suggestion: str | None = None) -> Response:
    err = {"code": code, "message": message}
    if suggestion:
        err["suggestion"] = suggestion
    return Response(status, {"error": err})


def unauthorized() -> Response:
    return error(401, "global/invalid-api-key", "API key was invalid, expired, or deleted.",
                 "Check your API key or create a new one, then try again.")


def fault_response(status: int) -> Response:
    """The body of an injected 429/500/503 (the server adds Retry-After)."""
    if status == 429:
        return error(429, "global/rate-limit-exceeded", "Too many requests.", "Try again shortly.")
    if status == 503:
        return error(503, "provider/internal-unavailable", "Provider unavailable", "Try again shortly")
    return error(500, "global/internal-error", "An internal server error occurred.",
                 "Try again later. Contact Support if the problem persists.")


def authorized(req: Request) -> bool:
    return API_KEY in (req.bearer(), req.basic_user())


def _not_found(what: str = "instance") -> Response:
    return error(404, "global/object-does-not-exist", f"Specified {what} does not exist.")


def _invalid(message: str = "Invalid request data.") -> Response:
    return error(400, "global/invalid-parameters", message)


def _status(inst: MockInstance) -> str:
    return {PENDING: "booting", RUNNING: "active", DEAD: "preempted"}.get(inst.phase, "unhealthy")


def render(engine, inst: MockInstance, status: str | None = None) -> dict:
    status = status or _status(inst)
    t = engine.lambda_types.get(inst.extra.get("instance_type_name", ""))
    active = status == "active"
    unavailable = {"available": False, "reason_code": "vm-has-not-launched",
                   "reason_description": "The instance has not launched yet."}
    actions = {a: ({"available": True} if active else dict(unavailable))
               for a in ("migrate", "rebuild", "restart", "cold_reboot")}
    actions["terminate"] = {"available": status not in ("terminating", "terminated")}
    out = {
        "id": inst.id, "name": inst.name, "status": status,
        "ssh_key_names": inst.extra.get("ssh_key_names", []),
        "file_system_names": inst.extra.get("file_system_names", []),
        **({"file_system_mounts": inst.extra["file_system_mounts"]}
           if inst.extra.get("file_system_mounts") else {}),     # left out when none (spec 1.10.0)
        "region": {"name": inst.region, "description": catalog.LAMBDA_REGIONS.get(inst.region, "")},
        "instance_type": t.instance_type() if t else {},
        "actions": actions, "is_reserved": False, "tags": inst.extra.get("tags", []),
        "firewall_rulesets": [],
    }
    if inst.extra.get("hostname"):
        out["hostname"] = inst.extra["hostname"]
    if active:
        out.update({"ip": engine.address(inst), "private_ip": engine.private_address(inst),
                    "ssh_user": getpass.getuser(),
                    "hostname": engine.host.hostname(inst),
                    "jupyter_token": inst.id[::-1],
                    "jupyter_url": f"https://jupyter-{inst.id}.lambdaspaces.invalid/?token={inst.id[::-1]}"})
        if engine.network is None:
            out["ssh_port"] = inst.ssh_port
    return out


def handle(req: Request, engine) -> Response:
    p, m = req.path.rstrip("/") or "/", req.method
    filesystems = lambda_filesystems.handle(req, engine)
    if filesystems is not None:
        return filesystems
    if p == "/api/v1/instance-types" and m == "GET":
        return _instance_types(engine)
    if p == "/api/v1/regions" and m == "GET":
        regions = [{"name": k, "description": v} for k, v in catalog.LAMBDA_REGIONS.items()]
        return Response(200, {"data": regions})
    if p == "/api/v1/images" and m == "GET":
        return Response(200, {"data": _images()})
    if p == "/api/v1/instances" and m == "GET":
        if engine.faults.hides_list(PROVIDER):     # what faults.listed does, asked once
            return Response(200, {"data": []})
        shown = [render(engine, i) for i in engine.store.instances(PROVIDER)]
        return Response(200, {"data": shown + list(_still_terminating(engine).values())})
    if p == "/api/v1/instance-operations/launch" and m == "POST":
        return _launch(req, engine)
    if p == "/api/v1/instance-operations/terminate" and m == "POST":
        return _terminate(req, engine)
    if p == "/api/v1/instance-operations/restart" and m == "POST":
        return _restart(req, engine)
    if p == "/api/v1/ssh-keys":
        if m == "GET":
            return Response(200, {"data": [_key(k) for k in engine.store.keys(PROVIDER)]})
        if m == "POST":
            return _add_key(req, engine)
    if (mt := _SSH_KEY.match(req.path)) and m == "DELETE":
        if not engine.store.delete_key(PROVIDER, mt.group(1)):
            return _not_found("SSH key")
        return Response(200, {"data": {}})
    if mt := _INSTANCE.match(req.path):
        inst = engine.store.get(PROVIDER, mt.group(1))
        if inst is None and m == "GET" and mt.group(1) in _still_terminating(engine):
            return Response(200, {"data": _still_terminating(engine)[mt.group(1)]})
        if inst is None:
            return _not_found()
        if m == "GET":
            return Response(200, {"data": render(engine, inst)})
        if m == "POST":
            body = _body(req)
            if body is None or not isinstance(body.get("name", ""), str) or len(body.get("name", "")) > 64:
                return _invalid()

            def rename(i: MockInstance) -> None:
                i.name = body.get("name", i.name)

            inst = engine.mutate(PROVIDER, inst.id, rename)
            if inst is None:
                return _not_found()
            return Response(200, {"data": render(engine, inst)})
    return error(404, "global/object-does-not-exist", "Not found.")


def _body(req: Request) -> dict | None:
    try:
        body = req.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _instance_types(engine) -> Response:
    data = {}
    for name, t in engine.lambda_types.items():
        regions = [{"name": r, "description": catalog.LAMBDA_REGIONS[r]} for r in t.regions
                   if engine.available(PROVIDER, f"{name}@{r}", t.capacity_per_region) > 0]
        data[name] = {"instance_type": t.instance_type(), "regions_with_capacity_available": regions}
    return Response(200, {"data": data})


def _launch(req: Request, engine) -> Response:
    body = _body(req)
    if body is None:
        return _invalid()
    missing = [f for f in ("region_name", "instance_type_name", "ssh_key_names") if f not in body]
    if missing:
        return _invalid(f"Invalid request data: missing {', '.join(missing)}.")
    names = body["ssh_key_names"]
    if not isinstance(names, list) or len(names) != 1:
        return _invalid("Invalid request data: exactly one SSH key name must be specified.")
    name = body.get("name") or ""
    if not isinstance(name, str) or len(name) > 64:
        return _invalid("Invalid request data: name must be at most 64 characters.")
    tags = body.get("tags") or []
    if not isinstance(tags, list) or not all(
            isinstance(t, dict) and set(t) == {"key", "value"} and isinstance(t["key"], str)
            and _TAG_KEY.match(t["key"]) and len(t["key"]) <= 55 and isinstance(t["value"], str)
            and len(t["value"]) <= 128 for t in tags):
        return _invalid("Invalid request data: tags must be [{key, value}] with keys like 'my-key'.")
    hostname = body.get("hostname")
    if hostname is not None and not re.fullmatch(r"[a-z0-9][0-9a-z-]{0,62}", str(hostname)):
        return _invalid("Invalid request data: hostname is not valid.")
    region = body["region_name"]
    if region not in catalog.LAMBDA_REGIONS:
        return _invalid(f"Invalid request data: unknown region {region!r}.")
    t = engine.lambda_types.get(body["instance_type_name"])
    if t is None:
        return _not_found("instance type")
    keys = {k.name: k for k in engine.store.keys(PROVIDER)}
    if names[0] not in keys:
        return _not_found("SSH key")
    try:
        quantity = int(body.get("quantity", 1))   # not in spec 1.10.0; older clients send it
    except (TypeError, ValueError):
        return _invalid()
    slot = f"{t.name}@{region}"
    with engine.lock:       # no filesystem is deleted between its check and the launch
        mounts = lambda_filesystems.for_launch(body, region, engine)
        if isinstance(mounts, Response):
            return mounts
        capacity = t.capacity_per_region if region in t.regions else 0
        if quantity < 1 or engine.available(PROVIDER, slot, capacity) < quantity:
            return error(400, "instance-operations/launch/insufficient-capacity",
                         "Not enough capacity to fulfill launch request.")
        ids = []
        for _ in range(quantity):
            inst = engine.launch(
                PROVIDER, iid=uuid.uuid4().hex, name=name, offer_key=slot, units=1,
                gpu_name=t.gpu.lambda_desc, gpu_count=t.count, price_per_hour=t.price_cents / 100,
                region=region, authorized_keys=[keys[names[0]].public_key],
                extra={"instance_type_name": t.name, "ssh_key_names": names, "hostname": hostname,
                       "tags": tags, "image": body.get("image"), **mounts})
            ids.append(inst.id)
    return Response(200, {"data": {"instance_ids": ids}})


def _ids(req: Request) -> list[str] | None:
    body = _body(req)
    ids = body.get("instance_ids") if body else None
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        return None
    return ids


def _instances_named(req: Request, engine):
    """The instances a terminate/restart body names, or the error Response to answer."""
    ids = _ids(req)
    if ids is None:
        return _invalid()
    insts = [engine.store.get(PROVIDER, i) for i in ids]
    if any(i is None for i in insts):
        return _not_found()
    return insts


def _terminate(req: Request, engine) -> Response:
    insts = _instances_named(req, engine)
    if isinstance(insts, Response):
        return insts
    out = []
    for inst in insts:
        body = render(engine, inst, status="terminating")
        if billing.terminate(engine, inst) and min(engine.boot_delay, TERMINATING_S) > 0:
            _terminating.setdefault(engine, {})[inst.id] = (time.time() + min(engine.boot_delay,
                                                                              TERMINATING_S), body)
        out.append(body)
    return Response(200, {"data": {"terminated_instances": out}})


def _still_terminating(engine) -> dict[str, dict]:
    """The bodies of instances terminated less than a moment ago (status terminating)."""
    now = time.time()
    held = _terminating.get(engine, {})
    for iid in [i for i, (until, _) in held.items() if until <= now]:
        held.pop(iid, None)
    return {iid: body for iid, (_, body) in held.items()}


def _images() -> list[dict]:
    out = []
    for region, description in catalog.LAMBDA_REGIONS.items():
        for name, family, version, text in IMAGES:
            out.append({"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{region}/{name}")),
                        "created_time": "2026-01-15T00:00:00+00:00", "updated_time": "2026-06-01T00:00:00+00:00",
                        "name": name, "description": text, "family": family, "version": version,
                        "architecture": "x86_64", "region": {"name": region, "description": description}})
    return out


def _restart(req: Request, engine) -> Response:
    insts = _instances_named(req, engine)
    if isinstance(insts, Response):
        return insts

    def restart(inst: MockInstance) -> bool | None:
        if inst.phase != RUNNING:
            return False
        engine.mark_restarted(inst)
        return None

    out = []
    for inst in insts:
        now = engine.mutate(PROVIDER, inst.id, restart)
        if now is not None:        # terminated meanwhile: nothing left to restart
            out.append(render(engine, now))
    return Response(200, {"data": {"restarted_instances": out}})


def _key(k) -> dict:
    return {"id": k.id, "name": k.name, "public_key": k.public_key}


def _add_key(req: Request, engine) -> Response:
    body = _body(req)
    if body is None:
        return _invalid()
    name, public_key = body.get("name"), body.get("public_key")
    if not isinstance(name, str) or not 1 <= len(name) <= 64:
        return _invalid("Invalid request data: name must be 1 to 64 characters.")
    if any(k.name == name for k in engine.store.keys(PROVIDER)):
        return error(400, "global/duplicate", "An SSH key with this name already exists.")
    private_key = None
    if public_key is None:     # Lambda generates the pair and returns the private half once
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "key"
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)],
                           check=True, stdin=subprocess.DEVNULL, timeout=30)
            private_key, public_key = path.read_text(), path.with_suffix(".pub").read_text().strip()
    elif not isinstance(public_key, str) or len(public_key) > 4096 or \
            not re.match(r"^(ssh|ecdsa|sk)-\S+ \S+", public_key.strip()):
        return _invalid("Invalid request data: public_key is not a valid SSH public key.")
    key = engine.store.add_key(PROVIDER, name, public_key, uuid.uuid4().hex)
    data = _key(key)
    if private_key:
        data["private_key"] = private_key
    return Response(200, {"data": data})
