"""RunPod REST v2's pods, the core of the RunPod mock (runpod_api.py is its door and
routes here; runpod_clusters.py and runpod_graphql.py make and show pods through this
module): the account, the answer and error shapes every RunPod path shares, placing and
launching a pod, a pod as the API renders it, the pod calls (create, action, patch),
and GET /v2/billing/pods.

Errors are application/problem+json `{title, status, detail, errors?}`; unknown body
fields are 422; create is 201 with status PROVISIONING. Status goes PROVISIONING ->
STARTING -> RUNNING; a `dies` fault turns it to ERROR. `ssh.direct` and `runtime.ports`
appear only while RUNNING; ssh.direct only with 22/tcp exposed. A pod created with a
network volume (mounts.network, runpod_volumes.py) is placed in the volume's data centre in
Secure Cloud only (400 otherwise; mounts.persistent beside it: 400), and boots with the
volume's directory at its mount (inst.extra["volume"], see sshhost.InstanceHost._mount). Every TCP port in `ports`
is served: in namespace mode at the pod's own address on the same port, in loopback mode
on a public port of 127.0.0.1 that the mock forwards. A pod carries RUNPOD_POD_ID and its
own RUNPOD_API_KEY, which may delete that pod only (runpod_api.self_removal). The billing
answers per pod per bucket from what the mock billed (billing.py).
"""

from __future__ import annotations

import re
import secrets
import string
import time
from datetime import datetime, timezone

from gpubench.mock import billing, catalog
from gpubench.mock.state import DEAD, PENDING, RUNNING, STOPPED, MockInstance
from gpubench.mock.web import Request, Response

PROVIDER = "runpod"
API_KEY = "rpa_GPUBENCHMOCK0KEY9F3A7C1E5B2D8F4A6C0E9B7D3F1A5C"
NO_CAPACITY = ("There are no longer any instances available with the requested specifications. "
               "Please refresh and try again.")

TITLES = {400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
          404: "Not Found", 405: "Method Not Allowed", 409: "Conflict", 422: "Unprocessable Entity",
          429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}
CREATE_FIELDS = {"name", "image", "gpu", "cpu", "cloud", "dataCenterIds", "disk", "mounts", "ports", "env",
                 "args", "registry", "templateId", "startSsh", "startJupyter", "globalNetworking"}
GPU_FIELDS = {"id", "count", "allowedCudaVersions", "minCudaVersion"}
MOUNTS_FIELDS = {"persistent", "network"}
PERSISTENT_FIELDS = {"size", "path"}
NETWORK_MOUNT_FIELDS = {"volumeId", "path"}
PATCH_FIELDS = {"name", "image", "disk", "ports", "env", "args", "registry", "locked"}
ACTIONS = {"PROVISIONING": ["stop", "terminate"], "STARTING": ["stop", "terminate"],
           "RUNNING": ["stop", "restart", "terminate"], "EXITED": ["start", "terminate"],
           "ERROR": ["start", "terminate"]}
RATE_LIMIT = {"RateLimit": '"minute";r=59;t=60, "hour";r=2999;t=3600, "day";r=49999;t=86400',
              "RateLimit-Policy": '"minute";q=60;w=60, "hour";q=3000;w=3600, "day";q=50000;w=86400'}

# A pod carries its own id and an API key in its environment (the variables runpodctl
# reads), so that it can remove itself; the mock's pod key may delete that pod only.
ID_VAR, KEY_VAR = "RUNPOD_POD_ID", "RUNPOD_API_KEY"


def problem(status: int, detail: str, errors: list[str] | None = None) -> Response:
    body = {"title": TITLES.get(status, "Error"), "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    return Response(status, body, content_type="application/problem+json",
                    headers={"x-request-id": secrets.token_hex(8)})


def ok(body, status: int = 200) -> Response:
    """A success answer, with the RateLimit headers."""
    return Response(status, body, headers=dict(RATE_LIMIT, **{"x-request-id": secrets.token_hex(8)}))


def not_allowed(allow: str) -> Response:
    r = problem(405, "method not allowed")
    r.headers["Allow"] = allow
    return r


