"""Vast.ai's instances and SSH keys, as the mock serves them (the paths vast_api.py
hands over through `route`): instance rows (GET /api/v0/instances/, the paged
/api/v1/instances/ and one instance), an instance's changes (label, stop, start) and
destruction, the account's SSH keys, which Vast.ai also puts on every current instance,
and the keys attached to one instance.

actual_status goes null -> loading -> running; an interruptible instance hit by a
`dies` fault is outbid (intended/cur/next state "stopped"), an on-demand one goes
offline. A row's ports map 22/tcp to the instance's sshd, then the ports its create
asked for; its `volume_info` lists the local volume its create linked (vast_volumes.py).
"""

from __future__ import annotations

import base64
import json
import re
import time

from gpubench.mock import billing, vast_volumes
from gpubench.mock.faults import listed
from gpubench.mock.state import DEAD, PENDING, RUNNING, STOPPED, MockInstance
from gpubench.mock.vast_common import PROVIDER, USER_ID, error, iso, json_body, select
from gpubench.mock.web import Request, Response

PAGE_MAX = 25
_INSTANCE = re.compile(r"^/api/v0/instances/(\d+)$")
_SSH_KEY = re.compile(r"^/api/v0/ssh/(\d+)$")
_INSTANCE_KEYS = re.compile(r"^/api/v0/instances/(\d+)/ssh$")
_INSTANCE_KEY = re.compile(r"^/api/v0/instances/(\d+)/ssh/(\d+)$")
_PUBLIC_KEY = re.compile(r"^(ssh|ecdsa|sk)-\S+ \S+")


def instance_id_of(path: str) -> str | None:
    """The id in a path of one instance (/api/v0/instances/ID, trailing slash or not)."""
    mt = _INSTANCE.match(path.rstrip("/"))
    return mt.group(1) if mt else None


def route(req: Request, engine) -> Response | None:
    """The answer for an instance or SSH-key path, or None when `req` is not one."""
    p, m = req.path.rstrip("/"), req.method
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
                                   "created_at": iso(k.created_at), "deleted_at": None}
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
    return None


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
        "jupyter_token": inst.id.encode().hex() * 4, "volume_info": vast_volumes.instance_volumes(x),
        "rentable": False, "external": False,
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
    rows = select(all_rows, filters)
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
        body = json_body(req) or {}
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


# ------------------------------------------------------------------ SSH keys

def _add_key(req: Request, engine) -> Response:
    body = json_body(req) or {}
    key = body.get("ssh_key")
    if not key or not isinstance(key, str):
        return error(400, "no_ssh_key", "No ssh key provided")
    if not _PUBLIC_KEY.match(key.strip()):
        return error(400, "invalid_args", "Invalid ssh key")
    kid = engine.store.next_counter("vast_ssh_key_id", 310_000)
    k = engine.store.add_key(PROVIDER, "", key, str(kid))
    # Vast adds an account key to every current instance too
    for inst in engine.store.instances(PROVIDER):
        engine.mutate(PROVIDER, inst.id, lambda i: _attach(engine, i, k.public_key))
    return Response(200, {"success": True, "key": {"id": kid, "user_id": USER_ID, "public_key": k.public_key,
                                                   "created_at": iso(k.created_at), "deleted_at": None}})


def _update_key(key_id: str, req: Request, engine) -> Response:
    body = json_body(req) or {}
    key = body.get("ssh_key")
    if not isinstance(key, str) or not _PUBLIC_KEY.match(key.strip()):
        return error(400, "no_ssh_key", "No ssh key provided")
    old = next((k for k in engine.store.keys(PROVIDER) if k.id == key_id), None)
    if old is None:
        return error(404, "not_found", "SSH key not found")
    engine.store.delete_key(PROVIDER, key_id)
    k = engine.store.add_key(PROVIDER, "", key, key_id)
    return Response(200, {"success": True, "key": {"id": int(key_id), "user_id": USER_ID,
                                                   "public_key": k.public_key, "created_at": iso(old.created_at),
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
    key = (json_body(req) or {}).get("ssh_key")
    if not isinstance(key, str) or not _PUBLIC_KEY.match(key.strip()):
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
