"""Vast.ai API (vast.openapi.yaml, and what the vastai 1.9.1 CLI sends) under /api/v0 and
/api/v1/instances/.

Every path is accepted with and without its trailing slash. Errors are
`{"success": false, "error": CODE, "msg": TEXT}`; success bodies are sent with a Content-Type of
exactly `application/json` (the CLI checks it). Auth: `Authorization: Bearer KEY` or `?api_key=`.
actual_status goes null -> loading -> running; an interruptible instance hit by a `dies` fault
is outbid (intended/cur/next state "stopped"), an on-demand one goes offline. An instance
carries CONTAINER_ID and its own CONTAINER_API_KEY, which may destroy that instance only
(the create answer returns it as `instance_api_key`). Ports asked for in a create's `env`
({"-p 10022:10022": "1"}) are mapped beside 22/tcp and served: in namespace mode the
instance's own address is its public_ipaddr and each port maps to itself; in loopback mode
each gets a public port of 127.0.0.1 that the mock forwards to the container port (TCP).
GET /api/v0/charges/ answers from what the mock billed (billing.py).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
from datetime import datetime, timezone

from gpubench.mock import billing
from gpubench.mock.faults import listed
from gpubench.mock.state import DEAD, PENDING, RUNNING, STOPPED, MockInstance
from gpubench.mock.web import Request, Response

PROVIDER = "vast"
API_KEY = "5f1d0c9a8b7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d5c"
USER_ID = 424242
PAGE_MAX = 25
_ASK = re.compile(r"^/api/v0/asks/(\d+)$")
_INSTANCE = re.compile(r"^/api/v0/instances/(\d+)$")
_SSH_KEY = re.compile(r"^/api/v0/ssh/(\d+)$")
_INSTANCE_KEYS = re.compile(r"^/api/v0/instances/(\d+)/ssh$")
_INSTANCE_KEY = re.compile(r"^/api/v0/instances/(\d+)/ssh/(\d+)$")
# Vast.ai instance ids are 8-digit integers. Each mock starts at its own point in that
# range (from its mock_id), so two mocks side by side hand out different ids.
FIRST_INSTANCE_ID = 24_100_000
INSTANCE_ID_SPREAD = 800_000


# Vast.ai puts each instance's own id and an API key scoped to it in the instance's
# environment, so that a machine can destroy itself.
ID_VAR, KEY_VAR = "CONTAINER_ID", "CONTAINER_API_KEY"


def first_instance_id(mock_id: str) -> int:
    return FIRST_INSTANCE_ID + int(mock_id, 16) % INSTANCE_ID_SPREAD


def self_removal(req: Request, engine) -> bool:
    """Whether `req` is an instance destroying itself: DELETE of one instance with that
    instance's own key (the only call that key may make)."""
    mt = _INSTANCE.match(req.path.rstrip("/"))
    key = api_key_of(req)
    if req.method != "DELETE" or mt is None or not key:
        return False
    inst = engine.store.get(PROVIDER, mt.group(1))
    own = (inst.extra.get("machine_env") or {}).get(KEY_VAR) if inst is not None else None
    return bool(own) and secrets.compare_digest(key, own)


_SPECIAL = {"order", "type", "limit", "allocated_storage", "disable_bundling"}


def error(status: int, code: str, msg: str, **more) -> Response:
    return Response(status, {"success": False, "error": code, "msg": msg, **more})


def unauthorized() -> Response:
    return error(401, "auth_error", "Invalid user key")


def fault_response(status: int) -> Response:
    """The body of an injected 429/500/503 (the server adds Retry-After)."""
    if status == 429:
        return error(429, "rate_limit_exceeded", "API requests too frequent endpoint threshold=2.0")
    if status == 503:
        return error(503, "service_unavailable", "Service temporarily unavailable")
    return error(500, "server_error", "Internal server error")


def api_key_of(req: Request) -> str | None:
    return req.bearer() or req.query.get("api_key")