def json_body(req: Request) -> tuple[dict | None, Response | None]:
    """The request's JSON object, or the problem to answer instead."""
    try:
        body = req.json()
    except ValueError:
        return None, problem(400, "request body is not valid JSON")
    if not isinstance(body, dict):
        return None, problem(422, "Request validation failed.", ["$: expected object"])
    return body, None


# ------------------------------------------------------------------ placement

def free_gpus(engine, gpu, cloud: str) -> dict[str, int]:
    return {dc: engine.available(PROVIDER, f"{gpu.runpod_id}@{dc}@{cloud}", cap)
            for dc, cap in catalog.runpod_slots(gpu)[cloud].items()}


def availability_level(free: int, count: int) -> str:
    if free < count:
        return "NONE"
    return "HIGH" if free >= 8 * count else "MEDIUM" if free >= 2 * count else "LOW"


# ------------------------------------------------------------------ pods

def iso(ts: float | None) -> str | None:
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
        "id": inst.id, "name": inst.name, "status": status, "actions": list(ACTIONS.get(status, [])),
        "image": x.get("image", ""), "args": x.get("args", ""), "disk": x.get("disk", 50),
        "mounts": x.get("mounts", {}), "ports": ports, "env": x.get("env", {}),
        "registry": x.get("registry"), "gpu": {"id": inst.gpu_name, "count": inst.gpu_count},
        "cloud": x.get("cloud", "SECURE"), "dataCenterId": inst.region, "cudaVersion": x.get("cuda", "12.8"),
        "ssh": {"proxy": proxy, "direct": direct}, "template": x.get("template"),
        "cost": 0.0 if status in ("EXITED", "ERROR", "TERMINATED") else inst.price_per_hour,
        "locked": bool(x.get("locked", False)), "runtime": runtime,
        "createdAt": iso(inst.created_at), "startedAt": iso(inst.running_since) if running else None,
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


def validate_create(body: dict) -> list[str]:
    errs = [f"$: additional properties '{k}' not allowed" for k in body if k not in CREATE_FIELDS]
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
            errs += [f"$.gpu: additional properties '{k}' not allowed" for k in gpu if k not in GPU_FIELDS]
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
    # the start command is one string (BaseContainerConfig.args); v2 has no argv arrays, and
    # v1's dockerEntrypoint/dockerStartCmd (or entrypoint/cmd) are unknown fields, refused above
    if "args" in body and not isinstance(body["args"], str):
        errs.append("$.args: expected string")
    if "mounts" in body:
        errs += mount_errors(body["mounts"])
    return errs


def mount_errors(mounts) -> list[str]:
    """The schema's Mounts: persistent {size >= 10, path}, network [{volumeId, path}] (at
    most one), no other field anywhere; every field of an entry required."""
    if not isinstance(mounts, dict):
        return ["$.mounts: expected object"]
    errs = [f"$.mounts: additional properties '{k}' not allowed" for k in mounts if k not in MOUNTS_FIELDS]
    persistent = mounts.get("persistent")
    if "persistent" in mounts:
        if not isinstance(persistent, dict):
            errs.append("$.mounts.persistent: expected object")
        else:
            errs += [f"$.mounts.persistent: additional properties '{k}' not allowed"
                     for k in persistent if k not in PERSISTENT_FIELDS]
            errs += [f"$.mounts.persistent: missing property '{k}'" for k in ("size", "path") if k not in persistent]
            size = persistent.get("size", 10)
            if isinstance(size, bool) or not isinstance(size, int) or size < 10:
                errs.append("$.mounts.persistent.size: must be an integer >= 10")
    if "network" in mounts:
        network = mounts["network"]
        if not isinstance(network, list):
            errs.append("$.mounts.network: expected array")
        else:
            if len(network) > 1:
                errs.append("$.mounts.network: must have at most 1 items")
            for n, entry in enumerate(network):
                where = f"$.mounts.network[{n}]"
                if not isinstance(entry, dict):
                    errs.append(f"{where}: expected object")
                    continue
                errs += [f"{where}: additional properties '{k}' not allowed"
                         for k in entry if k not in NETWORK_MOUNT_FIELDS]
                errs += [f"{where}: missing property '{k}'" for k in ("volumeId", "path") if k not in entry]
                errs += [f"{where}.{k}: expected string" for k in ("volumeId", "path")
                         if k in entry and not isinstance(entry[k], str)]
    return errs


