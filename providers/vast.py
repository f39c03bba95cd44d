"""Vast.ai (https://console.vast.ai), the paths the official `vastai` CLI 1.9.1 uses.

Facts that shape this adapter:
- the base URL is the host root; paths are /api/v0/... (instances list: /api/v1/...),
  always with a trailing slash as the CLI sends them;
- errors are {"success": false, "error": code, "msg": text}, or {"detail": ...}, or text;
- the disk is fixed when the instance is created, so a sized disk is always sent;
- only offers with direct SSH ports are used (rsync through the proxy is unreliable);
  the instance is reached at public_ipaddr + ports["22/tcp"][0].HostPort;
- an instance that reaches exited / unknown / offline will never run (the docs' poll trap);
- the create answer calls the new instance id `new_contract`;
- extra ports are asked for in the create's `env` as docker flags ({"-p 10022:10022": "1"},
  as the official CLI sends them) and come back in `ports` beside 22/tcp;
- billed cost: GET /api/v0/charges/ (`vastai show invoices-v1 --charges`), one entry per
  instance, `source` "instance-<id>", amounts in dollars;
- an offer's machine may belong to a physical cluster (`cluster_id`), whose machines an
  overlay network joins privately (vast_overlays.py);
- local volumes (Volumes): a volume lives on one machine's disk, made from a volume offer
  (`POST /api/v0/volumes/search/`, `PUT /api/v0/volumes/`), listed at
  `GET /api/v0/volumes/?owner=me&type=local_volume`, deleted at `DELETE /api/v0/volumes/`
  once no instance uses it; it is attached only when an instance is created on the same
  machine (the ask's `volume_info`), so its place is the machine_id.
"""

from __future__ import annotations

import json
import time

import requests

from gpubench.providers.common import (VOLUME_MOUNT, Account, AuthError, CapacityError, Instance,
                                       InstanceState, InvalidRequestError, LaunchSpec, NotFoundError,
                                       Offer, ProviderError, SshKeyRef, TransportError, Volume,
                                       VolumePlace, key_body, provider_name)
from gpubench.providers.gpus import gpu_matches, normalize_gpu_name, offer_vram_gb
from gpubench.providers.http import ANSWER_ERRORS, HttpClient, HttpSettings, checked_answers, strip_suffix
from gpubench.providers.vast_overlays import VastOverlays

NAME = "vast"
DEFAULT_URL = "https://console.vast.ai"
MAX_PAGES = 200           # instance list pages of 25: a bound on the loop, far above real use
ONSTART = "touch ~/.no_auto_tmux"   # Vast images start tmux on login otherwise

STATUS = {
    None: InstanceState.PENDING,
    "created": InstanceState.PENDING,
    "loading": InstanceState.PENDING,
    "rebooting": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "stopped": InstanceState.STOPPED,
    "frozen": InstanceState.STOPPED,
    "exited": InstanceState.FAILED,
    "unknown": InstanceState.FAILED,
    "offline": InstanceState.FAILED,
}
CAPACITY_ERRORS = {"no_such_ask"}
VOLUMES = "/api/v0/volumes/"
VOLUME_SEARCH = "/api/v0/volumes/search/"
HOURS_A_MONTH = 720        # Vast.ai prices disk per GB a month and bills it by the hour (/720)


def parse_error(resp: requests.Response) -> tuple[str | None, str]:
    try:
        body = resp.json()
    except ValueError:
        return None, resp.text.strip()[:200]
    if not isinstance(body, dict):
        return None, str(body)[:200]
    code = body.get("error") if isinstance(body.get("error"), str) else None
    message = body.get("msg") or body.get("message") or body.get("detail") or code or ""
    return code, str(message)


def connect(api_key: str, base_url: str = DEFAULT_URL,
            settings: HttpSettings | None = None) -> "Vast":
    settings = settings or HttpSettings.from_env()
    client = HttpClient(NAME, strip_suffix(base_url, "/api/v0", "/api/v1"), {"Authorization": f"Bearer {api_key}"}, parse_error, settings)
    return Vast(client)