def authorized(req: Request) -> bool:
    key = api_key_of(req)
    if key is None and req.path.rstrip("/") == "/api/v0/bundles":
        return True          # offer search needs no account
    return key == API_KEY


def handle(req: Request, engine) -> Response:
    p, m = req.path.rstrip("/"), req.method
    if p == "/api/v0/users/current" and m == "GET":
        return Response(200, _user(engine))
    if p == "/api/v0/bundles" and m in ("POST", "GET"):
        try:
            q = req.json() if m == "POST" else json.loads(req.query.get("q") or "{}")
        except ValueError:
            return error(400, "invalid_request", "Invalid json body")
        return _search(q, engine)
    if p == "/api/v0/search/asks" and m == "PUT":
        body = _body(req)
        if body is None:
            return error(400, "invalid_request", "Invalid json body")
        return _search(body.get("q", {}), engine)
    if p == "/api/v0/charges" and m == "GET":
        return _charges(req, engine)
    if (mt := _ASK.match(p)) and m == "PUT":
        return _create(int(mt.group(1)), req, engine)
    if p == "/api/v1/instances" and m == "GET":
        return _list_v1(req, engine)
    if p == "/api/v0/instances" and m == "GET":
        rows = [_row(engine, i) for i in listed(engine, PROVIDER)]
        return Response(200, {"instances_found": len(rows), "instances": rows})
    if mt := _INSTANCE.match(p):
        return _instance(mt.group(1), req, engine)
    if p == "/api/v0/ssh":
        if m == "GET":
            return Response(200, [{"id": int(k.id), "user_id": USER_ID, "key": k.public_key,
                                   "created_at": _iso(k.created_at), "deleted_at": None}
                                  for k in engine.store.keys(PROVIDER)])
        if m == "POST":
            return _add_key(req, engine)
    if (mt := _SSH_KEY.match(p)) and m == "DELETE":
        if not engine.store.delete_key(PROVIDER, mt.group(1)):
            return error(404, "not_found", "SSH key not found")
        return Response(200, {"success": True})
    if (mt := _SSH_KEY.match(p)) and m == "PUT":
        return _update_key(mt.group(1), req, engine)
    if mt := _INSTANCE_KEYS.match(p):
        return _instance_keys(mt.group(1), req, engine)
    if (mt := _INSTANCE_KEY.match(p)) and m == "DELETE":
        return _detach_key(mt.group(1), mt.group(2), engine)
    return error(404, "not_found", f"No such endpoint: {req.method} {req.path}")


def _body(req: Request) -> dict | None:
    try:
        body = req.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else ({} if body is None else None)


