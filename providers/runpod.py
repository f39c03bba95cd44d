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
"""

from __future__ import annotations

import time

import requests

from gpubench.providers.common import (Account, CapacityError, ClusterCreated, Instance, InstanceState,
                                       InvalidRequestError, LaunchSpec, NotFoundError, Offer,
                                       ProviderError, SshKeyRef, TransportError, key_body, provider_name)
from gpubench.providers.gpus import normalize_gpu_name
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
                "cloud": CLOUD}
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
                "compute": {"gpuTypeId": offer.offer_id, "gpuCountPerPod": spec.gpus, "podCount": nodes}}
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
    centers = [d.get("id") for d in gpu.get("dataCenters") or []
               if d.get("availability", "NONE") != "NONE"]
    return Offer(
        provider=NAME, offer_id=gpu["id"], gpu_name=normalize_gpu_name(gpu.get("name") or gpu["id"]),
        gpu_count=count, price_per_hour=round(float(per_gpu) * count, 4),
        region=",".join(centers[:3]) + ("..." if len(centers) > 3 else ""),
        available=AVAILABLE.get(availability, 0), instance_type=gpu["id"],
        extra={"availability": availability, "data_centers": centers, "memory_gb": gpu.get("memory"),
               "max_count": ceiling})   # any count up to it can be asked for


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
