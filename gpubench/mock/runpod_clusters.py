"""RunPod REST v2 Instant Clusters (runpod-v2.openapi.json: Cluster, ClusterCompute, PodCluster,
ClusterNetwork, ClusterPrimary, CreateClusterRequest) under /v2/clusters, and their billing.

A cluster's members are ordinary mock pods (each its own instance: in namespace mode a host
of its own), placed together in one data centre or not at all, each carrying
`cluster: {id, rank, ip}` with `ip` its address on the cluster's private network (the
instance's private address in namespace mode, 127.0.0.1 in loopback mode). The cluster
itself is no record of its own: it is what its pods carry (extra["cluster"]), so it lives
exactly as long as they do and survives a restart of the mock with them. The member pods
are named CLUSTER-NAME-RANK (the document does not say how RunPod names them).

Member pods leave GET /v2/pods unless includeClusterPods=true, and PATCH or DELETE of one
through /v2/pods/{id} is 409: a member goes only with its cluster (DELETE /v2/clusters/{id}).
Which pod was in which cluster is kept in a JSON file beside the state, so that the billing
of a deleted cluster is still answered.
"""

from __future__ import annotations

import json
import re
import secrets
import string
import time
from pathlib import Path

from gpubench.mock import billing, netns, runpod_pods
from gpubench.mock.web import Request, Response

MEMBERSHIP_FILE = "runpod_clusters.json"
VXLAN_PORT = 4789
TYPES = ("APPLICATION", "TRAINING", "SLURM", "RAY")
_CREATE_FIELDS = {"args", "disk", "env", "image", "ports", "compute", "name", "type", "dataCenterIds",
                  "mounts", "startJupyter", "startSsh"}
_COMPUTE_FIELDS = {"gpuTypeId", "gpuCountPerPod", "podCount"}
_CLUSTER = re.compile(r"^/v2/clusters/([^/]+)$")
_CLUSTER_PODS = re.compile(r"^/v2/clusters/([^/]+)/pods$")
MAX_PODS = 250


def is_member(inst) -> bool:
    return isinstance(inst.extra.get("cluster"), dict)


def route(req: Request, engine) -> Response | None:
    """The answer for a cluster path, or None when `req` is not one (runpod_api routes
    here); the members are pods of runpod_pods."""
    p, m = req.path.rstrip("/"), req.method
    if p == "/v2/clusters":
        if m == "GET":
            return runpod_pods.ok({"clusters": [render(engine, pods) for pods in _clusters(engine).values()]})
        if m == "POST":
            return _create(req, engine)
        return runpod_pods.not_allowed("GET, POST")
    if mt := _CLUSTER_PODS.match(p):
        if m != "GET":
            return runpod_pods.not_allowed("GET")
        pods = _clusters(engine).get(mt.group(1))
        if not pods:
            return runpod_pods.problem(404, "cluster not found")
        return runpod_pods.ok({"pods": [runpod_pods.render(engine, i) for i in pods]})
    if mt := _CLUSTER.match(p):
        if m not in ("GET", "PATCH", "DELETE"):
            return runpod_pods.not_allowed("GET, PATCH, DELETE")
        pods = _clusters(engine).get(mt.group(1))
        if not pods:
            return runpod_pods.problem(404, "cluster not found")
        if m == "GET":
            return runpod_pods.ok(render(engine, pods))
        if m == "DELETE":
            for inst in pods:
                billing.terminate(engine, inst)   # a terminate-lies fault answers the same and keeps them
            return runpod_pods.ok(None, 204)
        return _rename(req, engine, mt.group(1))
    if p == "/v2/billing/clusters" and m == "GET":
        return _billing(req, engine)
    return None


def _clusters(engine) -> dict[str, list]:
    """cluster id -> its live member pods, rank order."""
    out: dict[str, list] = {}
    for inst in engine.store.instances(runpod_pods.PROVIDER):
        if is_member(inst):
            out.setdefault(inst.extra["cluster"]["id"], []).append(inst)
    for pods in out.values():
        pods.sort(key=lambda i: i.extra["cluster"]["rank"])
    return out


