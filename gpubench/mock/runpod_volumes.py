"""RunPod REST v2's network volumes (/v2/network-volumes) and the data-centre catalog
(/v2/catalog/datacenters) that says where they can be made; runpod_api.py routes here.
A pod mounting one is placed by runpod_pods.create_pod (runpod_pods.network_volume).

From runpod-v2.openapi.json (Frontdoor v2.9.0): a NetworkVolume is {id, name, size (GB,
10-4096), dataCenter, type (STANDARD|HIGH_PERFORMANCE)}, with no state and no attachment
field. The list is {"networkVolumes": [...]}, a create 201 with the volume, a delete 204,
a PATCH grows the size only. Body errors are the schema validator's 422 (unknown fields,
a size out of 10-4096, a bad tier); the handler's rules are 400 (a data centre without
network volumes, a tier it lacks, a smaller size); an unknown id is 404.

A volume's files live in the mock's state directory (InstanceHost.volume_dir), outside
every pod, so what one pod writes at its mount the next pod mounting it reads.
"""

from __future__ import annotations

import re
import secrets
import shutil
import string
from urllib.parse import unquote

from gpubench.mock import catalog
from gpubench.mock.runpod_pods import (PROVIDER, availability_level, free_gpus, json_body, not_allowed, ok,
                                       problem)
from gpubench.mock.web import Request, Response

_VOLUME = re.compile(r"^/v2/network-volumes/([^/]+)$")
_DATACENTER = re.compile(r"^/v2/catalog/datacenters/([^/]+)$")

TYPES = ("STANDARD", "HIGH_PERFORMANCE")
MIN_GB, MAX_GB = 10, 4096
CREATE_FIELDS = {"name", "size", "dataCenter", "type"}
UPDATE_FIELDS = {"name", "size"}
INCLUDES = ("GPU_AVAILABILITY", "CPU_AVAILABILITY")

# Which data centres take network volumes, and of which tiers (the catalog's
# networkVolumeTypes; empty: none there). The mock's choice: two take them, one takes the
# high-performance tier too, one takes none.
NETWORK_VOLUME_TYPES: dict[str, list[str]] = {
    "US-KS-2": ["STANDARD", "HIGH_PERFORMANCE"],
    "US-TX-3": ["STANDARD"],
    "EU-RO-1": ["STANDARD"],
    "CA-MTL-1": [],
}
COMPLIANCE = {"US-KS-2": ["SOC_2_TYPE_2", "ISO_IEC_27001"], "EU-RO-1": ["GDPR", "ISO_IEC_27001"]}


def route(req: Request, engine) -> Response | None:
    """The answer to a network-volume or data-centre request; None for another path."""
    p, m = req.path.rstrip("/"), req.method
    if p == "/v2/network-volumes":
        if m == "GET":
            return ok({"networkVolumes": engine.store.volumes(PROVIDER)})
        if m == "POST":
            return _create(req, engine)
        return not_allowed("GET, POST")
    if mt := _VOLUME.match(p):
        if m not in ("GET", "PATCH", "DELETE"):
            return not_allowed("GET, PATCH, DELETE")
        vid = unquote(mt.group(1))
        doc = engine.store.volume(PROVIDER, vid)
        if doc is None:
            return problem(404, "network volume not found")
        if m == "GET":
            return ok(doc)
        if m == "PATCH":
            return _update(req, engine, doc)
        return _delete(engine, vid)
    if p == "/v2/catalog/datacenters" or _DATACENTER.match(p):
        return _datacenters(req, engine, p) if m == "GET" else not_allowed("GET")
    return None


# ------------------------------------------------------------------ volumes

def _new_id() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(10))


def _size_errors(size) -> list[str]:
    if isinstance(size, bool) or not isinstance(size, int):
        return ["$.size: expected integer"]
    if size < MIN_GB:
        return [f"$.size: must be >= {MIN_GB}"]
    if size > MAX_GB:
        return [f"$.size: must be <= {MAX_GB}"]
    return []


