"""Vast.ai API (vast.openapi.yaml, and what the vastai 1.9.1 CLI sends) under /api/v0 and
/api/v1/instances/: the door (which requests are Vast.ai's, auth, injected faults, an
instance removing itself), the account, offer search and renting (asks), and billing.
Instances and SSH keys are in vast_instances.py; what both share in vast_common.py.

Every path is accepted with and without its trailing slash. Errors are
`{"success": false, "error": CODE, "msg": TEXT}`; success bodies are sent with a Content-Type of
exactly `application/json` (the CLI checks it). Auth: `Authorization: Bearer KEY` or `?api_key=`.
An instance carries CONTAINER_ID and its own CONTAINER_API_KEY, which may destroy that
instance only (the create answer returns it as `instance_api_key`). Ports asked for in a
create's `env` ({"-p 10022:10022": "1"}) are mapped beside 22/tcp and served: in namespace
mode the instance's own address is its public_ipaddr and each port maps to itself; in
loopback mode each gets a public port of 127.0.0.1 that the mock forwards to the container
port (TCP). GET /api/v0/charges/ answers from what the mock billed (billing.py). Physical clusters and
overlay networks are in vast_overlays.py; local volumes, and an ask's `volume_info`, in vast_volumes.py.
"""

from __future__ import annotations

import base64
import json
import re
import secrets

from gpubench.mock import billing, vast_instances, vast_overlays, vast_volumes
from gpubench.mock.vast_common import PROVIDER, USER_ID, error, json_body, next_contract_id, search_answer
from gpubench.mock.web import NOT_MINE, SURELY, Request, Response

API_KEY = "5f1d0c9a8b7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d5c"
_ASK = re.compile(r"^/api/v0/asks/(\d+)$")


# Vast.ai puts each instance's own id and an API key scoped to it in the instance's
# environment, so that a machine can destroy itself.
ID_VAR, KEY_VAR = "CONTAINER_ID", "CONTAINER_API_KEY"


def claim(req: Request) -> int:
    """Whether `req` is for this API (see apis.py): /api/v0, and of /api/v1 the
    instances list with its trailing slash (as the vastai CLI sends it) or any call
    carrying the Vast.ai key (the rest of /api/v1 is Lambda's)."""
    p = req.path
    if p.startswith("/api/v0/"):
        return SURELY
    if p.startswith("/api/v1/") and (p == "/api/v1/instances/" or api_key_of(req) == API_KEY):
        return SURELY
    return NOT_MINE


def self_removal(req: Request, engine) -> bool:
    """Whether `req` is an instance destroying itself: DELETE of one instance with that
    instance's own key (the only call that key may make)."""
    iid = vast_instances.instance_id_of(req.path)
    key = api_key_of(req)
    if req.method != "DELETE" or iid is None or not key:
        return False
    inst = engine.store.get(PROVIDER, iid)
    own = (inst.extra.get("machine_env") or {}).get(KEY_VAR) if inst is not None else None
    return bool(own) and secrets.compare_digest(key, own)


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
        body = json_body(req)
        if body is None:
            return error(400, "invalid_request", "Invalid json body")
        return _search(body.get("q", {}), engine)
    if p == "/api/v0/charges" and m == "GET":
        return _charges(req, engine)
    if (mt := _ASK.match(p)) and m == "PUT":
        return _create(int(mt.group(1)), req, engine)
    for route in (vast_instances.route, vast_overlays.route, vast_volumes.route):
        found = route(req, engine)
        if found is not None:
            return found
    return error(404, "not_found", f"No such endpoint: {req.method} {req.path}")


def _user(engine) -> dict:
    keys = engine.store.keys(PROVIDER)
    return {"id": USER_ID, "email": "mock@gpubench.invalid", "username": "gpubench-mock",
            "fullname": "gpubench mock", "credit": 100.0, "balance": 100.0, "balance_threshold": 0.0,
            "can_pay": True, "email_verified": True, "has_billing": True,
            "host_agreement_accepted": False, "ssh_key": keys[0].public_key if keys else None,
            "key_id": None, "sid": None}


# ------------------------------------------------------------------ offers

def _search(q, engine) -> Response:
    if not isinstance(q, dict):
        return error(400, "invalid_request", "Invalid query: must be dict of conditions")
    bid = str(q.get("type", "on-demand")).lower() in ("bid", "interruptible")
    full = engine.faults.active(PROVIDER, "no-capacity") is not None
    rows = []
    for offer in engine.vast_offers.values():
        rented = offer.capacity if full else engine.store.used(PROVIDER, str(offer.id))
        rows.append(offer.row(rented, bid))
    return Response(200, {"offers": search_answer(rows, q, [["score", "desc"]], 0)})


def _create(ask_id: int, req: Request, engine) -> Response:
    body = json_body(req)
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
        volume = vast_volumes.for_ask(body.get("volume_info"), offer, engine)
        if isinstance(volume, Response):
            return volume
        iid = next_contract_id(engine)
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
                   "port_map": engine.public_ports(container_ports(env)),
                   "offer": offer.row(0, price is not None, disk), **volume})
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
