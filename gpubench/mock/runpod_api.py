"""RunPod REST v2 (runpod-v2.openapi.json, Frontdoor v2.9.0) under /v2.

Bearer auth only. Errors are application/problem+json `{title, status, detail, errors?}`;
unknown body fields are 422; create is 201 with status PROVISIONING, delete is 204 and the
pod is 404 afterwards. Status goes PROVISIONING -> STARTING -> RUNNING; a `dies` fault turns
it to ERROR. `ssh.direct` and `runtime.ports` appear only while RUNNING; ssh.direct only with
22/tcp exposed. Every TCP port in `ports` is served: in namespace mode at the pod's own address
on the same port, in loopback mode on a public port of 127.0.0.1 that the mock forwards.
Every authenticated answer carries the RateLimit headers. A pod carries RUNPOD_POD_ID and its
own RUNPOD_API_KEY, which may delete that pod only. GET /v2/billing/pods answers per pod per
bucket from what the mock billed (billing.py). Instant Clusters (/v2/clusters) are in
runpod_clusters.py; their member pods leave GET /v2/pods unless includeClusterPods=true.
"""

from __future__ import annotations

import re
import secrets
import string
import sys
import time
from datetime import datetime, timezone
from urllib.parse import unquote

from gpubench.mock import catalog
from gpubench.mock import billing
from gpubench.mock import runpod_clusters
from gpubench.mock.faults import listed
from gpubench.mock.state import DEAD, PENDING, RUNNING, STOPPED, MockInstance
from gpubench.mock.web import Request, Response

PROVIDER = "runpod"
API_KEY = "rpa_GPUBENCHMOCK0KEY9F3A7C1E5B2D8F4A6C0E9B7D3F1A5C"
NO_CAPACITY = ("There are no longer any instances available with the requested specifications. "
               "Please refresh and try again.")
_POD = re.compile(r"^/v2/pods/([^/]+)$")
_ACTION = re.compile(r"^/v2/pods/([^/]+)/action$")
_GPU = re.compile(r"^/v2/catalog/gpus/(.+)$")
_KEY_RE = re.compile(r"^(ssh|ecdsa|sk)-[^\s]+ [^\s]+([ \t][^\n\r]*)?$")
_TITLES = {400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 409: "Conflict", 422: "Unprocessable Entity",
           429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}
_CREATE_FIELDS = {"name", "image", "gpu", "cpu", "cloud", "dataCenterIds", "disk", "mounts", "ports", "env",
                  "args", "registry", "templateId", "startSsh", "startJupyter", "globalNetworking"}
_GPU_FIELDS = {"id", "count", "allowedCudaVersions", "minCudaVersion"}
_PATCH_FIELDS = {"name", "image", "disk", "ports", "env", "args", "registry", "locked"}
_ACTIONS = {"PROVISIONING": ["stop", "terminate"], "STARTING": ["stop", "terminate"],
            "RUNNING": ["stop", "restart", "terminate"], "EXITED": ["start", "terminate"],
            "ERROR": ["start", "terminate"]}
RATE_LIMIT = {"RateLimit": '"minute";r=59;t=60, "hour";r=2999;t=3600, "day";r=49999;t=86400',
              "RateLimit-Policy": '"minute";q=60;w=60, "hour";q=3000;w=3600, "day";q=50000;w=86400'}


# Serverless GPU pools, as the catalog names them (its `pool` field).
POOLS = {"h100-sxm": "HOPPER_141", "h100-pcie": "ADA_80_PRO", "a100-80": "AMPERE_80",
         "a100-40": "AMPERE_48", "l40s": "ADA_48_PRO", "rtx4090": "ADA_24", "rtx3090": "AMPERE_24"}


# A pod carries its own id and an API key in its environment (the variables runpodctl
# reads), so that it can remove itself; the mock's pod key may delete that pod only.
ID_VAR, KEY_VAR = "RUNPOD_POD_ID", "RUNPOD_API_KEY"


