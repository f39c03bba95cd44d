"""RunPod REST API v2 (https://api.runpod.io/v2), spec 2.0.0 / Frontdoor v2.9.0.
Not GraphQL (retired early 2027) and not REST v1 (gone since 2026-11-15).

Facts that shape this adapter:
- lists come in envelopes ({"pods": [...]}, {"gpus": [...]}, {"keys": [...]});
  errors are problem+json {title, status, detail, errors[]};
- unknown body fields are rejected with 422, so only spec fields are sent;
- no server-side GPU fallback: one gpu.id per create; the caller tries offers in order.
  A 400 on create is "no capacity for this candidate"; gpu.count is always sent;
- direct SSH (the proxy cannot rsync) needs "22/tcp" in ports and startSsh, and
  ssh.direct stays null until the pod runs with that port mapped;
- PUT /account/ssh-keys replaces the whole set: read, add, write;
- ERROR never becomes RUNNING: a poll must stop there; no spot pods in v2;
- billed cost: GET /v2/billing/pods?podId= (metadata.totals.totalAmount, in dollars);
- Instant Clusters (POST /v2/clusters): N pods in one data centre or none, each with
  `cluster: {id, rank, ip}`, ip on the cluster's private network. Member pods leave
  GET /v2/pods unless includeClusterPods=true, and DELETE /v2/pods/{id} of one is 409:
  a member goes only with its cluster (DELETE /v2/clusters/{id}).
- network volumes (Volumes): GET/POST /v2/network-volumes, DELETE /v2/network-volumes/{id}
  (204); {id, name, size (GB, 10-4096), dataCenter, type}: no state, no attachment, no
  price. A volume lives in one Secure Cloud data centre whose networkVolumeTypes (GET
  /v2/catalog/datacenters) is not empty; a pod mounts it at create only, as
  mounts.network [{volumeId, path}] (at most one, path required, never beside
  mounts.persistent: 400), in that data centre (dataCenterIds) and in Secure Cloud. Which
  pods use a volume is read from the pods' own mounts. Deleting a pod only detaches it.
"""

from __future__ import annotations

import time

import requests

from gpubench.providers.common import (VOLUME_MOUNT, Account, CapacityError, ClusterCreated, Instance,
                                       InstanceState, InvalidRequestError, LaunchSpec, NotFoundError, Offer,
                                       ProviderError, SshKeyRef, TransportError, Volume, VolumePlace, key_body,
                                       provider_name)
from gpubench.providers.gpus import gpu_matches, normalize_gpu_name
from gpubench.providers.http import ANSWER_ERRORS, HttpClient, HttpSettings, checked_answers, strip_suffix

NAME = "runpod"
DEFAULT_URL = "https://api.runpod.io"
CLOUD = "SECURE"
MAX_PAGES = 100

STATUS = {
    "PROVISIONING": InstanceState.PENDING,
    "STARTING": InstanceState.PENDING,
    "RUNNING": InstanceState.RUNNING,
    "EXITED": InstanceState.STOPPED,
    "ERROR": InstanceState.FAILED,
    "TERMINATED": InstanceState.TERMINATED,
}
AVAILABLE = {"HIGH": 3, "MEDIUM": 2, "LOW": 1, "NONE": 0}

# Network volumes. Size bounds: CreateNetworkVolumeRequest.size (minimum 10, maximum 4096).
VOLUME_MIN_GB, VOLUME_MAX_GB = 10, 4096
VOLUME_TYPE = "STANDARD"          # the tier gpubench makes, where the data centre has it
# The API gives no price. RunPod's pricing page (https://www.runpod.io/pricing) and billing
# docs (https://docs.runpod.io/get-started/billing-information): STANDARD $0.07 per GB a
# month below 1 TB and $0.05 above ("$0.07 per GB per month for the first 1TB, and $0.05 per
# GB per month for additional storage beyond that", docs.runpod.io serverless network
# volumes: read here as tiers, 1 TB = 1000 GB); HIGH_PERFORMANCE $0.14. Billed on the size
# allocated, not on what is used; until the volume is deleted.
STANDARD_FIRST_TB_GB_MONTH, STANDARD_BEYOND_GB_MONTH = 0.07, 0.05
HIGH_PERFORMANCE_GB_MONTH = 0.14
TB_GB = 1000


