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
  overlay network joins privately (vast_overlays.py).
"""

from __future__ import annotations

import json
import time

import requests

from gpubench.providers.common import (Account, AuthError, CapacityError, Instance, InstanceState,
                                       LaunchSpec, NotFoundError, Offer, ProviderError,
                                       SshKeyRef, TransportError, key_body, provider_name)
from gpubench.providers.gpus import normalize_gpu_name
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
        try:
            answer = self._call("PUT", f"/api/v0/asks/{offer.offer_id}/", json=body, launch=True)
        except ProviderError as e:
            gone = e.status in (404, 410) or e.code in CAPACITY_ERRORS or "no_such_ask" in e.message
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
                   "ports": _mapped_ports(raw)},
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


def _epoch_iso(value) -> str | None:
    if not isinstance(value, (int, float)):
        return None
    from datetime import datetime, timezone

    return datetime.fromtimestamp(value, tz=timezone.utc).isoformat(timespec="seconds")