def self_removal(req: Request, engine) -> bool:
    """Whether `req` is a pod removing itself: DELETE of one pod with its own key."""
    mt = _POD.match(req.path.rstrip("/"))
    key = req.bearer()
    if req.method != "DELETE" or mt is None or not key:
        return False
    inst = engine.store.get(PROVIDER, mt.group(1))
    own = (inst.extra.get("machine_env") or {}).get(KEY_VAR) if inst is not None else None
    return bool(own) and secrets.compare_digest(key, own)


def problem(status: int, detail: str, errors: list[str] | None = None) -> Response:
    body = {"title": _TITLES.get(status, "Error"), "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    return Response(status, body, content_type="application/problem+json",
                    headers={"x-request-id": secrets.token_hex(8)})


def unauthorized() -> Response:
    return problem(401, "invalid or missing bearer token")


def fault_response(status: int) -> Response:
    """The body of an injected 429/500/503 (the server adds Retry-After)."""
    return problem(status, {429: "rate limit exceeded for the minute window",
                            503: "service temporarily unavailable"}.get(status, "internal server error"))


def authorized(req: Request) -> bool:
    return req.bearer() == API_KEY


def _ok(body, status: int = 200) -> Response:
    return Response(status, body, headers=dict(RATE_LIMIT, **{"x-request-id": secrets.token_hex(8)}))


def handle(req: Request, engine) -> Response:
    resp = _route(req, engine)
    if resp.status < 400 or resp.status == 404:
        resp.headers.update(RATE_LIMIT)
    return resp


def _route(req: Request, engine) -> Response:
    p, m = req.path.rstrip("/"), req.method
    if p.startswith(("/v2/clusters", "/v2/billing/clusters")):
        found = runpod_clusters.route(req, engine, sys.modules[__name__])
        if found is not None:
            return found
    if p == "/v2/catalog/gpus" and m == "GET":
        return _gpus(req, engine, None)
    if (mt := _GPU.match(p)) and m == "GET":
        return _gpus(req, engine, unquote(mt.group(1)))
    if p.startswith("/v2/catalog/datacenters") and m == "GET":
        dcs = [{"id": k, "name": n, "region": r, "globalNetwork": False, "networkVolumeTypes": [],
                "compliance": []} for k, (n, r) in catalog.RUNPOD_DATACENTERS.items()]
        if p == "/v2/catalog/datacenters":
            return _ok({"dataCenters": dcs})
        want = unquote(p.rsplit("/", 1)[1])
        found = [d for d in dcs if d["id"] == want]
        return _ok(found[0]) if found else problem(404, "data center not found")
    if p == "/v2/pods":
        if m == "GET":
            members = req.query.get("includeClusterPods", "false").lower() == "true"
            return _ok({"pods": [render(engine, i) for i in listed(engine, PROVIDER)
                                 if members or not runpod_clusters.is_member(i)]})
        if m == "POST":
            return _create(req, engine)
        return _not_allowed("GET, POST")
    if mt := _ACTION.match(p):
        return _action(mt.group(1), req, engine) if m == "POST" else _not_allowed("POST")
    if mt := _POD.match(p):
        inst = engine.store.get(PROVIDER, mt.group(1))
        if m not in ("GET", "DELETE", "PATCH"):
            return _not_allowed("GET, PATCH, DELETE")
        if inst is None:
            return problem(404, "pod not found")
        if m == "GET":
            return _ok(render(engine, inst))
        if runpod_clusters.is_member(inst):
            return problem(409, f"pod {inst.id} belongs to cluster {inst.extra['cluster']['id']}; "
                                f"delete the cluster via DELETE /v2/clusters/{inst.extra['cluster']['id']}")
        if m == "DELETE":
            billing.terminate(engine, inst)      # a terminate-lies fault answers the same and keeps it
            return _ok(None, 204)
        return _patch(inst.id, req, engine)
    if p == "/v2/billing/pods" and m == "GET":
        return _pod_billing(req, engine)
    if p == "/v2/account/ssh-keys":
        if m == "GET":
            return _ok({"keys": [k.public_key for k in engine.store.keys(PROVIDER)]})
        if m == "PUT":
            return _put_keys(req, engine)
        return _not_allowed("GET, PUT")
    return problem(404, "resource not found")