def volume_monthly_cost(size_gb: float | None, volume_type: str = VOLUME_TYPE) -> float | None:
    """$ a month for a network volume of `size_gb` (None where the size or tier is unknown)."""
    if size_gb is None:
        return None
    if volume_type == "HIGH_PERFORMANCE":
        return round(size_gb * HIGH_PERFORMANCE_GB_MONTH, 2)
    if volume_type != "STANDARD":
        return None
    first = min(size_gb, TB_GB)
    return round(first * STANDARD_FIRST_TB_GB_MONTH + (size_gb - first) * STANDARD_BEYOND_GB_MONTH, 2)


def _check_size(size_gb, endpoint: str) -> int:
    """The size as the create takes it, or InvalidRequestError before any call."""
    if isinstance(size_gb, bool) or not isinstance(size_gb, (int, float)) or size_gb != int(size_gb) \
            or not VOLUME_MIN_GB <= size_gb <= VOLUME_MAX_GB:
        got = "none" if size_gb is None else f"{size_gb:g}" if isinstance(size_gb, (int, float)) else repr(size_gb)
        raise InvalidRequestError(NAME, endpoint, f"a RunPod network volume is {VOLUME_MIN_GB} to "
                                  f"{VOLUME_MAX_GB} GB, not {got}")
    return int(size_gb)


def parse_error(resp: requests.Response) -> tuple[str | None, str]:
    body = resp.json()
    if not isinstance(body, dict):
        return None, str(body)[:200]
    message = body.get("detail") or body.get("title") or ""
    if body.get("errors"):
        message = f"{message}: {'; '.join(map(str, body['errors']))}"
    return body.get("title"), message


def connect(api_key: str, base_url: str = DEFAULT_URL,
            settings: HttpSettings | None = None) -> "RunPod":
    settings = settings or HttpSettings.from_env()
    # The docs write the base as https://api.runpod.io/v2; paths here carry /v2 themselves.
    client = HttpClient(NAME, strip_suffix(base_url, "/v2"), {"Authorization": f"Bearer {api_key}"}, parse_error, settings)
    return RunPod(client)


