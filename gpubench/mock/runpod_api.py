"""RunPod REST v2 (runpod-v2.openapi.json, Frontdoor v2.9.0) under /v2: the door (which
requests are RunPod's, auth, injected faults, a pod removing itself), the routes, the GPU
catalog, and the account's SSH keys. Pods themselves (and their billing) are in
runpod_pods.py, network volumes and the data-centre catalog in runpod_volumes.py, Instant
Clusters (/v2/clusters) in runpod_clusters.py, the legacy GraphQL API (/graphql) in
runpod_graphql.py, imported only when asked for.

Bearer auth only. Delete is 204 and the pod is 404 afterwards. Every authenticated
answer carries the RateLimit headers. A pod's own RUNPOD_API_KEY may delete that pod
only. Cluster member pods leave GET /v2/pods unless includeClusterPods=true.
"""

from __future__ import annotations

import re
import secrets
import sys
from urllib.parse import unquote

from gpubench.mock import billing, catalog, runpod_clusters, runpod_volumes
from gpubench.mock.faults import listed
from gpubench.mock.runpod_pods import (API_KEY, KEY_VAR, PROVIDER, RATE_LIMIT, availability_level,
                                       free_gpus, json_body, not_allowed, ok, patch_pod, pod_action,
                                       pod_billing, post_pod, problem, render)
from gpubench.mock.web import NOT_MINE, SURELY, Request, Response

_POD = re.compile(r"^/v2/pods/([^/]+)$")
_ACTION = re.compile(r"^/v2/pods/([^/]+)/action$")
_GPU = re.compile(r"^/v2/catalog/gpus/(.+)$")
_KEY_RE = re.compile(r"^(ssh|ecdsa|sk)-[^\s]+ [^\s]+([ \t][^\n\r]*)?$")
# The legacy GraphQL API's paths (runpod_graphql.py).
GRAPHQL_PATHS = ("/graphql", "/v2/graphql")


# Serverless GPU pools, as the catalog names them (its `pool` field).
POOLS = {"h100-sxm": "HOPPER_141", "h100-pcie": "ADA_80_PRO", "a100-80": "AMPERE_80",
         "a100-40": "AMPERE_48", "l40s": "ADA_48_PRO", "rtx4090": "ADA_24", "rtx3090": "AMPERE_24"}


def claim(req: Request) -> int:
    """Whether `req` is for this API (see apis.py): /v2, and the legacy /graphql."""
    return SURELY if req.path.startswith("/v2/") or req.path in GRAPHQL_PATHS else NOT_MINE


def answered_by(req: Request):
    """The module that answers a request this API claims: this one, or for the legacy
    GraphQL paths runpod_graphql, imported only then (None where it cannot be: the
    graphql library is missing). Goes when RunPod turns GraphQL off."""
    if req.path not in GRAPHQL_PATHS:
        return sys.modules[__name__]
    try:
        from gpubench.mock import runpod_graphql
    except ImportError:
        return None
    return runpod_graphql


def self_removal(req: Request, engine) -> bool:
    """Whether `req` is a pod removing itself: DELETE of one pod with its own key."""
    mt = _POD.match(req.path.rstrip("/"))
    key = req.bearer()
    if req.method != "DELETE" or mt is None or not key:
        return False
    inst = engine.store.get(PROVIDER, mt.group(1))
    own = (inst.extra.get("machine_env") or {}).get(KEY_VAR) if inst is not None else None
    return bool(own) and secrets.compare_digest(key, own)


def unauthorized() -> Response:
    return problem(401, "invalid or missing bearer token")


def fault_response(status: int) -> Response:
    """The body of an injected 429/500/503 (the server adds Retry-After)."""
    return problem(status, {429: "rate limit exceeded for the minute window",
                            503: "service temporarily unavailable"}.get(status, "internal server error"))


def authorized(req: Request) -> bool:
    return req.bearer() == API_KEY


def handle(req: Request, engine) -> Response:
    resp = _route(req, engine)
    if resp.status < 400 or resp.status == 404:
        resp.headers.update(RATE_LIMIT)
    return resp


def _route(req: Request, engine) -> Response:
    p, m = req.path.rstrip("/"), req.method
    if p.startswith(("/v2/clusters", "/v2/billing/clusters")):
        found = runpod_clusters.route(req, engine)
        if found is not None:
            return found
    if p.startswith(("/v2/network-volumes", "/v2/catalog/datacenters")):
        found = runpod_volumes.route(req, engine)
        if found is not None:
            return found
    if p == "/v2/catalog/gpus" and m == "GET":
        return _gpus(req, engine, None)
    if (mt := _GPU.match(p)) and m == "GET":
        return _gpus(req, engine, unquote(mt.group(1)))
    if p == "/v2/pods":
        if m == "GET":
            members = req.query.get("includeClusterPods", "false").lower() == "true"
            return ok({"pods": [render(engine, i) for i in listed(engine, PROVIDER)
                                 if members or not runpod_clusters.is_member(i)]})
        if m == "POST":
            return post_pod(req, engine)
        return not_allowed("GET, POST")
    if mt := _ACTION.match(p):
        return pod_action(mt.group(1), req, engine) if m == "POST" else not_allowed("POST")
    if mt := _POD.match(p):
        inst = engine.store.get(PROVIDER, mt.group(1))
        if m not in ("GET", "DELETE", "PATCH"):
            return not_allowed("GET, PATCH, DELETE")
        if inst is None:
            return problem(404, "pod not found")
        if m == "GET":
            return ok(render(engine, inst))
        if runpod_clusters.is_member(inst):
            return problem(409, f"pod {inst.id} belongs to cluster {inst.extra['cluster']['id']}; "
                                f"delete the cluster via DELETE /v2/clusters/{inst.extra['cluster']['id']}")
        if m == "DELETE":
            billing.terminate(engine, inst)      # a terminate-lies fault answers the same and keeps it
            return ok(None, 204)
        return patch_pod(inst.id, req, engine)
    if p == "/v2/billing/pods" and m == "GET":
        return pod_billing(req, engine)
    if p == "/v2/account/ssh-keys":
        if m == "GET":
            return ok({"keys": [k.public_key for k in engine.store.keys(PROVIDER)]})
        if m == "PUT":
            return _put_keys(req, engine)
        return not_allowed("GET, PUT")
    return problem(404, "resource not found")


# ------------------------------------------------------------------ catalog

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
        return ok(out[0]) if out else problem(404, "gpu type not found")
    return ok({"gpus": out})


# ------------------------------------------------------------------ SSH keys

def _put_keys(req: Request, engine) -> Response:
    body, err = json_body(req)
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
    return ok({"keys": [k.public_key for k in engine.store.keys(PROVIDER)]})