def _not_allowed(allow: str) -> Response:
    r = problem(405, "method not allowed")
    r.headers["Allow"] = allow
    return r


def _body(req: Request) -> tuple[dict | None, Response | None]:
    try:
        body = req.json()
    except ValueError:
        return None, problem(400, "request body is not valid JSON")
    if not isinstance(body, dict):
        return None, problem(422, "Request validation failed.", ["$: expected object"])
    return body, None


# ------------------------------------------------------------------ catalog

def free_gpus(engine, gpu, cloud: str) -> dict[str, int]:
    return {dc: engine.available(PROVIDER, f"{gpu.runpod_id}@{dc}@{cloud}", cap)
            for dc, cap in catalog.runpod_slots(gpu)[cloud].items()}


def availability_level(free: int, count: int) -> str:
    if free < count:
        return "NONE"
    return "HIGH" if free >= 8 * count else "MEDIUM" if free >= 2 * count else "LOW"


def _gpus(req: Request, engine, gpu_id: str | None) -> Response:
    q = req.query
    include = q.get("include")
    if include is not None and include != "AVAILABILITY":
        return problem(422, "Request validation failed.", ["include: must be AVAILABILITY"])
    if include and not q.get("product"):
        return problem(400, "product is required when include=AVAILABILITY")
    if not include and any(k in q for k in ("product", "count", "cloud", "countryCodes",
                                            "cudaVersions", "minCudaVersion")):
        return problem(400, "product, count, cloud, countryCodes and CUDA filters need include=AVAILABILITY")
    try:
        count = int(q.get("count", "1"))
    except ValueError:
        return problem(422, "Request validation failed.", ["count: must be an integer"])
    cloud = q.get("cloud", "SECURE")
    if cloud not in ("SECURE", "COMMUNITY"):
        return problem(422, "Request validation failed.", ["cloud: must be SECURE or COMMUNITY"])
    out = []
    for gid, g in engine.runpod_gpus.items():
        if gpu_id is not None and gid != gpu_id:
            continue
        item = {"id": gid, "name": g.runpod_name, "pool": POOLS.get(g.key, "MOCK"), "manufacturer": "NVIDIA",
                "memory": g.memory_gb, "secure": True, "community": True,
                "price": {"secure": g.runpod_secure, "community": g.runpod_community,
                          "serverless": round(g.runpod_secure * 2.5, 2)},
                "maxCount": {"secure": 8, "community": 8}}
        if include:
            free = free_gpus(engine, g, cloud)
            best = max(free.values(), default=0)
            item["availability"] = availability_level(best, count)
            dcs = [{"id": dc, "name": catalog.RUNPOD_DATACENTERS[dc][0],
                    "availability": availability_level(n, count)}
                   for dc, n in free.items() if n >= count]
            if dcs:
                item["dataCenters"] = dcs
            item["cudaVersions"] = [{"version": g.cuda, "available": best >= count}]
        out.append(item)
    if gpu_id is not None:
        return _ok(out[0]) if out else problem(404, "gpu type not found")
    return _ok({"gpus": out})


# ------------------------------------------------------------------ pods

def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_of(inst: MockInstance, now: float | None = None) -> str:
    now = time.time() if now is None else now
    if inst.phase == PENDING:
        half = inst.created_at + 0.5 * (inst.ready_at - inst.created_at)
        if inst.never_boots:
            return "PROVISIONING" if now - inst.created_at < 1.0 else "STARTING"
        return "PROVISIONING" if now < half or inst.ready_at == inst.created_at else "STARTING"
    return {RUNNING: "RUNNING", DEAD: "ERROR", STOPPED: "EXITED"}.get(inst.phase, "ERROR")