def _create(req: Request, engine) -> Response:
    body, err = json_body(req)
    if err:
        return err
    errs = [f"$: additional properties '{k}' not allowed" for k in body if k not in CREATE_FIELDS]
    errs += [f"$: missing property '{k}'" for k in ("name", "size", "dataCenter") if k not in body]
    if "name" in body and (not isinstance(body["name"], str) or not body["name"]):
        errs.append("$.name: must be a non-empty string")
    if "size" in body:
        errs += _size_errors(body["size"])
    if "dataCenter" in body and (not isinstance(body["dataCenter"], str) or not body["dataCenter"]):
        errs.append("$.dataCenter: must be a non-empty string")
    if "type" in body and body["type"] not in TYPES:
        errs.append("$.type: value must be one of 'STANDARD', 'HIGH_PERFORMANCE'")
    if errs:
        return problem(422, "Request validation failed.", errs)
    dc = body["dataCenter"]
    if dc not in catalog.RUNPOD_DATACENTERS:
        return problem(400, f"unknown data center {dc!r}; see GET /v2/catalog/datacenters")
    types = NETWORK_VOLUME_TYPES.get(dc, [])
    if not types:
        return problem(400, f"data center {dc} does not support network volumes")
    vtype = body.get("type") or types[0]       # omitted: the data centre's primary tier
    if vtype not in types:
        return problem(400, f"data center {dc} does not support {vtype} network volumes "
                            f"(it supports {', '.join(types)})")
    doc = {"id": _new_id(), "name": body["name"], "size": body["size"], "dataCenter": dc, "type": vtype}
    engine.store.put_volume(PROVIDER, doc["id"], doc)
    return ok(doc, 201)


def _update(req: Request, engine, doc: dict) -> Response:
    body, err = json_body(req)
    if err:
        return err
    errs = [f"$: additional properties '{k}' not allowed" for k in body if k not in UPDATE_FIELDS]
    if not body:
        errs.append("$: must have at least 1 property")
    if "name" in body and (not isinstance(body["name"], str) or not body["name"]):
        errs.append("$.name: must be a non-empty string")
    if "size" in body:
        errs += _size_errors(body["size"])
    if errs:
        return problem(422, "Request validation failed.", errs)
    if "size" in body and body["size"] < doc["size"]:
        return problem(400, f"network volume size can only grow: it is {doc['size']} GB, not {body['size']}")
    doc = {**doc, **{k: body[k] for k in UPDATE_FIELDS if k in body}}
    engine.store.put_volume(PROVIDER, doc["id"], doc)
    return ok(doc)


def users(engine, vid: str) -> list[str]:
    """The pods (running, booting or stopped: not yet terminated) that mount volume `vid`."""
    return [i.id for i in engine.store.instances(PROVIDER) if i.extra.get("volume") == vid]


def _delete(engine, vid: str) -> Response:
    with engine.lock:        # no pod is placed with it meanwhile (create_pod holds the lock)
        using = users(engine, vid)
        if using:
            # The mock's choice: what RunPod does when a volume a pod mounts is deleted is
            # unverified (not in the spec, no report found); the mock refuses it.
            return problem(400, f"network volume {vid} is attached to pod {', '.join(using)}; "
                                "terminate the pod first")
        engine.store.delete_volume(PROVIDER, vid)
    shutil.rmtree(engine.host.volume_dir(PROVIDER, vid), ignore_errors=True)   # its data goes with it
    return ok(None, 204)


# ------------------------------------------------------------------ data centres

def _listed(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _datacenters(req: Request, engine, path: str) -> Response:
    q = req.query
    include = _listed(q.get("include"))
    bad = [f"include: value must be one of {', '.join(INCLUDES)}" for v in include if v not in INCLUDES]
    wanted_types = _listed(q.get("networkVolumeTypes"))
    bad += [f"networkVolumeTypes: value must be one of {', '.join(TYPES)}" for v in wanted_types if v not in TYPES]
    if bad:
        return problem(422, "Request validation failed.", bad)
    dcs = [_datacenter(engine, dc, "GPU_AVAILABILITY" in include) for dc in catalog.RUNPOD_DATACENTERS]
    one = _DATACENTER.match(path)
    if one:
        found = [d for d in dcs if d["id"] == unquote(one.group(1))]
        return ok(found[0]) if found else problem(404, "data center not found")
    regions = _listed(q.get("regions"))
    compliance = _listed(q.get("compliance"))
    network = q.get("globalNetwork")
    dcs = [d for d in dcs
           if (not regions or d["region"] in regions)
           and all(t in d["networkVolumeTypes"] for t in wanted_types)        # AND within the filter
           and all(c in d["compliance"] for c in compliance)
           and (network is None or d["globalNetwork"] == (network.lower() == "true"))]
    return ok({"dataCenters": dcs})


def _datacenter(engine, dc: str, gpus: bool) -> dict:
    name, region = catalog.RUNPOD_DATACENTERS[dc]
    out = {"id": dc, "name": name, "region": region, "globalNetwork": False,
           "networkVolumeTypes": list(NETWORK_VOLUME_TYPES.get(dc, [])),
           "compliance": list(COMPLIANCE.get(dc, []))}
    if gpus:       # the Secure Cloud GPUs it hosts, each at its availability for one GPU now
        found = [{"id": gid, "name": g.runpod_name, "availability": availability_level(free[dc], 1)}
                 for gid, g in engine.runpod_gpus.items()
                 if dc in (free := free_gpus(engine, g, "SECURE"))]
        if found:
            out["gpuAvailability"] = found
    return out