def network_volume(engine, mounts, cloud: str, data_centers: list[str]) -> tuple[dict | None, Response | None]:
    """The volume a pod create's mounts.network names, checked against where the pod may
    go: (volume, None), (None, None) without one, or (None, the problem to answer). It
    must be this account's (404), the pod of Secure Cloud (400) and the volume's data
    centre among the pod's dataCenterIds where it gives any (400). Call under engine.lock:
    runpod_volumes' delete, which refuses a volume a pod mounts, takes it too."""
    network = mounts.get("network") if isinstance(mounts, dict) else None
    if not network:
        return None, None
    vid = network[0].get("volumeId") if isinstance(network[0], dict) else None
    doc = engine.store.volume(PROVIDER, str(vid)) if vid else None
    if doc is None:
        return None, problem(404, f"network volume {vid} not found")
    if cloud != "SECURE":
        return None, problem(400, f"network volume {vid}: network volumes are available in Secure Cloud "
                                  f"only, not in cloud {cloud}")
    if data_centers and doc["dataCenter"] not in data_centers:
        return None, problem(400, f"network volume {vid} is in data center {doc['dataCenter']}; a pod in "
                                  f"{', '.join(data_centers)} cannot mount it")
    return doc, None


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
        volume, err = network_volume(engine, (extra or {}).get("mounts"), cloud, data_centers)
        if err is not None:
            return None, err
        if volume is not None:        # the pod goes where its volume is, and boots with it
            data_centers = [volume["dataCenter"]]
            extra = {**(extra or {}), "volume": volume["id"]}
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


def post_pod(req: Request, engine) -> Response:
    body, err = json_body(req)
    if err:
        return err
    errs = validate_create(body)
    if errs:
        return problem(422, "Request validation failed.", errs)
    mounts = body.get("mounts") or {}
    if mounts.get("persistent") and mounts.get("network"):
        return problem(400, "mounts.persistent and mounts.network are mutually exclusive")
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
    return ok(render(engine, inst, status="PROVISIONING"), 201)


def pod_action(iid: str, req: Request, engine) -> Response:
    body, err = json_body(req)
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
        return ok(None, 204)
    refused: list[Response] = []

    def act(pod: MockInstance) -> bool | None:
        status = status_of(pod)
        if action not in ACTIONS.get(status, []):
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
    return refused[0] if refused else ok(render(engine, inst))


def patch_pod(iid: str, req: Request, engine) -> Response:
    body, err = json_body(req)
    if err:
        return err
    bad = [f"$: additional properties '{k}' not allowed" for k in body if k not in PATCH_FIELDS]
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
    return ok(render(engine, inst))


# ------------------------------------------------------------------ billing

BUCKETS = {"hour": 3600, "day": 86400, "week": 7 * 86400}
AMOUNTS = ("totalAmount", "gpuAmount", "cpuAmount", "diskAmount")


def parse_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def pod_billing(req: Request, engine) -> Response:
    """GET /v2/billing/pods: per pod per bucket, the window snapped to bucket bounds
    (startTime defaults to 30 days ago, endTime to now)."""
    q = req.query
    size = q.get("bucketSize", "day")
    if size not in BUCKETS:
        return problem(422, "Request validation failed.", ["bucketSize: must be one of hour, day, week"])
    step = BUCKETS[size]
    now = time.time()
    try:
        end = parse_time(q["endTime"]) if q.get("endTime") else now
        if q.get("lastN"):
            start = (end // step - int(q["lastN"]) + 1) * step
        else:
            start = parse_time(q["startTime"]) if q.get("startTime") else now - 30 * 86400
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
                records.append({"startTime": iso(bucket), "endTime": iso(bucket + step),
                                "podId": charge.instance_id, "totalAmount": amount, "gpuAmount": amount,
                                "cpuAmount": 0, "diskAmount": 0})
            bucket += step
    query = {"startTime": iso(start), "endTime": iso(end), "bucketSize": size}
    if q.get("podId"):
        query["podId"] = q["podId"]
    totals = {k: round(sum(r[k] for r in records), 4) for k in AMOUNTS}
    return ok({"records": records, "metadata": {
        "query": query, "recordCount": len(records), "totals": totals,
        "uniquePodCount": len({r["podId"] for r in records})}})
