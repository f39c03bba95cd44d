"""Vast.ai local volumes, as the mock serves them (vast.openapi.yaml's Volumes paths, and
what the vastai CLI sends: vastai/api/storage.py and offers.py), for vast_api.py:

- `POST /api/v0/volumes/search/` (a query of conditions as for offers, in the body or as
  `?q=`) -> `{"offers": [VolumeOffer]}`: one volume offer per mock machine, on the
  machine's own disk, with its `storage_cost` ($ per GB a month, the machine's) and the
  `disk_space` still free there;
- `PUT /api/v0/volumes/ {id: volume offer, size (GB, default 15), name?}` ->
  `{"success": true, "volume_name": "V.<id>"}`: the volume lives on the offer's machine;
  an unknown offer, 404 as an unknown ask is answered; a size that is not a positive
  integer or more than the machine has free, 400 invalid_args;
- `GET /api/v0/volumes/?owner=me&type=local_volume|all_volume|network_volume` ->
  `{"volumes": [Volume]}` (the mock has local volumes only); the name is `label`, as the
  CLI's `show volumes` shows it;
- `DELETE /api/v0/volumes/` with the id in the body (`{"id": N}`, the spec) or the query
  (`?id=N`, the CLI) -> `{"success": true}`; no id, 400 invalid_args "Please provide a
  valid volume ID."; unknown, 404 no_such_volume "Volume with that ID does not exist."
  (the spec's words); used by an instance, 400 invalid_args (the CLI: "All instances
  using the volume must be destroyed before deletion"). Deleting one deletes its files.
- the ask's `volume_info {create_new, volume_id, size, mount_path, name?}`
  (for_ask): false links an existing volume, true makes one from a volume offer; either
  must be on the ask's machine, else 400 invalid_args, nothing created.

Volume ids are contract ids, from the instances' counter (vast_common.next_contract_id).
A volume is kept as the document the list answers (Store.put_volume); `instances` and
`status` are computed at each answer. Unverified, so the mock's own choices: the
`status` words ("in_use" while an instance holds it, else "available"), `instances` as
objects `{"id": N}` (the spec says objects and no more), the error words for an
attached volume and for a volume on another machine, and `storage_total_cost` as the
volume's $ an hour (the spec's example, 0.000555... = 4 GB x $0.10 / 720 h, reads so;
the instance rows' figure is an hour's too). The mock mounts a volume at
common.VOLUME_MOUNT under the instance's own root (sshhost.py) whatever `mount_path` the
ask gave; the instance's row shows the mount_path asked for.
"""

from __future__ import annotations

import json
import shutil
import time

from gpubench.mock.vast_common import PROVIDER, error, json_body, next_contract_id, search_answer
from gpubench.mock.web import Request, Response

# A volume offer's id: this base plus its machine's id (distinct from the GPU offers' ids
# and from contract ids).
VOLUME_OFFER_BASE = 28_900_000
DEFAULT_SIZE_GB = 15           # the spec's and the CLI's default
HOURS_A_MONTH = 720            # as the API prices disk: $ per GB a month / 720 an hour
# What a volume offer and a volume repeat of their machine (VolumeOffer / Volume fields).
MACHINE_FIELDS = ("machine_id", "host_id", "cpu_arch", "cpu_ghz", "cpu_name", "cuda_max_good", "disk_bw",
                  "disk_name", "driver_version", "duration", "end_date", "geolocation", "geolocode",
                  "gpu_arch", "inet_down", "inet_up", "mobo_name", "os_version", "public_ipaddr",
                  "reliability", "reliability2", "reliability_mult", "start_date", "static_ip",
                  "vericode", "verification", "verified", "vms_enabled", "cluster_id")


def route(req: Request, engine) -> Response | None:
    """The answer for a volume path, or None when `req` is not one."""
    p, m = req.path.rstrip("/"), req.method
    if p == "/api/v0/volumes/search" and m in ("POST", "GET"):
        return _search(req, engine)
    if p != "/api/v0/volumes":
        return None
    if m == "GET":
        kind = req.query.get("type") or "all_volume"
        docs = engine.store.volumes(PROVIDER) if kind in ("local_volume", "all_volume") else []
        return Response(200, {"volumes": [render(engine, d) for d in docs]})
    if m == "PUT":
        return _create(req, engine)
    if m == "DELETE":
        return _delete(req, engine)
    return error(405, "method_not_allowed", f"{m} not allowed")