def render(engine, inst: MockInstance, status: str | None = None) -> dict:
    now = time.time()
    status = status or status_of(inst, now)
    x = inst.extra
    ports = x.get("ports", [])
    running = status == "RUNNING"
    user = engine.host.user
    host = engine.address(inst)
    direct = None
    if running and "22/tcp" in ports:
        direct = {"host": host, "port": inst.ssh_port, "username": user,
                  "command": f"ssh {user}@{host} -p {inst.ssh_port}"}
    proxy_user = f"{inst.id}-{inst.id.encode().hex()[:8]}"
    proxy = {"host": host, "port": inst.ssh_port, "username": proxy_user,
             "command": f"ssh {proxy_user}@{host} -p {inst.ssh_port}"}   # known from the create on
    runtime: dict = {}
    if running:
        runtime = {"uptime": int(now - (inst.running_since or now)),
                   "ports": [{"private": private, "public": public, "type": "tcp", "ip": host}
                             for private, public in tcp_ports(engine, inst)],
                   "gpus": [{"util": 0.0, "memoryUtil": 0.0} for _ in range(inst.gpu_count)],
                   "cpu": {"util": 0.0}, "memory": {"util": 0.0}}
    out = {
        "id": inst.id, "name": inst.name, "status": status, "actions": list(_ACTIONS.get(status, [])),
        "image": x.get("image", ""), "args": x.get("args", ""), "disk": x.get("disk", 50),
        "mounts": x.get("mounts", {}), "ports": ports, "env": x.get("env", {}),
        "registry": x.get("registry"), "gpu": {"id": inst.gpu_name, "count": inst.gpu_count},
        "cloud": x.get("cloud", "SECURE"), "dataCenterId": inst.region, "cudaVersion": x.get("cuda", "12.8"),
        "ssh": {"proxy": proxy, "direct": direct}, "template": x.get("template"),
        "cost": 0.0 if status in ("EXITED", "ERROR", "TERMINATED") else inst.price_per_hour,
        "locked": bool(x.get("locked", False)), "runtime": runtime,
        "createdAt": _iso(inst.created_at), "startedAt": _iso(inst.running_since) if running else None,
        "globalNetworking": {"enabled": False},
    }
    member = x.get("cluster")
    if isinstance(member, dict):
        out["cluster"] = {"id": member["id"], "rank": member["rank"], "ip": member["ip"]}
    return out


def tcp_ports(engine, inst: MockInstance) -> list[tuple[int, int]]:
    """(container port, public port) for each TCP port the create exposed: 22 to the sshd,
    the others served at the instance's address (see Engine.public_ports)."""
    mapped = engine.mapped_ports(inst)
    wanted = [int(p.split("/")[0]) for p in inst.extra.get("ports", []) if p.endswith("/tcp")]
    return [(p, mapped[p]) for p in wanted if p in mapped]


def _validate_create(body: dict) -> list[str]:
    errs = [f"$: additional properties '{k}' not allowed" for k in body if k not in _CREATE_FIELDS]
    if not isinstance(body.get("name"), str) or not body.get("name"):
        errs.append("$: missing property 'name'")
    if ("gpu" in body) == ("cpu" in body):
        errs.append("$: exactly one of 'gpu' or 'cpu' is required")
    if not body.get("image") and not body.get("templateId"):
        errs.append("$: missing property 'image'")
    gpu = body.get("gpu")
    if gpu is not None:
        if not isinstance(gpu, dict):
            errs.append("$.gpu: expected object")
        else:
            errs += [f"$.gpu: additional properties '{k}' not allowed" for k in gpu if k not in _GPU_FIELDS]
            if not isinstance(gpu.get("id"), str):
                errs.append("$.gpu: missing property 'id'")
            cnt = gpu.get("count", 1)
            if not isinstance(cnt, int) or isinstance(cnt, bool) or cnt < 1:
                errs.append("$.gpu.count: must be an integer >= 1")
    if body.get("cloud", "SECURE") not in ("SECURE", "COMMUNITY"):
        errs.append("$.cloud: value must be one of 'SECURE', 'COMMUNITY'")
    disk = body.get("disk", 50)
    if not isinstance(disk, int) or isinstance(disk, bool) or disk < 1:
        errs.append("$.disk: must be an integer >= 1")
    ports = body.get("ports", [])
    if not isinstance(ports, list) or not all(isinstance(p, str) and re.fullmatch(r"\d+/(http|tcp)", p)
                                              for p in ports):
        errs.append("$.ports: each entry must look like '<port>/<http|tcp>'")
    env = body.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        errs.append("$.env: expected an object of strings")
    dcs = body.get("dataCenterIds", [])
    if not isinstance(dcs, list) or not all(isinstance(d, str) for d in dcs):
        errs.append("$.dataCenterIds: expected an array of strings")
    return errs