@checked_answers
class Vast(VastOverlays):
    name = NAME
    default_user = "root"
    account: Account | None = None   # set by registry.get

    def __init__(self, client: HttpClient, disk_gb: int = 100) -> None:
        self.client = client
        self.disk_gb = disk_gb   # what offers are priced for; launch sends the spec's size
        self._account_id: str | None = None

    def _call(self, method: str, path: str, **kw):
        try:
            return self.client.json(method, path, **kw)
        except ProviderError as e:
            # POST /bundles/ answers a bad key with 404 "Invalid user key".
            if e.status == 404 and "invalid user key" in e.message.lower():
                raise AuthError(NAME, e.endpoint, e.message, status=e.status, code=e.code) from None
            raise

    # -- offers -------------------------------------------------------------
    def offers(self, gpus: int | None = None, gpu_type: str | None = None,
               interruptible: bool = False) -> list[Offer]:
        query: dict = {
            "verified": {"eq": True}, "rentable": {"eq": True}, "rented": {"eq": False},
            "external": {"eq": False}, "direct_port_count": {"gte": 1},
            "order": [["dph_total", "asc"]], "type": "bid" if interruptible else "on-demand",
            "allocated_storage": float(self.disk_gb), "limit": 500,
        }
        if gpus:
            query["num_gpus"] = {"eq": gpus}
        body = self._call("POST", "/api/v0/bundles/", json=query)
        rows = body.get("offers", []) if isinstance(body, dict) else []
        offers: list[Offer] = []
        read, unreadable = 0, None
        for row in rows:
            try:
                offer = _offer(row, gpus, interruptible)
            except ANSWER_ERRORS as e:
                unreadable = e   # one entry we cannot read: the others still stand
                continue
            read += 1
            if offer is not None:
                offers.append(offer)
        if unreadable is not None and not read:
            raise unreadable    # nothing in it could be read: the answer itself is wrong
        return offers

    # -- keys ---------------------------------------------------------------
    def ensure_ssh_key(self, public_key: str, name: str) -> SshKeyRef:
        """Vast.ai has no key names: account keys go onto every new instance, so the
        ref's key_id is all it knows the key by. The list is a bare array whose text
        field is `key` (`public_key` in the create answer)."""
        wanted = key_body(public_key)
        for key in self._call("GET", "/api/v0/ssh/") or []:
            text = key.get("key") or key.get("public_key") or ""
            if key_body(text) == wanted and not key.get("deleted_at"):
                return SshKeyRef(public_key.strip(), key_id=str(key["id"]))
        body = self._call("POST", "/api/v0/ssh/", json={"ssh_key": public_key.strip()})
        return SshKeyRef(public_key.strip(), key_id=str(((body or {}).get("key") or {}).get("id", "")))

    # -- instances ----------------------------------------------------------
    def launch(self, offer: Offer, spec: LaunchSpec) -> Instance:
        body = {
            "client_id": "me", "image": spec.image, "disk": float(spec.disk_gb),
            "env": {f"-p {port}:{port}": "1" for port in spec.ports if port != 22},
            "label": provider_name(spec.name), "onstart": ONSTART,
            "runtype": "ssh_direc ssh_proxy",      # direct SSH (rsync), proxy as a fallback
            "price": offer.price_per_hour if spec.interruptible else None,
            "cancel_unavail": True, "extra": None, "image_login": None,
        }
        if spec.volume is not None:
            body["volume_info"] = _volume_info(spec.volume, offer)
        try:
            answer = self._call("PUT", f"/api/v0/asks/{offer.offer_id}/", json=body, launch=True)
        except ProviderError as e:
            gone = (e.status in (404, 410) or e.code in CAPACITY_ERRORS or "no_such_ask" in e.message) \
                and e.code != "no_such_volume"      # the volume is what is missing, not the offer
            if gone and e.launch_refused and not e.final:
                raise CapacityError(NAME, e.endpoint, e.message, status=e.status, code=e.code) from None
            raise
        if not isinstance(answer, dict) or not answer.get("new_contract"):
            # A success status without the new id: the machine may exist all the same.
            message = (answer or {}).get("msg") if isinstance(answer, dict) else None
            raise TransportError(NAME, f"PUT /api/v0/asks/{offer.offer_id}/",
                                 str(message or "answer has no new_contract"))
        return Instance(provider=NAME, instance_id=str(answer["new_contract"]), name=body["label"],
                        status=InstanceState.PENDING, gpu_name=offer.gpu_name,
                        gpu_count=offer.gpu_count, price_per_hour=offer.price_per_hour,
                        region=offer.region, instance_type=offer.instance_type)

    def get(self, instance_id: str) -> Instance:
        body = self._call("GET", f"/api/v0/instances/{instance_id}/", params={"owner": "me"})
        raw = body.get("instances") if isinstance(body, dict) else None
        if isinstance(raw, list):
            raw = raw[0] if raw else None
        if not raw:
            raise NotFoundError(NAME, f"GET /api/v0/instances/{instance_id}/", "instance not found")
        return self._instance(raw)

    def list(self) -> list[Instance]:
        out: list[Instance] = []
        token = None
        for _ in range(MAX_PAGES):
            params = {"limit": 25, "order_by": json.dumps([{"col": "id", "dir": "asc"}])}
            if token:
                params["after_token"] = token
            body = self._call("GET", "/api/v1/instances/", params=params) or {}
            out.extend(self._instance(r) for r in body.get("instances") or [])
            token = body.get("next_token")
            if not token:
                break
        return out

    def terminate(self, instance_id: str) -> None:
        self._call("DELETE", f"/api/v0/instances/{instance_id}/", json={})

    # -- volumes (Volumes) ----------------------------------------------------
    def volume_places(self, gpu_type: str | None = None, size_gb: int | None = None) -> list[VolumePlace]:
        """A place per volume offer (one machine's disk: the place is its machine_id),
        with the GPU offers of `gpu_type` on that machine now; most offers first, then
        the cheapest storage."""
        need = size_gb if isinstance(size_gb, int) and not isinstance(size_gb, bool) and size_gb > 0 else 1
        query = {"verified": {"eq": True}, "external": {"eq": False}, "disk_space": {"gte": need},
                 "order": [["storage_cost", "asc"]], "allocated_storage": float(need), "limit": 500}
        body = self._call("POST", VOLUME_SEARCH, json=query)
        rows = body.get("offers") if isinstance(body, dict) else None
        if not isinstance(rows, list):
            raise ProviderError(NAME, f"POST {VOLUME_SEARCH}", "unexpected answer: no list of volume offers")
        counts: dict[str, int] = {}
        if gpu_type:
            for offer in self.offers(gpu_type=gpu_type):
                machine = offer.extra.get("machine_id")
                if machine is not None and gpu_matches(gpu_type, offer.gpu_name, offer_vram_gb(offer)):
                    counts[str(machine)] = counts.get(str(machine), 0) + 1
        places = []
        for row in rows:
            place = _volume_place(row, counts)
            if place is not None:
                places.append(place)
        places.sort(key=lambda p: (-p.offers, p.price_gb_month if p.price_gb_month is not None else float("inf")))
        return places

    def create_volume(self, name: str, size_gb: int | None, place: VolumePlace) -> Volume:
        """PUT /api/v0/volumes/ {id: the volume offer, size, name}: the answer names the
        volume ("V.123"), which is then read back from the list. A volume's size is fixed
        and required here (the API's default of 15 GB is never assumed)."""
        endpoint = f"PUT {VOLUMES}"
        if not isinstance(size_gb, int) or isinstance(size_gb, bool) or size_gb < 1:
            raise InvalidRequestError(NAME, endpoint, f"a Vast.ai local volume needs a size: a whole "
                                                      f"number of GB above 0, not {size_gb!r}")
        try:
            offer_id = int(place.offer_id)
        except (TypeError, ValueError):
            raise InvalidRequestError(NAME, endpoint, f"place {place.place!r} names no volume offer "
                                                      f"(volume_places gives them)") from None
        full = provider_name(name)
        # As a launch: not retried after the request went out (a second PUT would make a
        # second volume), and an unclear answer is a TransportError (it may exist).
        answer = self._call("PUT", VOLUMES, json={"id": offer_id, "size": size_gb, "name": full}, launch=True)
        if isinstance(answer, dict) and answer.get("success") is False:
            raise InvalidRequestError(NAME, endpoint, str(answer.get("msg") or answer.get("error") or "refused"),
                                      code=answer.get("error") if isinstance(answer.get("error"), str) else None)
        vid = _volume_id(answer.get("volume_name") if isinstance(answer, dict) else None)
        try:
            listed = self.list_volumes()
        except ProviderError:
            if vid is None:
                raise TransportError(NAME, endpoint, "the answer names no volume and the list cannot be "
                                                     "read: it may exist all the same") from None
            listed = []        # made (the answer named it): what the create said will do
        found = [v for v in listed if v.volume_id == vid] if vid else \
            sorted((v for v in listed if v.name == full and v.place == place.place),
                   key=lambda v: int(v.volume_id) if v.volume_id.isdigit() else 0)[-1:]
        if found:
            return found[-1]
        if vid is None:
            raise TransportError(NAME, endpoint, "the answer names no volume and none called "
                                                 f"{full} is listed: it may exist all the same")
        # Made (the answer named it) but not listed yet: what the create said.
        return Volume(provider=NAME, volume_id=vid, name=full, place=place.place, size_gb=float(size_gb),
                      monthly_cost=round(place.price_gb_month * size_gb, 4)
                      if place.price_gb_month is not None else None,
                      extra={"listed": False})

    def list_volumes(self) -> list[Volume]:
        """GET /api/v0/volumes/?owner=me&type=local_volume (as `vastai show volumes -t
        local` asks): every local volume of the account, gpubench's or not."""
        body = self._call("GET", VOLUMES, params={"owner": "me", "type": "local_volume"})
        rows = body.get("volumes") if isinstance(body, dict) else None
        if not isinstance(rows, list):
            raise ProviderError(NAME, f"GET {VOLUMES}", "unexpected answer: no list of volumes")
        try:
            return [_volume(row) for row in rows]
        except ANSWER_ERRORS as e:
            raise ProviderError(NAME, f"GET {VOLUMES}", f"unexpected answer: {e}") from None

    def delete_volume(self, volume_id: str) -> None:
        """DELETE /api/v0/volumes/ with the id both where the spec puts it (the body) and
        where the CLI does (`?id=`): either reading finds it. An attached volume is
        refused (InvalidRequestError, Vast's words); an unknown one is NotFoundError."""
        endpoint = f"DELETE {VOLUMES}"
        try:
            vid = int(str(volume_id).removeprefix("V."))
        except ValueError:
            raise NotFoundError(NAME, endpoint,
                                f"no volume {volume_id!r}: Vast.ai volume ids are numbers") from None
        try:
            answer = self._call("DELETE", VOLUMES, json={"id": vid}, params={"id": vid})
        except ProviderError as e:
            if e.code == "no_such_volume" and not isinstance(e, NotFoundError):
                raise NotFoundError(NAME, e.endpoint, e.message, status=e.status, code=e.code) from None
            raise
        if isinstance(answer, dict) and answer.get("success") is False:
            code = answer.get("error") if isinstance(answer.get("error"), str) else None
            cls = NotFoundError if code == "no_such_volume" else InvalidRequestError
            raise cls(NAME, endpoint, str(answer.get("msg") or code or "refused"), code=code)

    def offer_at(self, offer: Offer, volume: Volume) -> bool:
        """A local volume is mounted only on its own machine: the offer's machine_id."""
        machine = offer.extra.get("machine_id")
        return (offer.provider == NAME and volume.provider == NAME and machine is not None
                and bool(volume.place) and str(machine) == volume.place)

    # -- billing ------------------------------------------------------------
    def billed_cost(self, instance_id: str, since: float | None = None) -> float | None:
        now = time.time()
        start = (since - 86400) if since else now - 30 * 86400
        filters = {"day": {"gte": int(start), "lte": int(now + 86400)}, "type": {"in": ["instance"]}}
        source, total, seen, token = f"instance-{instance_id}", 0.0, False, None
        for _ in range(MAX_PAGES):
            params = {"select_filters": json.dumps(filters), "limit": 500}
            if token:
                params["after_token"] = token
            body = self._call("GET", "/api/v0/charges/", params=params) or {}
            try:
                for entry in body.get("results") or []:
                    if entry.get("source") == source:
                        total, seen = total + float(entry["amount"]), True
            except ANSWER_ERRORS as e:
                raise ProviderError(NAME, "GET /api/v0/charges/", f"unexpected answer: {e}") from None
            token = body.get("next_token")
            if not token:
                break
        return round(total, 4) if seen else None

    # -- account ------------------------------------------------------------
    def lookup_account_id(self) -> str | None:
        """The user id from GET /api/v0/users/current/ (the `vastai show user` call)."""
        if self._account_id is None:
            body = self._call("GET", "/api/v0/users/current/")
            uid = body.get("id") if isinstance(body, dict) else None
            self._account_id = None if uid is None or isinstance(uid, bool) else str(uid)
        return self._account_id

    def _instance(self, raw: dict) -> Instance:
        status = raw.get("actual_status")
        state = STATUS.get(status if isinstance(status, str) or status is None else "unknown",
                           InstanceState.UNKNOWN)
        if raw.get("intended_status") == "stopped" and state is InstanceState.FAILED:
            state = InstanceState.STOPPED
        host, port = _direct_ssh(raw)
        if state is InstanceState.RUNNING and host is None:
            state = InstanceState.PENDING  # running, but the direct port is not mapped yet
        return Instance(
            provider=NAME, instance_id=str(raw["id"]), name=raw.get("label") or "",
            status=state, raw_status=str(status), ssh_host=host, ssh_port=port or 22,
            ssh_user=self.default_user, gpu_name=normalize_gpu_name(raw.get("gpu_name") or ""),
            gpu_count=int(raw.get("num_gpus") or 0), price_per_hour=raw.get("dph_total"),
            region=raw.get("geolocation") or "", created_at=_epoch_iso(raw.get("start_date")),
            instance_type=f"{raw.get('num_gpus') or 0}x {raw.get('gpu_name') or ''}",
            port_map=_mapped_ports(raw),   # Vast.ai has no private network: private_ip stays None
            extra={"status_msg": raw.get("status_msg"), "proxy": (raw.get("ssh_host"), raw.get("ssh_port")),
                   "ports": _mapped_ports(raw), "volumes": _instance_volumes(raw)},
        )