# ------------------------------------------------------------------ offers

def _machines(engine) -> dict[int, object]:
    """machine_id -> its (first) GPU offer in the mock's catalog."""
    out: dict[int, object] = {}
    for offer in sorted(engine.vast_offers.values(), key=lambda o: o.id):
        out.setdefault(offer.machine_id, offer)
    return out


def _machine_row(offer) -> dict:
    return offer.row(0, False)


def _free_gb(engine, machine_id: int, disk_gb: float) -> float:
    held = sum(float(d.get("disk_space") or 0) for d in engine.store.volumes(PROVIDER)
               if d.get("machine_id") == machine_id)
    return max(0.0, disk_gb - held)


def _volume_offer(engine, offer, allocated_gb: float) -> dict:
    row = _machine_row(offer)
    oid = VOLUME_OFFER_BASE + offer.machine_id
    free = _free_gb(engine, offer.machine_id, float(row["disk_space"]))
    cost = float(row["storage_cost"])
    return {"id": oid, "ask_contract_id": oid, "bundle_id": oid + 700_000_000,
            **{k: row.get(k) for k in MACHINE_FIELDS}, "disk_space": free, "external": False,
            "storage_cost": cost, "storage_total_cost": round(allocated_gb * cost / HOURS_A_MONTH, 9),
            "rentable": free >= 1}


def _search(req: Request, engine) -> Response:
    try:
        q = req.json() if req.method == "POST" and req.body.strip() else json.loads(req.query.get("q") or "{}")
    except ValueError:
        return error(400, "invalid_request", "Invalid json body")
    if not isinstance(q, dict):
        return error(400, "invalid_args", f"Invalid query: {q}, must be dict of conditions")
    try:
        allocated = float(q.get("allocated_storage") or 1.0)
    except (TypeError, ValueError):
        allocated = 1.0
    rows = [_volume_offer(engine, o, allocated) for o in _machines(engine).values()]
    return Response(200, {"offers": search_answer(rows, q, [["storage_cost", "asc"]], 64)})


def machine_of_offer(engine, oid) -> object | None:
    """The GPU offer standing for the machine of volume offer `oid`, or None."""
    if not _is_int(oid):
        return None
    return _machines(engine).get(int(oid) - VOLUME_OFFER_BASE)


# ------------------------------------------------------------------ volumes

def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _users(engine, vid: str) -> list[str]:
    """The instances holding the volume: every one not destroyed (Vast.ai: all instances
    using the volume must be destroyed before deletion; a stopped one still holds it)."""
    return [i.id for i in engine.store.instances(PROVIDER) if str(i.extra.get("volume") or "") == str(vid)]


def render(engine, doc: dict) -> dict:
    """The Volume as the list shows it now."""
    users = _users(engine, str(doc["id"]))
    return {**doc, "instances": [{"id": int(i)} for i in users], "status": "in_use" if users else "available"}


def _make(engine, offer, size: int, name: str | None) -> dict:
    """A new volume of `size` GB on `offer`'s machine (inside engine.lock)."""
    row = _machine_row(offer)
    vid = next_contract_id(engine)
    cost = float(row["storage_cost"])
    doc = {"id": vid, "label": name, **{k: row.get(k) for k in MACHINE_FIELDS},
           "disk_space": float(size), "storage_cost": cost,
           "storage_total_cost": round(size * cost / HOURS_A_MONTH, 9), "start_date": round(time.time(), 3)}
    engine.store.put_volume(PROVIDER, str(vid), doc)
    return doc


def _size_error(engine, offer, size, where: str) -> Response | None:
    if not _is_int(size) or size < 1:
        return error(400, "invalid_args", f"error 400/3467: Invalid args: {where}size must be a positive "
                                          f"integer number of GB, not {size!r}")
    free = _free_gb(engine, offer.machine_id, float(_machine_row(offer)["disk_space"]))
    if size > free:
        return error(400, "invalid_args", f"error 400/3467: Invalid args: {where}size {size} GB is more than "
                                          f"the {free:g} GB free on machine {offer.machine_id}")
    return None