def new_pod_id() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(14))


def create_pod(engine, *, name: str, image: str, gpu_id: str, count: int, cloud: str,
               data_centers: list[str], disk: int, ports: list[str], env: dict, start_ssh: bool,
               extra: dict | None = None) -> tuple[MockInstance | None, Response | None]:
    """Place and launch a GPU pod; shared with the GraphQL module. Returns (pod, None) or
    (None, problem response)."""
    g = engine.runpod_gpus.get(gpu_id)
    if g is None:
        return None, problem(400, f"unknown GPU type id {gpu_id!r}; see GET /v2/catalog/gpus")
    if count > 8:
        return None, problem(400, f"gpu.count {count} exceeds the maximum of 8 for {gpu_id}")
    keys = [k.public_key for k in engine.store.keys(PROVIDER)] if start_ssh else []
    keys += [line.strip() for line in str(env.get("PUBLIC_KEY", "")).splitlines() if line.strip()]
    pod_id = new_pod_id()
    machine_env = {ID_VAR: pod_id, KEY_VAR: "rpa_" + secrets.token_hex(24).upper()}
    with engine.lock:
        free = free_gpus(engine, g, cloud)
        candidates = [dc for dc in free if not data_centers or dc in data_centers]
        chosen = next((dc for dc in candidates if free[dc] >= count), None)
        if chosen is None:
            return None, problem(400, NO_CAPACITY)
        inst = engine.launch(
            PROVIDER, iid=pod_id, name=name, offer_key=f"{gpu_id}@{chosen}@{cloud}", units=count,
            gpu_name=gpu_id, gpu_count=count, price_per_hour=catalog.runpod_price(g, cloud) * count,
            region=chosen, authorized_keys=keys,
            extra={"image": image, "disk": disk, "ports": ports, "env": env, "cloud": cloud,
                   "cuda": g.cuda, "machine_env": machine_env,
                   "port_map": engine.public_ports([p for p in ports if p.endswith("/tcp")]),
                   **(extra or {})})
    return inst, None


def _create(req: Request, engine) -> Response:
    body, err = _body(req)
    if err:
        return err
    errs = _validate_create(body)
    if errs:
        return problem(422, "Request validation failed.", errs)
    if "cpu" in body:
        return problem(400, NO_CAPACITY)      # the mock rents GPU pods only
    gpu = body["gpu"]
    inst, err = create_pod(engine, name=body["name"], image=body.get("image", ""), gpu_id=gpu["id"],
                           count=gpu.get("count", 1), cloud=body.get("cloud", "SECURE"),
                           data_centers=body.get("dataCenterIds") or [], disk=body.get("disk", 50),
                           ports=body.get("ports", []), env=body.get("env", {}),
                           start_ssh=bool(body.get("startSsh", False)),
                           extra={"args": body.get("args", ""), "mounts": body.get("mounts", {}),
                                  "template": body.get("templateId"),
                                  "registry": body.get("registry")})
    if err:
        return err
    return _ok(render(engine, inst, status="PROVISIONING"), 201)


def _action(iid: str, req: Request, engine) -> Response:
    body, err = _body(req)
    if err:
        return err
    action = body.get("action")
    extra_fields = [k for k in body if k != "action"]
    if action not in ("start", "stop", "restart", "terminate") or extra_fields:
        return problem(422, "Request validation failed.",
                       ["$.action: value must be one of 'start', 'stop', 'restart', 'terminate'"] +
                       [f"$: additional properties '{k}' not allowed" for k in extra_fields])
    inst = engine.store.get(PROVIDER, iid)
    if inst is None:
        return problem(404, "pod not found")
    if action == "terminate":      # allowed in every status
        billing.terminate(engine, inst)
        return _ok(None, 204)
    refused: list[Response] = []

    def act(pod: MockInstance) -> bool | None:
        status = status_of(pod)
        if action not in _ACTIONS.get(status, []):
            refused.append(problem(409, f"action '{action}' is not valid for a pod in status {status}"))
            return False
        if action in ("stop", "restart") and pod.extra.get("locked"):
            refused.append(problem(409, "pod is locked"))
            return False
        {"stop": engine.mark_stopped, "start": engine.mark_booting,
         "restart": engine.mark_restarted}[action](pod)
        return None

    inst = engine.mutate(PROVIDER, iid, act)
    if inst is None:
        return problem(404, "pod not found")
    return refused[0] if refused else _ok(render(engine, inst))