@checked_answers
class RunPod:
    name = NAME
    account: Account | None = None   # set by registry.get
    default_user = "root"

    def __init__(self, client: HttpClient) -> None:
        self.client = client

    # -- offers -------------------------------------------------------------
    def offers(self, gpus: int | None = None, gpu_type: str | None = None,
               interruptible: bool = False) -> list[Offer]:
        if interruptible:
            return []  # v2 has no spot pods
        count = gpus or 1
        body = self.client.json("GET", "/v2/catalog/gpus", params={
            "include": "AVAILABILITY", "product": "POD", "count": count, "cloud": CLOUD}) or {}
        offers: list[Offer] = []
        read, unreadable = 0, None
        for gpu in body.get("gpus") or []:
            try:
                offer = _offer(gpu, count)
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
        """Adds the key to the account's set; PUT replaces the set, so read first.
        RunPod keys have neither name nor id: the ref carries the key's text only."""
        keys = (self.client.json("GET", "/v2/account/ssh-keys") or {}).get("keys") or []
        wanted = key_body(public_key)
        if not any(key_body(k) == wanted for k in keys):
            self.client.json("PUT", "/v2/account/ssh-keys", json={"keys": keys + [public_key.strip()]})
        return SshKeyRef(public_key.strip())

    # -- instances ----------------------------------------------------------
    def launch(self, offer: Offer, spec: LaunchSpec) -> Instance:
        body = {**_container(spec, ["22/tcp", *(f"{p}/tcp" for p in spec.ports if p != 22)]),
                "gpu": {"id": offer.offer_id, "count": spec.gpus},   # count always: see docstring
                "cloud": CLOUD, **_network_mount(offer, spec, "POST /v2/pods")}
        pod = self._create("/v2/pods", body)
        if not isinstance(pod, dict) or not pod.get("id"):   # the pod may exist all the same
            raise TransportError(NAME, "POST /v2/pods", "answer has no pod id")
        inst = self._instance(pod)
        inst.price_per_hour = inst.price_per_hour or offer.price_per_hour
        return inst

    def _create(self, path: str, body: dict):
        """POST a create; a refusal to place it (400: not now; 403: no access to the
        pool) is a CapacityError: nothing was created, another offer may do."""
        try:
            return self.client.json("POST", path, json=body, launch=True)
        except InvalidRequestError as e:
            if e.status in (400, 403):
                raise CapacityError(NAME, e.endpoint, e.message, status=e.status, code=e.code) from None
            raise

    def get(self, instance_id: str) -> Instance:
        return self._instance(self.client.json("GET", f"/v2/pods/{instance_id}"))

    def list(self) -> list[Instance]:
        out: list[Instance] = []
        cursor = None
        for _ in range(MAX_PAGES):
            params = {"includeClusterPods": "true", **({"cursor": cursor} if cursor else {})}
            body = self.client.json("GET", "/v2/pods", params=params) or {}
            out.extend(self._instance(p) for p in body.get("pods") or [])
            cursor = body.get("nextCursor")   # not in the spec yet; followed if it appears
            if not cursor:
                break
        return out

    def terminate(self, instance_id: str) -> None:
        """A cluster's member cannot be terminated alone (409): it goes with its cluster,
        so terminating one deletes the cluster (gpubench takes a cluster's members down
        together; `down` of one member is widened to its cluster before this is called)."""
        try:
            self.client.request("DELETE", f"/v2/pods/{instance_id}")
        except InvalidRequestError as e:
            if e.status != 409:
                raise
            cluster = self.get(instance_id).extra.get("cluster_id")
            if not cluster:
                raise
            self.delete_cluster(cluster)

    # -- clusters (NativeClusters) ------------------------------------------
    def create_cluster(self, offer: Offer, spec: LaunchSpec, nodes: int) -> ClusterCreated:
        # The members reach each other on the private network at the container ports
        # themselves: only SSH needs a public port.
        body = {**_container(spec, ["22/tcp"]), "type": "TRAINING",
                "compute": {"gpuTypeId": offer.offer_id, "gpuCountPerPod": spec.gpus, "podCount": nodes},
                **_network_mount(offer, spec, "POST /v2/clusters")}   # every member mounts it
        try:
            cluster = self._create("/v2/clusters", body)   # 400: not in one data centre now
        except ANSWER_ERRORS as e:
            raise TransportError(NAME, "POST /v2/clusters", f"unexpected answer: {e}") from None
        if not isinstance(cluster, dict) or not isinstance(cluster.get("id"), str) or not cluster["id"]:
            raise TransportError(NAME, "POST /v2/clusters", "answer has no cluster id")
        try:
            members = self.cluster_instances(cluster["id"])
        except ProviderError:
            members = []         # created all the same: the caller polls for its members
        return ClusterCreated(cluster["id"], members)

    def cluster_instances(self, cluster_id: str) -> list[Instance]:
        body = self.client.json("GET", f"/v2/clusters/{cluster_id}/pods") or {}
        try:
            pods = [self._instance(p) for p in body.get("pods") or []]
        except ANSWER_ERRORS as e:
            raise ProviderError(NAME, f"GET /v2/clusters/{cluster_id}/pods", f"unexpected answer: {e}") from None
        unranked = len(pods)
        return sorted(pods, key=lambda i: i.extra.get("rank") if i.extra.get("rank") is not None else unranked)

    def delete_cluster(self, cluster_id: str) -> None:
        self.client.request("DELETE", f"/v2/clusters/{cluster_id}")

    # -- network volumes (Volumes) ---------------------------------------------
    def volume_places(self, gpu_type: str | None = None, size_gb: int | None = None) -> list[VolumePlace]:
        """The data centres that take network volumes (networkVolumeTypes not empty: Secure
        Cloud's), each with how many Secure Cloud offers of `gpu_type` have GPUs free there
        now (the GPU catalog's per-data-centre availability, as offers() reads it), most
        first, then the most available."""
        endpoint = "GET /v2/catalog/datacenters"
        if size_gb is not None:
            _check_size(size_gb, endpoint)
        body = self.client.json("GET", "/v2/catalog/datacenters") or {}
        counts: dict[str, int] = {}
        levels: dict[str, int] = {}
        if gpu_type:
            for offer in self.offers(gpus=1, gpu_type=gpu_type):
                if not gpu_matches(gpu_type, offer.gpu_name, offer.extra.get("memory_gb")):
                    continue
                for dc, level in (offer.extra.get("dc_availability") or {}).items():
                    if AVAILABLE.get(level, 0):
                        counts[dc] = counts.get(dc, 0) + 1
                        levels[dc] = levels.get(dc, 0) + AVAILABLE[level]
        try:
            places = []
            for dc in body.get("dataCenters") or []:
                types = [t for t in dc.get("networkVolumeTypes") or [] if isinstance(t, str)]
                if not types:
                    continue            # no network volumes there
                vtype = _volume_type(types)
                cost = volume_monthly_cost(size_gb or 1, vtype)
                places.append(VolumePlace(
                    place=str(dc["id"]), offers=counts.get(dc["id"], 0),
                    price_gb_month=round(cost / (size_gb or 1), 4) if cost is not None else None,
                    extra={"name": dc.get("name") or "", "region": dc.get("region") or "", "types": types,
                           "type": vtype, "availability": levels.get(dc["id"], 0)}))
        except ANSWER_ERRORS as e:
            raise _unexpected(endpoint, e) from None
        return sorted(places, key=lambda p: (-p.offers, -p.extra["availability"], p.place))

    def create_volume(self, name: str, size_gb: int | None, place: VolumePlace) -> Volume:
        """POST /v2/network-volumes {name: gpubench-NAME, size, dataCenter, type} (STANDARD,
        unless the data centre has another tier only). The size is checked first: 10 to
        4096 GB, else InvalidRequestError and no call."""
        endpoint = "POST /v2/network-volumes"
        size = _check_size(size_gb, endpoint)
        body = {"name": provider_name(name), "size": size, "dataCenter": place.place,
                "type": _volume_type(place.extra.get("types"))}
        answer = self.client.json("POST", "/v2/network-volumes", json=body)
        try:
            return _volume(answer)
        except ANSWER_ERRORS as e:   # the volume may have been made all the same
            raise TransportError(NAME, endpoint, _unexpected(endpoint, e).message) from None

    def list_volumes(self) -> list[Volume]:
        """GET /v2/network-volumes, every volume of the account; each with the pods that
        mount it (GET /v2/pods, their mounts.network), since a volume does not say."""
        endpoint = "GET /v2/network-volumes"
        body = self.client.json("GET", "/v2/network-volumes") or {}
        users = self._volume_users()
        try:
            return [_volume(v, users.get(str(v["id"]), ())) for v in body.get("networkVolumes") or []]
        except ANSWER_ERRORS as e:
            raise _unexpected(endpoint, e) from None

    def _volume_users(self) -> dict[str, tuple[str, ...]]:
        """{volume id: ids of the pods (cluster members too) that mount it}."""
        users: dict[str, list[str]] = {}
        cursor = None
        try:
            for _ in range(MAX_PAGES):
                params = {"includeClusterPods": "true", **({"cursor": cursor} if cursor else {})}
                body = self.client.json("GET", "/v2/pods", params=params) or {}
                for pod in body.get("pods") or []:
                    for mount in (pod.get("mounts") or {}).get("network") or []:
                        if isinstance(mount, dict) and mount.get("volumeId"):
                            users.setdefault(str(mount["volumeId"]), []).append(str(pod["id"]))
                cursor = body.get("nextCursor")
                if not cursor:
                    break
        except ANSWER_ERRORS as e:
            raise _unexpected("GET /v2/pods", e) from None
        return {k: tuple(v) for k, v in users.items()}

    def delete_volume(self, volume_id: str) -> None:
        """DELETE /v2/network-volumes/{id} (204). NotFoundError for an id RunPod does not know."""
        self.client.request("DELETE", f"/v2/network-volumes/{volume_id}")

    def offer_at(self, offer: Offer, volume: Volume) -> bool:
        """A pod of `offer` can mount `volume`: a RunPod offer of Secure Cloud with GPUs
        free now in the volume's data centre (Community Cloud has no network volumes)."""
        if offer.provider != NAME or volume.provider != NAME:
            return False
        if offer.extra.get("cloud", CLOUD) != "SECURE":
            return False
        return volume.place in (offer.extra.get("data_centers") or ())

    def lookup_account_id(self) -> str | None:
        return None     # REST v2 has no call that names the account (only legacy GraphQL's `myself`)

    def billed_cost(self, instance_id: str, since: float | None = None) -> float | None:
        now = time.time()
        start = (since - 86400) if since else now - 30 * 86400
        stamp = lambda t: time.strftime("%Y-%m-%dT00:00:00Z", time.gmtime(t))   # noqa: E731
        body = self.client.json("GET", "/v2/billing/pods", params={
            "podId": instance_id, "bucketSize": "day", "startTime": stamp(start)}) or {}
        try:
            meta = body.get("metadata") or {}
            records = [r for r in body.get("records") or [] if r.get("podId") in (None, instance_id)]
            if not records and not meta.get("recordCount"):
                return None
            total = (meta.get("totals") or {}).get("totalAmount")
            if total is None:
                total = sum(float(r["totalAmount"]) for r in records)
            return round(float(total), 4)
        except ANSWER_ERRORS as e:
            raise ProviderError(NAME, "GET /v2/billing/pods", f"unexpected answer: {e}") from None

    def _instance(self, pod: dict) -> Instance:
        status = pod.get("status", "")
        direct = (pod.get("ssh") or {}).get("direct") or {}
        gpu = pod.get("gpu") or {}
        state = STATUS.get(status, InstanceState.UNKNOWN)
        ports = _runtime_ports(pod)
        return Instance(
            provider=NAME, instance_id=pod["id"], name=pod.get("name") or "", status=state,
            raw_status=status, ssh_host=direct.get("host") or None,
            ssh_port=int(direct.get("port") or 22), ssh_user=direct.get("username") or self.default_user,
            gpu_name=normalize_gpu_name(gpu.get("id", "")), gpu_count=int(gpu.get("count") or 0),
            price_per_hour=pod.get("cost") or None, created_at=pod.get("createdAt"),
            instance_type=gpu.get("id", ""), region=pod.get("dataCenterId") or "",
            private_ip=_private_ip(pod), port_map=ports, extra={"ports": dict(ports), **_membership(pod)},
        )