def _create(req: Request, engine) -> Response:
    body = json_body(req)
    if body is None:
        return error(400, "invalid_request", "Invalid json body")
    oid, size, name = body.get("id"), body.get("size", DEFAULT_SIZE_GB), body.get("name")
    if not _is_int(oid):
        return error(400, "invalid_args", "error 400/3467: Invalid args: id must be a volume offer id")
    if name is not None and not isinstance(name, str):
        return error(400, "invalid_args", "error 400/3467: Invalid args: name must be a string")
    with engine.lock:
        offer = machine_of_offer(engine, oid)
        if offer is None:
            return error(404, "invalid_args",
                         f"error 404/3603: no_such_ask Volume offer by id {oid} is not available.", ask_id=oid)
        refused = _size_error(engine, offer, size, "")
        if refused is not None:
            return refused
        doc = _make(engine, offer, size, name or None)
    return Response(200, {"success": True, "volume_name": f"V.{doc['id']}"})


def _delete(req: Request, engine) -> Response:
    body = json_body(req) or {}
    raw = body.get("id", req.query.get("id"))
    try:
        vid = int(raw)
    except (TypeError, ValueError):
        return error(400, "invalid_args", "Please provide a valid volume ID.")
    with engine.lock:
        doc = engine.store.volume(PROVIDER, str(vid))
        if doc is None:
            return error(404, "no_such_volume", "Volume with that ID does not exist.")
        users = _users(engine, str(vid))
        if users:
            return error(400, "invalid_args",
                         f"Volume {vid} is in use by instance {', '.join(users)}: all instances using "
                         f"the volume must be destroyed before deletion.")
        engine.store.delete_volume(PROVIDER, str(vid))
        shutil.rmtree(engine.host.volume_dir(PROVIDER, str(vid)), ignore_errors=True)
    return Response(200, {"success": True, "msg": f"Deleted volume {vid}."})


# ------------------------------------------------------------------ an ask with a volume

def for_ask(volume_info, offer, engine) -> dict | Response:
    """What an ask's `volume_info` gives the new instance's extra ({"volume": id,
    "volume_mount": path}; {} for none), or the error to answer. Called inside
    engine.lock, once the ask itself has been found rentable: a volume made here
    (create_new) is made only for an instance that will be."""
    if volume_info is None or volume_info == {}:
        return {}

    def invalid(msg: str) -> Response:
        return error(400, "invalid_args", f"error 400/3467: Invalid args: {msg}", ask_id=offer.id)

    if not isinstance(volume_info, dict):
        return invalid("volume_info must be an object")
    vid, mount = volume_info.get("volume_id"), volume_info.get("mount_path")
    if not _is_int(vid):
        return invalid("volume_info.volume_id must be an integer")
    if not isinstance(mount, str) or not mount.startswith("/"):
        return invalid("volume_info.mount_path must be an absolute path")
    if volume_info.get("create_new"):
        machine = machine_of_offer(engine, vid)
        if machine is None:
            return invalid(f"volume offer {vid} is not available")
        if machine.machine_id != offer.machine_id:
            return invalid(f"volume offer {vid} is on machine {machine.machine_id}, not on this offer's "
                           f"machine {offer.machine_id}")
        name = volume_info.get("name")
        refused = _size_error(engine, machine, volume_info.get("size", DEFAULT_SIZE_GB), "volume_info.")
        if refused is not None:
            return refused
        doc = _make(engine, machine, volume_info.get("size", DEFAULT_SIZE_GB),
                    name if isinstance(name, str) and name else None)
    else:
        doc = engine.store.volume(PROVIDER, str(vid))
        if doc is None:
            return invalid(f"volume {vid} does not exist")
        if doc.get("machine_id") != offer.machine_id:
            return invalid(f"volume {vid} is a local volume of machine {doc.get('machine_id')}, and offer "
                           f"{offer.id} is on machine {offer.machine_id}: a local volume can only be "
                           f"attached to an instance on its own machine")
    return {"volume": str(doc["id"]), "volume_mount": mount}


def instance_volumes(extra: dict) -> list[dict]:
    """An instance row's `volume_info`: the volume its ask linked, as the ask named it."""
    vid = extra.get("volume")
    if not vid:
        return []
    return [{"volume_id": int(vid), "mount_path": extra.get("volume_mount")}]