def render(engine, pods: list) -> dict:
    first = pods[0].extra["cluster"]
    statuses = [runpod_pods.status_of(i) for i in pods]
    by_status: dict[str, int] = {}
    for s in statuses:
        by_status[s] = by_status.get(s, 0) + 1
    head = pods[0]
    primary = {"podId": head.id, "status": statuses[0]}
    if statuses[0] == "RUNNING" and "22/tcp" in head.extra.get("ports", []):
        primary["sshEndpoint"] = f"{engine.address(head)}:{head.ssh_port}"
    return {
        "id": first["id"], "name": first["name"], "type": first["type"],
        "compute": {"gpuTypeId": head.gpu_name, "gpuCountPerPod": head.gpu_count, "podCount": first["podCount"]},
        "dataCenterId": head.region, "pods": {"total": len(pods), "byStatus": by_status},
        "network": {"cidr": first["cidr"], "vxlanId": first["vxlanId"], "vxlanPort": VXLAN_PORT},
        "primary": primary, "createdAt": runpod_pods.iso(first["createdAt"]),
    }


def _validate(body: dict) -> list[str]:
    errs = [f"$: additional properties '{k}' not allowed" for k in body if k not in _CREATE_FIELDS]
    if not isinstance(body.get("name"), str) or not body.get("name"):
        errs.append("$: missing property 'name'")
    if "type" not in body:
        errs.append("$: missing property 'type'")
    elif body["type"] not in TYPES:
        errs.append(f"$.type: value must be one of {', '.join(repr(t) for t in TYPES)}")
    compute = body.get("compute")
    if not isinstance(compute, dict):
        errs.append("$: missing property 'compute'")
    else:
        errs += [f"$.compute: additional properties '{k}' not allowed" for k in compute if k not in _COMPUTE_FIELDS]
        gpu = compute.get("gpuTypeId")
        if not isinstance(gpu, str) or not gpu:
            errs.append("$.compute: missing property 'gpuTypeId'")
        for key, low, high in (("gpuCountPerPod", 1, None), ("podCount", 2, MAX_PODS)):
            value = compute.get(key)
            if not isinstance(value, int) or isinstance(value, bool):
                errs.append(f"$.compute: missing property '{key}'" if value is None
                            else f"$.compute.{key}: expected integer")
            elif value < low or (high is not None and value > high):
                bound = f">= {low}" + (f" and <= {high}" if high else "")
                errs.append(f"$.compute.{key}: must be {bound}")
    # The container configuration is checked as a pod create checks it.
    pod_like = {k: body[k] for k in ("image", "disk", "ports", "env", "dataCenterIds") if k in body}
    errs += [e for e in runpod_pods.validate_create({"name": "x", "gpu": {"id": "x"}, "image": "x", **pod_like})
             if not e.startswith("$: missing")]
    return errs


def _create(req: Request, engine) -> Response:
    body, err = runpod_pods.json_body(req)
    if err:
        return err
    errs = _validate(body)
    if errs:
        return runpod_pods.problem(422, "Request validation failed.", errs)
    compute = body["compute"]
    gpu_id, per_pod, count = compute["gpuTypeId"], compute["gpuCountPerPod"], compute["podCount"]
    g = engine.runpod_gpus.get(gpu_id)
    if g is None:
        return runpod_pods.problem(400, f"unknown GPU type id {gpu_id!r}; see GET /v2/catalog/gpus")
    if per_pod > 8:
        return runpod_pods.problem(400, f"compute.gpuCountPerPod {per_pod} exceeds the maximum of 8 for {gpu_id}")
    wanted = body.get("dataCenterIds") or []
    cluster_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
    env = body.get("env", {})
    with engine.lock:    # every member placed in one data centre, or none
        free = runpod_pods.free_gpus(engine, g, "SECURE")
        room = (netns.MAX_SLOTS - len(engine.store.instances())) if engine.network is not None else count
        chosen = next((dc for dc, n in free.items()
                       if (not wanted or dc in wanted) and n >= per_pod * count and room >= count), None)
        if chosen is None:
            return runpod_pods.problem(400, runpod_pods.NO_CAPACITY)
        pods = []
        for rank in range(count):
            info = {"id": cluster_id, "rank": rank, "ip": "", "name": body["name"], "type": body["type"],
                    "podCount": count, "createdAt": time.time(), "vxlanId": 0, "cidr": ""}
            inst, err = runpod_pods.create_pod(
                engine, name=f"{body['name']}-{rank}", image=body.get("image", ""), gpu_id=gpu_id, count=per_pod,
                cloud="SECURE", data_centers=[chosen], disk=body.get("disk", 50), ports=body.get("ports", []),
                env=env, start_ssh=bool(body.get("startSsh", False)),
                extra={"args": body.get("args", ""), "mounts": body.get("mounts", {}), "template": None,
                       "registry": None, "cluster": info})
            if err is not None:      # cannot happen after the check above; undo all the same
                for done in pods:
                    engine.terminate(done)
                return err
            pods.append(inst)
        for inst in pods:
            def place(pod) -> None:
                pod.extra["cluster"].update(ip=engine.private_address(pod), cidr=_cidr(engine),
                                            vxlanId=int(cluster_id, 36) % 16_000_000 + 1)
            engine.mutate(runpod_pods.PROVIDER, inst.id, place)
        _remember(engine, {i.id: cluster_id for i in pods})
        pods = _clusters(engine)[cluster_id]
    return runpod_pods.ok(render(engine, pods), 201)


