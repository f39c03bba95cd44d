"""Lambda Cloud API v1 filesystems (lambda.openapi.json 1.10.0), for lambda_api.py.

- `GET /api/v1/file-systems` (the list path has a hyphen) -> `{"data": [Filesystem]}`;
- `POST /api/v1/filesystems {name, region}` -> `{"data": Filesystem}`; a name off
  `^[a-zA-Z]+[0-9a-zA-Z-]*$` or over 60 characters, or a region that is not one of the mock's,
  400 global/invalid-parameters; a name taken, 400 global/duplicate; the account's 25th, 400
  global/quota-exceeded (24 filesystems an account, from a mirror of Lambda's docs);
- `DELETE /api/v1/filesystems/{id}` -> `{"data": {"deleted_ids": [id]}}`; mounted by a live
  instance, 400 filesystems/filesystem-in-use; unknown, 404 global/object-does-not-exist.
  Deleting one deletes its files.
- launch: `file_system_names` and `file_system_mounts [{mount_point, file_system_id}]`; a
  filesystem of another region, 400 instance-operations/launch/file-system-in-wrong-region;
  one the account lacks, 400 global/object-does-not-exist (ApiErrorLaunchResourceNotFound).

A Filesystem is kept as the document the API answers (Store.put_volume); `bytes_used` and
`is_in_use` are computed at each answer: the size of the files in the volume's directory
(InstanceHost.volume_dir, where Lambda updates it only every few hours) and whether a live
instance (any phase but dead) mounts it. The mock mounts one filesystem per instance, at
common.VOLUME_MOUNT under the instance's own root (sshhost.py) whatever mount point the
launch asked for: two filesystems on one instance are refused with the mock's own words.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from gpubench.mock import catalog
from gpubench.mock.state import DEAD
from gpubench.mock.web import Request, Response

PROVIDER = "lambda"
NAME = re.compile(r"^[a-zA-Z]+[0-9a-zA-Z-]*$")
NAME_MAX = 60
MOUNT_POINT = re.compile(r"^(/home|/lambda/nfs|/data)[//a-zA-Z0-9-]*$")
MOUNT_POINT_MAX = 256
QUOTA = 24
_ONE = re.compile(r"^/api/v1/filesystems/([^/]+)/?$")
# The account's user, as created_by shows it (User in spec 1.10.0).
USER = {"id": "3da5a70a57a7422ea8a7203f98b2198b", "email": "mock@gpubench.invalid", "status": "active"}


def _error(status: int, code: str, message: str, suggestion: str | None = None) -> Response:
    err = {"code": code, "message": message}
    if suggestion:
        err["suggestion"] = suggestion
    return Response(status, {"error": err})


def _invalid(message: str) -> Response:
    return _error(400, "global/invalid-parameters", message)


def handle(req: Request, engine) -> Response | None:
    """The answer to a filesystem call, or None for a path that is not one."""
    p, m = req.path.rstrip("/") or "/", req.method
    if p == "/api/v1/file-systems" and m == "GET":
        return Response(200, {"data": [render(engine, d) for d in engine.store.volumes(PROVIDER)]})
    if p == "/api/v1/filesystems" and m == "POST":
        return _create(req, engine)
    if (mt := _ONE.match(req.path)) and m == "DELETE":
        return _delete(mt.group(1), engine)
    return None


def render(engine, doc: dict) -> dict:
    """The Filesystem as the API shows it now."""
    return {**doc, "is_in_use": bool(_users(engine, doc["id"])),
            "bytes_used": bytes_used(engine.host.volume_dir(PROVIDER, doc["id"]))}


def bytes_used(root: Path) -> int:
    """The size of the files under `root` (links not followed)."""
    total = 0
    for folder, _, files in os.walk(root):
        for f in files:
            try:
                total += os.lstat(os.path.join(folder, f)).st_size
            except OSError:
                pass           # removed meanwhile
    return total


def _users(engine, fid: str) -> list[str]:
    """The live instances that mount the filesystem."""
    return [i.id for i in engine.store.instances(PROVIDER)
            if i.extra.get("volume") == fid and i.phase != DEAD]


def _create(req: Request, engine) -> Response:
    try:
        body = req.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return _invalid("Invalid request data.")
    name, region = body.get("name"), body.get("region")
    if not isinstance(name, str) or not 1 <= len(name) <= NAME_MAX or not NAME.match(name):
        return _invalid("Invalid request data: name must be 1 to 60 characters: letters first, then "
                        "letters, digits or '-'.")
    if not isinstance(region, str) or region not in catalog.LAMBDA_REGIONS:
        return _invalid(f"Invalid request data: unknown region {region!r}.")
    with engine.lock:
        held = engine.store.volumes(PROVIDER)
        if any(d["name"] == name for d in held):
            return _error(400, "global/duplicate", "A filesystem with this name already exists.",
                          "Choose another name.")
        if len(held) >= QUOTA:
            return _error(400, "global/quota-exceeded", "Quota exceeded.", "Contact Support to increase your quota.")
        fid = uuid.uuid4().hex
        doc = {"id": fid, "name": name, "mount_point": f"/lambda/nfs/{name}",
               "created": datetime.fromtimestamp(time.time(), timezone.utc).isoformat(timespec="seconds"),
               "created_by": dict(USER), "is_in_use": False,
               "region": {"name": region, "description": catalog.LAMBDA_REGIONS[region]},
               "bytes_used": 0}
        engine.store.put_volume(PROVIDER, fid, doc)
        engine.host.volume_dir(PROVIDER, fid).mkdir(parents=True, exist_ok=True)
    return Response(200, {"data": render(engine, doc)})


def _delete(fid: str, engine) -> Response:
    with engine.lock:
        doc = engine.store.volume(PROVIDER, fid)
        if doc is None:
            return _error(404, "global/object-does-not-exist", "Filesystem was not found.")
        if _users(engine, fid):
            return _error(400, "filesystems/filesystem-in-use",
                          f"Filesystem '{doc['name']}' is in use by one or more instances.",
                          "Terminate the instances that mount it, then try again.")
        engine.store.delete_volume(PROVIDER, fid)
        shutil.rmtree(engine.host.volume_dir(PROVIDER, fid), ignore_errors=True)
    return Response(200, {"data": {"deleted_ids": [fid]}})


def for_launch(body: dict, region: str, engine) -> dict | Response:
    """What a launch body's file_system_names and file_system_mounts give the instance's
    extra (its `volume`, and the names and mounts its answers show), or the error to answer."""
    names, mounts = body.get("file_system_names") or [], body.get("file_system_mounts") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return _invalid("Invalid request data: file_system_names must be a list of names.")
    if not isinstance(mounts, list) or not all(
            isinstance(e, dict) and set(e) == {"mount_point", "file_system_id"}
            and isinstance(e["file_system_id"], str) and isinstance(e["mount_point"], str)
            and len(e["mount_point"]) <= MOUNT_POINT_MAX and MOUNT_POINT.match(e["mount_point"])
            for e in mounts):
        return _invalid("Invalid request data: file_system_mounts must be [{mount_point, file_system_id}] "
                        "with mount points under /home, /lambda/nfs or /data.")
    held = engine.store.volumes(PROVIDER)
    by_name, by_id = {d["name"]: d for d in held}, {d["id"]: d for d in held}
    wanted: dict[str, str] = {}          # id -> mount point, names' defaults first
    for n in names:
        if n not in by_name:
            return _launch_not_found(n)
        wanted[by_name[n]["id"]] = by_name[n]["mount_point"]
    for e in mounts:
        if e["file_system_id"] not in by_id:
            return _launch_not_found(e["file_system_id"])
        wanted[e["file_system_id"]] = e["mount_point"]   # a mount entry beats the name's default
    if not wanted:
        return {"file_system_names": []}
    if len(wanted) > 1:
        return _invalid("Invalid request data: the mock cloud mounts one filesystem per instance.")
    for fid in wanted:
        doc = by_id[fid]
        if doc["region"]["name"] != region:
            return _error(400, "instance-operations/launch/file-system-in-wrong-region",
                          f"Filesystem '{doc['name']}' is in region {doc['region']['name']}, "
                          f"not in {region}.",
                          "Launch the instance in the filesystem's region, or choose a filesystem "
                          "in the instance's region.")
    fid, mount_point = next(iter(wanted.items()))
    return {"volume": fid, "file_system_names": [by_id[fid]["name"]],
            "file_system_mounts": [{"mount_point": mount_point, "file_system_id": fid}]}


def _launch_not_found(what: str) -> Response:
    return _error(400, "global/object-does-not-exist", f"Filesystem {what!r} does not exist.",
                  "Check the filesystem's name or id, then try again.")