def _offer(row: dict, gpus: int | None, interruptible: bool) -> Offer | None:
    # Filter again here: the query is a request, the answer is what counts.
    if (row.get("direct_port_count") or 0) < 1 or row.get("rented") or row.get("rentable") is False:
        return None
    count = int(row.get("num_gpus") or 0)
    if not count or (gpus and count != gpus):
        return None
    price = row.get("min_bid") if interruptible else row.get("dph_total")
    if price is None:
        return None
    return Offer(
        provider=NAME, offer_id=str(row["id"]), gpu_name=normalize_gpu_name(row.get("gpu_name") or ""),
        gpu_count=count, price_per_hour=float(price), region=row.get("geolocation") or "",
        disk_gb=row.get("disk_space"), interruptible=interruptible, available=1,
        instance_type=f"{count}x {row.get('gpu_name', '')}",
        extra=_host_figures(row))


# The offer's published host figures that gpubench.offer_checks judges, under Vast.ai's own
# names, and the ids of the machine and of its host (the machine is what a rented
# instance runs on: records and the spread across hosts name it).
HOST_FIGURES = ("pcie_bw", "inet_down", "inet_up", "direct_port_count", "gpu_ram", "gpu_total_ram",
                "cpu_ram", "cpu_cores_effective", "cuda_max_good",
                # and the link figures the performance model reads (gpubench/predict/links.py)
                "bw_nvlink", "pci_gen", "gpu_lanes")


