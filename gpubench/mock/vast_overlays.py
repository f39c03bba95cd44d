"""Vast.ai's physical clusters and overlay networks, as the official client calls them
(vast-ai/vast-cli vast.py: show__clusters, create__overlay, join__overlay, show__overlays,
delete__overlay; the SDK's vastai/api/clusters.py):

- GET /api/v0/clusters/ -> {"clusters": {id: {"subnet", "nodes": [{"machine_id",
  "is_cluster_manager", "local_ip"}]}}}: the account's own (host) clusters; a renter has none.
- POST /api/v0/overlay/ {"cluster_id", "name"} -> {"success": true, "msg": ...}
- PUT /api/v0/overlay/ {"name", "instance_id"} -> {"success": true, "msg": ...}
- GET /api/v0/overlay/ -> [{"overlay_id", "name", "internal_subnet", "cluster_id", "instances"}]
- DELETE /api/v0/overlay/ {"overlay_id"} or {"overlay_name"} -> {"success": true, "msg": ...}

Errors are the API's usual {"success": false, "error", "msg"}. An overlay needs the mock's
namespace mode: there it is a bridge of its own (netns.Network.add_overlay) and a joined
instance gets an address on it (eth1, in 10.233.n.0/24); on loopback the create is refused.
Overlays are kept in the store's meta (JSON), so a restarted mock still knows them.
"""

from __future__ import annotations

import json

from gpubench.mock.sshhost import netns_slot
from gpubench.mock.state import RUNNING
from gpubench.mock.vast_common import PROVIDER, error, json_body
from gpubench.mock.web import Request, Response

META = "vast_overlays"


def route(req: Request, engine) -> Response | None:
    p, m = req.path.rstrip("/"), req.method
    if p == "/api/v0/clusters" and m == "GET":
        return Response(200, {"clusters": {}})    # a renter's account hosts no cluster
    if p != "/api/v0/overlay":
        return None
    if m == "GET":
        return Response(200, [_public(o, engine) for o in _load(engine).values()])
    body = json_body(req)
    if body is None:
        return error(400, "invalid_request", "Invalid json body")
    with engine.lock:
        if m == "POST":
            return _create(body, engine)
        if m == "PUT":
            return _join(body, engine)
        if m == "DELETE":
            return _delete(body, engine)
    return error(405, "method_not_allowed", f"{m} not allowed")


def _load(engine) -> dict[str, dict]:
    return json.loads(engine.store.meta(META) or "{}")


def _save(engine, overlays: dict[str, dict]) -> None:
    engine.store.set_meta(META, json.dumps(overlays, sort_keys=True))


def _public(overlay: dict, engine) -> dict:
    """An overlay as GET /overlay/ lists it: members that are gone are gone from it."""
    live = [i for i in overlay["instances"] if engine.store.get(PROVIDER, str(i)) is not None]
    return {"overlay_id": overlay["overlay_id"], "name": overlay["name"],
            "internal_subnet": overlay["internal_subnet"], "cluster_id": overlay["cluster_id"],
            "instances": live}


def _clusters(engine) -> set[int]:
    return {o.cluster_id for o in engine.vast_offers.values() if o.cluster_id is not None}


def _create(body: dict, engine) -> Response:
    name, cluster_id = body.get("name"), body.get("cluster_id")
    if not isinstance(name, str) or not name.strip():
        return error(400, "invalid_args", "error 400/3467: Invalid args: name is required")
    if isinstance(cluster_id, bool) or not isinstance(cluster_id, int):
        return error(400, "invalid_args", "error 400/3467: Invalid args: cluster_id must be an integer")
    if cluster_id not in _clusters(engine):
        return error(404, "not_found", f"Cluster {cluster_id} not found")
    overlays = _load(engine)
    if any(o["name"] == name for o in overlays.values()):
        return error(400, "invalid_args", f"An overlay named {name} already exists")
    network = engine.network
    if network is None:
        return error(400, "unsupported", "overlay networks need the mock's namespace mode (gpubench mock "
                                         "serve --netns); this mock's instances share one loopback")
    used = {o["net"] for o in overlays.values()}
    n = next((k for k in range(1, 256) if k not in used), None)
    if n is None:
        return error(400, "invalid_args", "Too many overlays")
    network.add_overlay(n)
    oid = engine.store.next_counter("vast_overlay_id", 5100)
    overlays[str(oid)] = {"overlay_id": oid, "name": name, "cluster_id": cluster_id, "net": n,
                          "internal_subnet": network.overlay_subnet(n), "instances": []}
    _save(engine, overlays)
    return Response(200, {"success": True, "msg": f"Overlay network {name} created on cluster {cluster_id}."})


def _join(body: dict, engine) -> Response:
    name, iid = body.get("name"), body.get("instance_id")
    overlays = _load(engine)
    overlay = next((o for o in overlays.values() if o["name"] == name), None)
    if overlay is None:
        return error(404, "not_found", f"Overlay {name} not found")
    inst = engine.store.get(PROVIDER, str(iid)) if isinstance(iid, int) and not isinstance(iid, bool) else None
    if inst is None:
        return error(404, "not_found", f"Instance {iid} not found")
    offer = engine.vast_offers.get(inst.extra.get("ask_id"))
    if offer is None or offer.cluster_id != overlay["cluster_id"]:
        return error(400, "invalid_args", f"Instance {iid} is not on a machine of cluster "
                                          f"{overlay['cluster_id']}")
    slot = netns_slot(inst)
    if inst.phase != RUNNING or slot is None or engine.network is None or not engine.network.exists(slot):
        return error(400, "invalid_args", f"Instance {iid} is not running")
    if iid not in overlay["instances"]:
        engine.network.join_overlay(overlay["net"], slot)
        overlay["instances"].append(iid)
        _save(engine, overlays)
    return Response(200, {"success": True, "msg": f"Instance {iid} joined overlay {name}."})


def _delete(body: dict, engine) -> Response:
    overlays = _load(engine)
    if "overlay_id" in body:
        key = str(body["overlay_id"])
        overlay = overlays.get(key)
    else:
        overlay = next((o for o in overlays.values() if o["name"] == body.get("overlay_name")), None)
    if overlay is None:
        return error(404, "not_found", "Overlay not found")
    if engine.network is not None:
        engine.network.remove_overlay(overlay["net"])
    del overlays[str(overlay["overlay_id"])]
    _save(engine, overlays)
    return Response(200, {"success": True, "msg": f"Overlay {overlay['name']} deleted."})