def _iso(ts: float) -> str:
    """A time as the API document writes it: "2023-01-01T12:00:00Z"."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _user(engine) -> dict:
    keys = engine.store.keys(PROVIDER)
    return {"id": USER_ID, "email": "mock@gpubench.invalid", "username": "gpubench-mock",
            "fullname": "gpubench mock", "credit": 100.0, "balance": 100.0, "balance_threshold": 0.0,
            "can_pay": True, "email_verified": True, "has_billing": True,
            "host_agreement_accepted": False, "ssh_key": keys[0].public_key if keys else None,
            "key_id": None, "sid": None}


# ------------------------------------------------------------------ offers

def _num(v):
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        try:
            return float(low)
        except ValueError:
            return v
    return v


def _match(value, op: str, want) -> bool:
    a = _num(value)
    if op in ("in", "notin"):
        items = [_num(w) for w in (want if isinstance(want, list) else [want])]
        return (a in items) == (op == "in")
    b = _num(want)
    if op == "eq":
        return a == b
    if op == "neq":
        return a != b
    try:
        return {"gt": a > b, "gte": a >= b, "lt": a < b, "lte": a <= b}[op]
    except (TypeError, KeyError):
        return False


def _filter(rows: list[dict], q: dict) -> list[dict]:
    out = []
    for row in rows:
        keep = True
        for fld, cond in q.items():
            if fld in _SPECIAL or fld not in row or not isinstance(cond, dict):
                continue       # unknown keys (chunked, georegion, ...) are ignored, as Vast does
            if not all(_match(row[fld], op, want) for op, want in cond.items()):
                keep = False
                break
        if keep:
            out.append(row)
    return out


def _search(q, engine) -> Response:
    if not isinstance(q, dict):
        return error(400, "invalid_request", "Invalid query: must be dict of conditions")
    bid = str(q.get("type", "on-demand")).lower() in ("bid", "interruptible")
    full = engine.faults.active(PROVIDER, "no-capacity") is not None
    rows = []
    for offer in engine.vast_offers.values():
        rented = offer.capacity if full else engine.store.used(PROVIDER, str(offer.id))
        rows.append(offer.row(rented, bid))
    rows = _filter(rows, q)
    for fld, direction in reversed(q.get("order") or [["score", "desc"]]):
        rows.sort(key=lambda r: (r.get(fld) is None, r.get(fld) if r.get(fld) is not None else 0),
                  reverse=str(direction).lower() == "desc")
    try:
        limit = int(q.get("limit") or 0)
    except (TypeError, ValueError):
        limit = 0
    if limit > 0:
        rows = rows[:limit]
    return Response(200, {"offers": rows})


def _create(ask_id: int, req: Request, engine) -> Response:
    body = _body(req)
    if body is None:
        return error(400, "invalid_request", "Invalid json body")
    offer = engine.vast_offers.get(ask_id)
    gone = error(404, "invalid_args",
                 f"error 404/3603: no_such_ask Instance type by id {ask_id} is not available.", ask_id=ask_id)
    if offer is None:
        return gone
    price = body.get("price")
    if price is not None:
        try:
            price = float(price)
        except (TypeError, ValueError):
            return error(400, "invalid_price", "error 400/3467: Invalid args: price must be a number",
                         ask_id=ask_id)
        if not 0.001 <= price <= 128 or price < offer.min_bid:
            return error(400, "invalid_price",
                         f"error 400/3467: Invalid args: bid price {price} is below the minimum "
                         f"{offer.min_bid:.4f}", ask_id=ask_id)
    image = body.get("image")
    if not image and not body.get("template_hash_id"):
        return error(400, "invalid_args", "error 400/3467: Invalid args: image is required", ask_id=ask_id)
    try:
        disk = float(body.get("disk") or 8.0)
    except (TypeError, ValueError):
        return error(400, "invalid_args", "error 400/3467: Invalid args: disk must be a number",
                     ask_id=ask_id)
    env = body.get("env") or {}
    if isinstance(env, str):      # the spec's docker-flag string: "-e K=V -p 80:80"
        pairs = re.findall(r"-e\s+(\S+?)=(\S*)", env)
        ports = re.findall(r"-p\s+(\S+)", env)
        env = {k: v for k, v in pairs}
        env.update({f"-p {p}": "1" for p in ports})
    if not isinstance(env, dict):
        return error(400, "invalid_args", "error 400/3467: Invalid args: env must be a dict", ask_id=ask_id)
    with engine.lock:
        if engine.available(PROVIDER, str(offer.id), offer.capacity) < 1:
            return gone
        iid = engine.store.next_counter("vast_instance_id", first_instance_id(engine.store.mock_id))
        machine_env = {ID_VAR: str(iid), KEY_VAR: secrets.token_hex(32)}
        dph = price if price is not None else offer.dph
        inst = engine.launch(
            PROVIDER, iid=str(iid), name=body.get("label") or "", offer_key=str(offer.id), units=1,
            gpu_name=offer.gpu.vast_name, gpu_count=offer.count, price_per_hour=dph,
            region=offer.geolocation, authorized_keys=[k.public_key for k in engine.store.keys(PROVIDER)],
            interruptible=price is not None,
            extra={"image": image, "disk": disk, "label": body.get("label"), "env": env,
                   "onstart": body.get("onstart"), "runtype": body.get("runtype") or "ssh",
                   "machine_id": offer.machine_id, "host_id": offer.host_id, "ask_id": offer.id,
                   "gpu_ram": offer.gpu.memory_gb * 1024, "min_bid": offer.min_bid,
                   "cuda_max_good": float(offer.gpu.cuda), "machine_env": machine_env,
                   "port_map": engine.public_ports(container_ports(env)), "offer": offer.row(0, price is not None, disk)})
    # the key scoped to this instance, as Vast.ai returns it (see self_removal)
    return Response(200, {"success": True, "new_contract": int(inst.id),
                          "instance_api_key": machine_env[KEY_VAR]})


_PORT_FLAG = re.compile(r"^-p\s+(?:[\d.]+:)?(\d+):(\d+)(?:/(tcp|udp))?$")


def container_ports(env: dict) -> list[str]:
    """The container ports a create's `env` asks to expose, as the official CLI and other
    clients send them ({"-p 10022:10022": "1"}): ["10022/tcp"]. 22/tcp is always mapped
    (to the instance's sshd) besides."""
    out = []
    for key in env:
        m = _PORT_FLAG.match(str(key).strip())
        if m and m.group(2) != "22":
            out.append(f"{m.group(2)}/{m.group(3) or 'tcp'}")
    return out


# ------------------------------------------------------------------ instances

def _states(inst: MockInstance, now: float) -> tuple[str | None, str, str, str, str]:
    """actual_status, intended_status, cur_state, next_state, status_msg."""
    if inst.phase == PENDING:
        early = now - inst.created_at < 0.3 * max(inst.ready_at - inst.created_at, 0.0) or \
            (inst.never_boots and now - inst.created_at < 1.0)
        if early:
            return None, "running", "running", "running", ""
        return "loading", "running", "running", "running", "Pulling image"
    if inst.phase == RUNNING:
        return "running", "running", "running", "running", "success, running"
    if inst.phase == DEAD:
        if inst.interruptible:
            return "stopped", "stopped", "stopped", "stopped", "Instance stopped: outbid by a higher bid"
        return "offline", "running", "running", "running", "Host is offline"
    if inst.phase == STOPPED:
        return "exited", "stopped", "stopped", "stopped", "Exited (0)"
    return "unknown", "running", "running", "running", ""


def _ports(inst: MockInstance) -> dict:
    """Docker-style port map: 22/tcp to the instance's sshd, then the ports its create
    asked for in `env`."""
    ports = {"22/tcp": inst.ssh_port, **(inst.extra.get("port_map") or {})}
    return {name: [{"HostIp": "0.0.0.0", "HostPort": str(port)}] for name, port in ports.items()}


def _row(engine, inst: MockInstance) -> dict:
    now = time.time()
    actual, intended, cur, nxt, msg = _states(inst, now)
    x = inst.extra
    running = inst.phase == RUNNING
    offer = x.get("offer") or {}
    host_ports = [inst.ssh_port, *(x.get("port_map") or {}).values()]
    address = engine.address(inst)
    disk_hour = (x.get("disk") or 0.0) * offer.get("storage_cost", 0.15) / 720
    costs = {"gpuCostPerHour": inst.price_per_hour, "diskHour": round(disk_hour, 6),
             "totalHour": round(inst.price_per_hour + disk_hour, 6), "discountTotalHour": 0,
             "discountedTotalPerHour": round(inst.price_per_hour + disk_hour, 6)}
    hardware = {k: offer[k] for k in (
        "cpu_arch", "cpu_name", "bw_nvlink", "gpu_frac", "gpu_lanes", "gpu_mem_bw", "disk_bw", "disk_name",
        "dlperf", "dlperf_per_dphtotal", "flops_per_dphtotal", "total_flops", "score", "mobo_name",
        "os_version", "pci_gen", "pcie_bw", "static_ip", "webpage", "credit_discount_max",
        "storage_cost", "vram_costperhour", "duration", "hosting_type", "logo") if k in offer}
    place = inst.region.rsplit(",", 1)[-1].strip()
    row = {
        "id": int(inst.id), "machine_id": x.get("machine_id"), "host_id": x.get("host_id"),
        "bundle_id": x.get("ask_id"), "actual_status": actual, "intended_status": intended,
        "cur_state": cur, "next_state": nxt, "status_msg": msg, "label": x.get("label"),
        "image_uuid": x.get("image"), "image_runtype": x.get("runtype"), "image_args": [],
        "onstart": x.get("onstart") or "", "extra_env": [[k, v] for k, v in (x.get("env") or {}).items()],
        "template_id": None, "template_hash_id": None, "template_name": None,
        "gpu_name": inst.gpu_name, "num_gpus": inst.gpu_count, "gpu_ram": x.get("gpu_ram"),
        "gpu_totalram": (x.get("gpu_ram") or 0) * inst.gpu_count, "gpu_util": 0.0 if running else None,
        "gpu_arch": "nvidia", "cpu_cores": 16 * inst.gpu_count, "cpu_cores_effective": 16.0 * inst.gpu_count,
        "cpu_ram": 64000 * inst.gpu_count, "disk_space": x.get("disk"), "disk_usage": 0.0, "disk_util": 0.0,
        "cuda_max_good": x.get("cuda_max_good"), "dph_base": inst.price_per_hour,
        "dph_total": inst.price_per_hour, "min_bid": x.get("min_bid"), "is_bid": inst.interruptible,
        "ssh_host": address, "ssh_port": inst.ssh_port, "ssh_idx": "0",
        "machine_dir_ssh_port": inst.ssh_port, "public_ipaddr": address,
        "local_ipaddrs": f"{address} ", "direct_port_count": 64,
        "direct_port_start": min(host_ports), "direct_port_end": max(host_ports),
        "ports": _ports(inst) if running else None,
        "geolocation": inst.region, "country_code": place if len(place) == 2 else None,
        "reliability2": 0.99, "verification": "verified",
        "inet_up": 800.0, "inet_down": 1500.0, "start_date": inst.created_at,
        "end_date": offer.get("end_date", inst.created_at + 30 * 86400.0),
        "uptime_mins": round((now - inst.running_since) / 60, 2) if running and inst.running_since else None,
        "jupyter_token": inst.id.encode().hex() * 4, "volume_info": [], "rentable": False, "external": False,
        "cpu_util": 0.0 if running else None, "gpu_temp": 35.0 if running else None,
        "mem_limit": 64.0 * inst.gpu_count, "mem_usage": 0.0, "vmem_usage": 0.0,
        "search": costs, "instance": dict(costs), "storage_total_cost": costs["diskHour"],
        "credit_balance": 100.0, "credit_discount": 0.0,
        "client_run_time": round(now - inst.created_at, 3), "host_run_time": round(now - inst.created_at, 3),
        "time_remaining": "", "time_remaining_isbid": "",
    }
    row.update(hardware)
    return row


def _list_v1(req: Request, engine) -> Response:
    try:
        filters = json.loads(req.query.get("select_filters") or "{}")
        order_by = json.loads(req.query.get("order_by") or '[{"col": "id", "dir": "asc"}]')
        limit = int(req.query.get("limit") or PAGE_MAX)
    except (ValueError, TypeError):
        return error(400, "invalid_request", "Error in query parameters: malformed value")
    if not isinstance(filters, dict):
        return error(400, "invalid_request", "Error in query parameters: select_filters must be an object")
    limit = PAGE_MAX if limit > PAGE_MAX else (5 if limit <= 0 else limit)
    all_rows = [_row(engine, i) for i in listed(engine, PROVIDER)]
    rows = _filter(all_rows, filters)
    first = order_by[0] if isinstance(order_by, list) and order_by and isinstance(order_by[0], dict) else {}
    desc = str(first.get("dir", "asc")).lower() == "desc"
    rows.sort(key=lambda r: r["id"], reverse=desc)
    after = req.query.get("after_token")
    if after:
        try:
            last = int(base64.urlsafe_b64decode(after.encode()).decode())
        except ValueError:
            return error(400, "invalid_token", "Invalid after_token")
        rows = [r for r in rows if (r["id"] < last if desc else r["id"] > last)]
    page, more = rows[:limit], len(rows) > limit
    token = base64.urlsafe_b64encode(str(page[-1]["id"]).encode()).decode() if more and page else None
    labels: dict[str, int] = {}
    for r in all_rows:
        labels[r["label"] or ""] = labels.get(r["label"] or "", 0) + 1
    return Response(200, {"success": True, "instances_found": len(page), "total_instances": len(all_rows),
                          "label_counts": labels, "next_token": token, "instances": page})


def _instance(iid: str, req: Request, engine) -> Response:
    inst = engine.store.get(PROVIDER, iid)
    if req.method == "GET":
        return Response(200, {"instances": _row(engine, inst) if inst else None})
    if inst is None:
        return error(404, "not_found", "Instance not found")
    if req.method == "DELETE":
        billing.terminate(engine, inst)      # a terminate-lies fault answers the same and keeps it
        return Response(200, {"success": True, "msg": f"destroying instance {iid}."})
    if req.method == "PUT":
        body = _body(req) or {}
        state = body.get("state")
        if state not in (None, "stopped", "running"):
            return error(400, "invalid_args", f"error 400/3467: Invalid args: bad state {state!r}")

        def change(i: MockInstance) -> None:
            if "label" in body:
                i.extra["label"] = body["label"]
                i.name = body["label"] or ""
            if state == "stopped" and i.phase in (PENDING, RUNNING):
                engine.mark_stopped(i)
            elif state == "running" and i.phase in (STOPPED, DEAD):
                engine.mark_booting(i)

        if engine.mutate(PROVIDER, iid, change) is None:
            return error(404, "not_found", "Instance not found")
        return Response(200, {"success": True})
    return error(405, "method_not_allowed", f"{req.method} not allowed")


def _add_key(req: Request, engine) -> Response:
    body = _body(req) or {}
    key = body.get("ssh_key")
    if not key or not isinstance(key, str):
        return error(400, "no_ssh_key", "No ssh key provided")
    if not re.match(r"^(ssh|ecdsa|sk)-\S+ \S+", key.strip()):
        return error(400, "invalid_args", "Invalid ssh key")
    kid = engine.store.next_counter("vast_ssh_key_id", 310_000)
    k = engine.store.add_key(PROVIDER, "", key, str(kid))
    # Vast adds an account key to every current instance too
    for inst in engine.store.instances(PROVIDER):
        engine.mutate(PROVIDER, inst.id, lambda i: _attach(engine, i, k.public_key))
    return Response(200, {"success": True, "key": {"id": kid, "user_id": USER_ID, "public_key": k.public_key,
                                                   "created_at": _iso(k.created_at), "deleted_at": None}})


def _update_key(key_id: str, req: Request, engine) -> Response:
    body = _body(req) or {}
    key = body.get("ssh_key")
    if not isinstance(key, str) or not re.match(r"^(ssh|ecdsa|sk)-\S+ \S+", key.strip()):
        return error(400, "no_ssh_key", "No ssh key provided")
    old = next((k for k in engine.store.keys(PROVIDER) if k.id == key_id), None)
    if old is None:
        return error(404, "not_found", "SSH key not found")
    engine.store.delete_key(PROVIDER, key_id)
    k = engine.store.add_key(PROVIDER, "", key, key_id)
    return Response(200, {"success": True, "key": {"id": int(key_id), "user_id": USER_ID,
                                                   "public_key": k.public_key, "created_at": _iso(old.created_at),
                                                   "deleted_at": None}})


def _instance_keys(iid: str, req: Request, engine) -> Response:
    """GET lists an instance's keys; POST attaches one to a running instance."""
    inst = engine.store.get(PROVIDER, iid)
    if inst is None:
        return error(404, "not_found", "Instance not found")
    if req.method == "GET":
        return Response(200, {"success": True, "ssh_keys": json.dumps(inst.authorized_keys)})
    if req.method != "POST":
        return error(405, "method_not_allowed", f"{req.method} not allowed")
    key = (_body(req) or {}).get("ssh_key")
    if not isinstance(key, str) or not re.match(r"^(ssh|ecdsa|sk)-\S+ \S+", key.strip()):
        return error(400, "no_ssh_key", "No ssh key provided")
    if engine.mutate(PROVIDER, iid, lambda i: _attach(engine, i, key.strip())) is None:
        return error(404, "not_found", "Instance not found")
    return Response(200, {"success": True, "msg": "SSH key attached successfully"})


def _attach(engine, inst: MockInstance, public_key: str) -> bool | None:
    """Inside engine.mutate: add a key to an instance (and its sshd's authorized_keys)."""
    if public_key in inst.authorized_keys:
        return False
    inst.authorized_keys.append(public_key)
    engine.host.update_keys(inst)
    return None


def _detach_key(iid: str, key_id: str, engine) -> Response:
    inst = engine.store.get(PROVIDER, iid)
    key = next((k for k in engine.store.keys(PROVIDER) if k.id == key_id), None)
    if inst is None or key is None:
        return error(404, "not_found", "Instance or SSH key not found")

    def detach(i: MockInstance) -> None:
        i.authorized_keys = [k for k in i.authorized_keys if k != key.public_key]
        engine.host.update_keys(i)

    if engine.mutate(PROVIDER, iid, detach) is None:
        return error(404, "not_found", "Instance or SSH key not found")
    return Response(200, {"success": True, "msg": "SSH key detached successfully"})


# ------------------------------------------------------------------ billing

def _charges(req: Request, engine) -> Response:
    """GET /api/v0/charges/ (`vastai show invoices-v1 --charges`): one entry per instance
    whose life overlaps select_filters' required `day` range, newest first, in pages."""
    try:
        filters = json.loads(req.query.get("select_filters") or "{}")
        day = filters.get("day") or {}
        lo, hi = float(day["gte"]), float(day["lte"])
        limit = min(int(req.query.get("limit") or 100), 500)
    except (ValueError, KeyError, TypeError, AttributeError):
        return Response(400, {"success": False,
                              "msg": "Must provide both 'day' gte and lte filters for instance charges"})
    types = (filters.get("type") or {}).get("in") or ["instance"]
    results = []
    for charge in billing.charges(engine, PROVIDER) if "instance" in types else []:
        part = charge.within(lo, hi + 1)
        if part is None:
            continue
        hours = (part.end - part.start) / 3600
        amount = round(part.amount, 3)
        results.append({
            "start": int(part.start), "end": int(part.end), "type": "instance",
            "source": f"instance-{charge.instance_id}",
            "description": f"Instance {charge.instance_id} Charges - {hours:.3f} hours",
            "amount": amount, "metadata": {"label": charge.label} if charge.label else {},
            "items": [{"start": int(part.start), "end": int(part.end), "type": "gpu", "source": None,
                       "description": f"{hours:.3f} hours at ${charge.price_per_hour:.3f}/hour",
                       "amount": amount, "metadata": {}, "items": []}]})
    results.sort(key=lambda r: r["start"], reverse=str(req.query.get("latest_first", "true")).lower() != "false")
    after = req.query.get("after_token")
    try:
        offset = int(base64.urlsafe_b64decode(after.encode()).decode()) if after else 0
    except ValueError:
        return error(400, "invalid_token", "Invalid pagination token")
    page = results[offset:offset + limit]
    more = offset + limit < len(results)
    token = base64.urlsafe_b64encode(str(offset + limit).encode()).decode() if more else None
    return Response(200, {"success": True, "count": len(page), "total": len(results),
                          "next_token": token, "results": page})