def _cidr(engine) -> str:
    return engine.network.cidr if engine.network is not None else "127.0.0.0/8"


def _rename(req: Request, engine, cluster_id: str) -> Response:
    body, err = runpod_pods.json_body(req)
    if err:
        return err
    errs = [f"$: additional properties '{k}' not allowed" for k in body if k != "name"]
    if not isinstance(body.get("name"), str) or not body.get("name"):
        errs.append("$.name: must be a non-empty string")
    if errs:
        return runpod_pods.problem(422, "Request validation failed.", errs)
    for inst in _clusters(engine).get(cluster_id, []):
        engine.mutate(runpod_pods.PROVIDER, inst.id, lambda pod: pod.extra["cluster"].update(name=body["name"]))
    pods = _clusters(engine).get(cluster_id)
    return runpod_pods.ok(render(engine, pods)) if pods else runpod_pods.problem(404, "cluster not found")


# ------------------------------------------------------------------ billing

def _membership_path(engine) -> Path:
    return Path(engine.state_dir) / MEMBERSHIP_FILE


def _members_ever(engine) -> dict[str, str]:
    """pod id -> cluster id, for every pod that was ever a cluster member."""
    try:
        return json.loads(_membership_path(engine).read_text())
    except (OSError, ValueError):
        return {}


def _remember(engine, pods: dict[str, str]) -> None:
    with engine.lock:
        _membership_path(engine).write_text(json.dumps({**_members_ever(engine), **pods}))


_AMOUNTS = ("totalAmount", "gpuAmount", "diskAmount", "networkingAmount")


def _billing(req: Request, engine) -> Response:
    """GET /v2/billing/clusters: per cluster per bucket, what its pods were billed."""
    q = req.query
    size = q.get("bucketSize", "day")
    if size not in runpod_pods.BUCKETS:
        return runpod_pods.problem(422, "Request validation failed.", ["bucketSize: must be one of hour, day, week"])
    step = runpod_pods.BUCKETS[size]
    now = time.time()
    try:
        end = runpod_pods.parse_time(q["endTime"]) if q.get("endTime") else now
        if q.get("lastN"):
            start = (end // step - int(q["lastN"]) + 1) * step
        else:
            start = runpod_pods.parse_time(q["startTime"]) if q.get("startTime") else now - 30 * 86400
    except (ValueError, KeyError):
        return runpod_pods.problem(422, "Request validation failed.", ["startTime/endTime: must be RFC 3339 (Z)"])
    start, end = start // step * step, -(-end // step) * step
    member_of = _members_ever(engine)
    amounts: dict[tuple[str, float], float] = {}
    for charge in billing.charges(engine, runpod_pods.PROVIDER):
        cluster = member_of.get(charge.instance_id)
        if cluster is None or (q.get("clusterId") and cluster != q["clusterId"]):
            continue
        bucket = start
        while bucket < end:
            part = charge.within(bucket, bucket + step)
            if part is not None:
                amounts[(cluster, bucket)] = amounts.get((cluster, bucket), 0.0) + part.amount
            bucket += step
    records = [{"startTime": runpod_pods.iso(b), "endTime": runpod_pods.iso(b + step), "clusterId": c,
                "totalAmount": round(a, 4), "gpuAmount": round(a, 4), "diskAmount": 0.0, "networkingAmount": 0.0}
               for (c, b), a in sorted(amounts.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
    query = {"startTime": runpod_pods.iso(start), "endTime": runpod_pods.iso(end), "bucketSize": size}
    if q.get("clusterId"):
        query["clusterId"] = q["clusterId"]
    totals = {k: round(sum(r[k] for r in records), 4) for k in _AMOUNTS}
    return runpod_pods.ok({"records": records, "metadata": {
        "query": query, "recordCount": len(records), "totals": totals,
        "uniqueClusterCount": len({r["clusterId"] for r in records})}})