def _host_figures(row: dict) -> dict:
    extra = {name: _figure(row.get(name)) for name in HOST_FIGURES}
    # Older answers carry only reliability2 (the same score, the name the CLI's search uses).
    reliability = row.get("reliability")
    extra["reliability"] = _figure(reliability if reliability is not None else row.get("reliability2"))
    # cluster_id: the physical cluster the machine is in, whose machines an overlay joins
    for name in ("machine_id", "host_id", "cluster_id"):
        value = row.get(name)
        extra[name] = value if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    return {k: v for k, v in extra.items() if v is not None}


def _figure(value) -> float | None:
    """A published figure as a number; anything else (null, text) is left out, and an
    offer without a figure is not judged on it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _mapped_ports(raw: dict) -> dict[int, int]:
    """Container TCP port -> host port, from the docker-style `ports` map."""
    ports = raw.get("ports")
    out = {}
    if isinstance(ports, dict):
        for name, mapped in ports.items():
            port, _, proto = str(name).partition("/")
            try:
                if proto in ("", "tcp") and mapped:
                    out[int(port)] = int(mapped[0]["HostPort"])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
    return out


def _direct_ssh(raw: dict) -> tuple[str | None, int | None]:
    ports = raw.get("ports") or {}
    mapped = ports.get("22/tcp") if isinstance(ports, dict) else None
    if not mapped or not raw.get("public_ipaddr"):
        return None, None
    try:
        return str(raw["public_ipaddr"]).strip(), int(mapped[0]["HostPort"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None, None


# -- volumes ------------------------------------------------------------------

def _volume_info(volume: Volume, offer: Offer) -> dict:
    """The ask's `volume_info` linking an existing local volume (create_new false), mounted
    at VOLUME_MOUNT; Vast.ai refuses it on another machine than the volume's (offer_at)."""
    if volume.provider != NAME:
        raise InvalidRequestError(NAME, f"PUT /api/v0/asks/{offer.offer_id}/",
                                  f"volume {volume.name or volume.volume_id} is a {volume.provider} volume, "
                                  f"not a Vast.ai one")
    try:
        vid = int(volume.volume_id)
    except ValueError:
        raise InvalidRequestError(NAME, f"PUT /api/v0/asks/{offer.offer_id}/",
                                  f"{volume.volume_id!r} is not a Vast.ai volume id") from None
    return {"create_new": False, "volume_id": vid, "mount_path": VOLUME_MOUNT}