def _patch(iid: str, req: Request, engine) -> Response:
    body, err = _body(req)
    if err:
        return err
    bad = [f"$: additional properties '{k}' not allowed" for k in body if k not in _PATCH_FIELDS]
    if bad:
        return problem(422, "Request validation failed.", bad)

    def change(pod: MockInstance) -> None:
        if "name" in body:
            pod.name = str(body["name"])
        for k in ("image", "disk", "ports", "env", "args", "registry", "locked"):
            if k in body:
                pod.extra[k] = body[k]

    inst = engine.mutate(PROVIDER, iid, change)
    if inst is None:
        return problem(404, "pod not found")
    return _ok(render(engine, inst))


def _put_keys(req: Request, engine) -> Response:
    body, err = _body(req)
    if err:
        return err
    keys = body.get("keys")
    errs = [f"$: additional properties '{k}' not allowed" for k in body if k != "keys"]
    if not isinstance(keys, list):
        errs.append("$: missing property 'keys'")
    else:
        errs += [f"$.keys[{n}]: does not match pattern" for n, k in enumerate(keys)
                 if not isinstance(k, str) or not _KEY_RE.match(k.strip())]
    if errs:
        return problem(422, "Request validation failed.", errs)
    engine.store.replace_keys(PROVIDER, [k.strip() for k in keys])
    return _ok({"keys": [k.public_key for k in engine.store.keys(PROVIDER)]})


# ------------------------------------------------------------------ billing

_BUCKETS = {"hour": 3600, "day": 86400, "week": 7 * 86400}
_AMOUNTS = ("totalAmount", "gpuAmount", "cpuAmount", "diskAmount")


def _parse_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def _pod_billing(req: Request, engine) -> Response:
    """GET /v2/billing/pods: per pod per bucket, the window snapped to bucket bounds
    (startTime defaults to 30 days ago, endTime to now)."""
    q = req.query
    size = q.get("bucketSize", "day")
    if size not in _BUCKETS:
        return problem(422, "Request validation failed.", ["bucketSize: must be one of hour, day, week"])
    step = _BUCKETS[size]
    now = time.time()
    try:
        end = _parse_time(q["endTime"]) if q.get("endTime") else now
        if q.get("lastN"):
            start = (end // step - int(q["lastN"]) + 1) * step
        else:
            start = _parse_time(q["startTime"]) if q.get("startTime") else now - 30 * 86400
    except (ValueError, KeyError):
        return problem(422, "Request validation failed.", ["startTime/endTime: must be RFC 3339 (Z)"])
    start, end = start // step * step, -(-end // step) * step
    records = []
    for charge in billing.charges(engine, PROVIDER):
        if q.get("podId") and charge.instance_id != q["podId"]:
            continue
        bucket = start
        while bucket < end:
            part = charge.within(bucket, bucket + step)
            if part is not None:
                amount = round(part.amount, 4)
                records.append({"startTime": _iso(bucket), "endTime": _iso(bucket + step),
                                "podId": charge.instance_id, "totalAmount": amount, "gpuAmount": amount,
                                "cpuAmount": 0, "diskAmount": 0})
            bucket += step
    query = {"startTime": _iso(start), "endTime": _iso(end), "bucketSize": size}
    if q.get("podId"):
        query["podId"] = q["podId"]
    totals = {k: round(sum(r[k] for r in records), 4) for k in _AMOUNTS}
    return _ok({"records": records, "metadata": {
        "query": query, "recordCount": len(records), "totals": totals,
        "uniquePodCount": len({r["podId"] for r in records})}})