def _runtime_ports(pod: dict) -> dict[int, int]:
    """Container TCP port -> public port, from runtime.ports (set only while RUNNING)."""
    return {int(p["private"]): int(p["public"]) for p in (pod.get("runtime") or {}).get("ports") or []
            if isinstance(p, dict) and p.get("type", "tcp") == "tcp"
            and isinstance(p.get("private"), int) and isinstance(p.get("public"), int)}


def _membership(pod: dict) -> dict:
    """A cluster member's cluster id and rank (extra cluster_id, rank); {} for a plain pod."""
    block = pod.get("cluster")
    if not isinstance(block, dict) or not block.get("id"):
        return {}
    rank = block.get("rank")
    return {"cluster_id": str(block["id"]), "rank": rank if isinstance(rank, int) else None}


def _private_ip(pod: dict) -> str | None:
    """The pod's private address: a cluster member's overlay address (cluster.ip), else
    its global-networking address where that is enabled; None for a plain pod."""
    for block in (pod.get("cluster"), pod.get("globalNetworking")):
        if isinstance(block, dict) and block.get("enabled", True):
            ip = block.get("ip")
            if isinstance(ip, str) and ip.strip():
                return ip.strip()
    return None


def _offer(gpu: dict, count: int) -> Offer | None:
    if not gpu.get("secure", True):
        return None
    ceiling = (gpu.get("maxCount") or {}).get("secure")
    if ceiling is not None and count > ceiling:
        return None
    per_gpu = (gpu.get("price") or {}).get("secure")
    if per_gpu is None:
        return None
    availability = gpu.get("availability") or "NONE"
    levels = {d.get("id"): d.get("availability", "NONE") for d in gpu.get("dataCenters") or []}
    centers = [dc for dc, level in levels.items() if level != "NONE"]
    return Offer(
        provider=NAME, offer_id=gpu["id"], gpu_name=normalize_gpu_name(gpu.get("name") or gpu["id"]),
        gpu_count=count, price_per_hour=round(float(per_gpu) * count, 4),
        region=",".join(centers[:3]) + ("..." if len(centers) > 3 else ""),
        available=AVAILABLE.get(availability, 0), instance_type=gpu["id"],
        extra={"availability": availability, "data_centers": centers, "memory_gb": gpu.get("memory"),
               "max_count": ceiling,    # any count up to it can be asked for
               "dc_availability": {dc: levels[dc] for dc in centers}, "cloud": CLOUD})