def _volume_id(volume_name) -> str | None:
    """"V.123" (the create's answer) -> "123"."""
    if not isinstance(volume_name, str):
        return None
    vid = volume_name.strip().removeprefix("V.")
    return vid if vid.isdigit() else None


def _volume_place(row: dict, counts: dict[str, int]) -> VolumePlace | None:
    """A volume offer as a place; None for one without a machine or an id."""
    machine, oid = row.get("machine_id"), row.get("id")
    if machine is None or isinstance(machine, bool) or oid is None or isinstance(oid, bool):
        return None
    place = str(machine)
    return VolumePlace(place=place, offers=counts.get(place, 0), offer_id=str(oid),
                       price_gb_month=_figure(row.get("storage_cost")),
                       extra={"geolocation": row.get("geolocation") or "",
                              "free_gb": _figure(row.get("disk_space")), "host_id": row.get("host_id"),
                              "reliability": _figure(row.get("reliability2") or row.get("reliability"))})


def _attached(value) -> tuple[str, ...]:
    """`instances`: the spec says a list of objects (unverified what they hold): ids, or
    objects carrying one."""
    out = []
    for item in value if isinstance(value, list) else ():
        if isinstance(item, dict):
            item = item.get("id", item.get("instance_id", item.get("contract_id")))
        if isinstance(item, (int, str)) and not isinstance(item, bool) and str(item):
            out.append(str(item))
    return tuple(out)