__all__ = ["RunPod", "connect", "NotFoundError"]


def _container(spec: LaunchSpec, ports: list[str]) -> dict:
    """What a pod and every pod of a cluster are made from: name, image, disk, SSH
    (the pod-level key as well: it works even where account keys are not injected),
    the ports to expose and the data centre asked for."""
    body = {"name": provider_name(spec.name), "image": spec.image, "disk": int(spec.disk_gb),
            "startSsh": True, "ports": ports,
            "env": {"PUBLIC_KEY": spec.ssh_key.public_key} if spec.ssh_key else {}}
    if spec.region:
        body["dataCenterIds"] = [spec.region]
    return body


def _network_mount(offer: Offer, spec: LaunchSpec, endpoint: str) -> dict:
    """What a create adds to mount spec.volume at VOLUME_MOUNT: mounts.network (never
    beside mounts.persistent, which gpubench does not send) and the volume's data centre
    as the only one allowed. Refused before any call (InvalidRequestError): a volume of
    another provider, another data centre asked for, a Community Cloud offer."""
    volume = spec.volume
    if volume is None:
        return {}
    if volume.provider != NAME:
        raise InvalidRequestError(NAME, endpoint, f"volume {volume.name} is a {volume.provider} volume; "
                                  "a RunPod pod mounts RunPod network volumes only")
    if spec.region and spec.region != volume.place:
        raise InvalidRequestError(NAME, endpoint, f"network volume {volume.name} is in {volume.place}; "
                                  f"a pod in {spec.region} cannot mount it")
    if offer.extra.get("cloud", CLOUD) != "SECURE":
        raise InvalidRequestError(NAME, endpoint, f"network volume {volume.name}: Community Cloud pods "
                                  "cannot mount network volumes (Secure Cloud only)")
    return {"mounts": {"network": [{"volumeId": volume.volume_id, "path": VOLUME_MOUNT}]},
            "dataCenterIds": [volume.place]}