def _volume(row: dict) -> Volume:
    size = _figure(row.get("disk_space"))
    per_gb = _figure(row.get("storage_cost"))
    monthly, basis = None, None
    if per_gb is not None and size is not None:
        monthly, basis = round(per_gb * size, 4), "storage_cost"
    elif (hourly := _figure(row.get("storage_total_cost"))) is not None:
        # Unverified: the spec's storage_total_cost has no unit. Its example (0.000555... =
        # 4 GB x $0.10 / 720) and the instance rows' disk figures read as $ an hour for
        # the whole volume; used only where no per-GB storage_cost is given.
        monthly, basis = round(hourly * HOURS_A_MONTH, 4), "storage_total_cost x 720 (unit unverified)"
    instances = row.get("instances")
    attached = _attached(instances)
    machine = row.get("machine_id")
    name = row.get("label") or row.get("name") or ""      # `show volumes` shows `label` as the name
    return Volume(provider=NAME, volume_id=str(int(row["id"])), name=str(name),
                  place="" if machine is None else str(machine), size_gb=size,
                  monthly_cost=monthly, attached_to=attached,
                  in_use=bool(attached) if isinstance(instances, list) else None,
                  status=str(row.get("status") or ""),
                  extra={"cost_basis": basis, "geolocation": row.get("geolocation") or "",
                         "host_id": row.get("host_id")})


def _instance_volumes(raw: dict) -> tuple[str, ...]:
    """The local volumes an instance row's `volume_info` names (a list of objects)."""
    out = []
    items = raw.get("volume_info")
    for item in items if isinstance(items, list) else ():
        vid = item.get("volume_id", item.get("id")) if isinstance(item, dict) else item
        if isinstance(vid, (int, str)) and not isinstance(vid, bool) and str(vid):
            out.append(str(vid))
    return tuple(out)


def _epoch_iso(value) -> str | None:
    if not isinstance(value, (int, float)):
        return None
    from datetime import datetime, timezone

    return datetime.fromtimestamp(value, tz=timezone.utc).isoformat(timespec="seconds")