def _volume_type(types) -> str:
    """The tier to make: STANDARD where the data centre has it (or does not say)."""
    types = [t for t in types or [] if isinstance(t, str)]
    return VOLUME_TYPE if not types or VOLUME_TYPE in types else types[0]


def _volume(v: dict, users: tuple[str, ...] = ()) -> Volume:
    """A NetworkVolume {id, name, size, dataCenter, type} as a Volume; `users`: the ids
    of the pods that mount it."""
    size = v["size"]
    if isinstance(size, bool) or not isinstance(size, (int, float)):
        raise TypeError(f"size {size!r} is not a number of GB")
    vtype = v.get("type") or VOLUME_TYPE
    return Volume(provider=NAME, volume_id=str(v["id"]), name=str(v.get("name") or ""),
                  place=str(v["dataCenter"]), size_gb=float(size),
                  monthly_cost=volume_monthly_cost(float(size), vtype),
                  attached_to=tuple(users), in_use=bool(users), status="", extra={"type": vtype})


def _unexpected(endpoint: str, e: Exception) -> ProviderError:
    """An answer of the wrong shape to a volume call (the checked_answers of the others)."""
    what = f"no {e.args[0]!r} field" if isinstance(e, KeyError) and e.args else (str(e) or type(e).__name__)
    return ProviderError(NAME, endpoint, f"unexpected answer: {what.splitlines()[0][:160]}")
