"""Lambda Cloud API v1 (https://cloud.lambda.ai/api/v1), spec 1.10.0.

Facts that shape this adapter:
- success bodies are {"data": ...}; errors {"error": {"code", "message", "suggestion"}}:
  branch on `code` only;
- /instance-types is a map keyed by type name; capacity = regions_with_capacity_available;
- launch takes exactly one SSH key *name*, so the key is registered first;
- about 1 request/s overall and 1 launch per 12 s (client-side limiter, see http.py);
- no stop, no interruptible instances; SSH is ubuntu@ip:22.
"""

from __future__ import annotations

import hashlib
import os

import requests

from gpubench.providers.common import (CapacityError, Instance, InstanceState, InvalidRequestError,
                                       LaunchSpec, NotFoundError, Offer, ProviderError,
                                       TransportError, key_body, provider_name)
from gpubench.providers.gpus import normalize_gpu_name
from gpubench.providers.http import HttpClient, HttpSettings, checked_answers, strip_suffix

NAME = "lambda"
DEFAULT_URL = "https://cloud.lambda.ai"
API = "/api/v1"
MIN_INTERVAL = 1.0       # published: about one request per second
LAUNCH_INTERVAL = 12.0   # published: launches one per 12 s

STATUS = {
    "booting": InstanceState.PENDING,
    "active": InstanceState.RUNNING,
    "unhealthy": InstanceState.FAILED,
    "terminating": InstanceState.TERMINATING,
    "terminated": InstanceState.TERMINATED,
    "preempted": InstanceState.FAILED,
}
CAPACITY_CODES = {"instance-operations/launch/insufficient-capacity"}


def parse_error(resp: requests.Response) -> tuple[str | None, str]:
    body = resp.json()
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, ""
    message = error.get("message") or ""
    if error.get("suggestion"):
        message = f"{message} ({error['suggestion']})"
    return error.get("code"), message


def connect(api_key: str, base_url: str = DEFAULT_URL,
            settings: HttpSettings | None = None) -> "LambdaCloud":
    settings = settings or HttpSettings.from_env(MIN_INTERVAL, LAUNCH_INTERVAL)
    client = HttpClient(NAME, strip_suffix(base_url, API), {"Authorization": f"Bearer {api_key}"}, parse_error, settings)
    return LambdaCloud(client)


@checked_answers
class LambdaCloud:
    name = NAME

    def __init__(self, client: HttpClient) -> None:
        self.client = client
        # Lambda's images log in as ubuntu; GPUBENCH_LAMBDA_SSH_USER serves other images
        # and test doubles whose sshd runs as another user.
        self.default_user = os.environ.get("GPUBENCH_LAMBDA_SSH_USER") or "ubuntu"

    def _data(self, method: str, path: str, **kw):
        body = self.client.json(method, API + path, **kw)
        if not isinstance(body, dict) or "data" not in body:
            # After a launch this does not say whether a machine was rented.
            cls = TransportError if kw.get("launch") else ProviderError
            raise cls(NAME, f"{method} {API}{path}", "answer has no 'data' field")
        return body["data"]

    # -- offers -------------------------------------------------------------
    def offers(self, gpus: int | None = None, gpu_type: str | None = None,
               interruptible: bool = False) -> list[Offer]:
        if interruptible:
            return []  # Lambda has no interruptible instances
        data = self._data("GET", "/instance-types")
        offers = []
        for type_name, item in (data or {}).items():
            itype = item.get("instance_type", {})
            specs = itype.get("specs", {})
            count = int(specs.get("gpus") or 0)
            if not count or (gpus and count != gpus):
                continue
            gpu = normalize_gpu_name(itype.get("gpu_description") or type_name)
            price = (itype.get("price_cents_per_hour") or 0) / 100.0
            regions = [r.get("name", "") for r in item.get("regions_with_capacity_available") or []]
            common = dict(provider=NAME, gpu_name=gpu, gpu_count=count, price_per_hour=price,
                          disk_gb=specs.get("storage_gib"), instance_type=itype.get("name", type_name))
            if not regions:
                offers.append(Offer(offer_id=f"{type_name}@", region="", available=0, **common))
            for region in regions:
                offers.append(Offer(offer_id=f"{type_name}@{region}", region=region, available=1,
                                    **common))
        return offers

    # -- keys ---------------------------------------------------------------
    def ensure_ssh_key(self, public_key: str, name: str) -> str:
        """The name of a registered key with this public key, registering it if needed."""
        wanted = key_body(public_key)
        keys = self._data("GET", "/ssh-keys") or []
        for key in keys:
            if key_body(key.get("public_key", "")) == wanted:
                return key["name"]
        taken = {k.get("name") for k in keys}
        key_name = name
        if key_name in taken:  # same name, other key: make it unique and stable
            key_name = f"{name}-{hashlib.sha1(wanted.encode()).hexdigest()[:8]}"
        self._data("POST", "/ssh-keys", json={"name": key_name, "public_key": public_key.strip()})
        return key_name

    # -- instances ----------------------------------------------------------
    def launch(self, offer: Offer, spec: LaunchSpec) -> Instance:
        type_name, _, region = offer.offer_id.partition("@")
        region = spec.region or region
        if not spec.ssh_key_name:   # refused here, before anything is sent
            raise InvalidRequestError(NAME, f"POST {API}/instance-operations/launch",
                                      "needs an SSH key name (call ensure_ssh_key first)")
        body = {"region_name": region, "instance_type_name": type_name,
                "ssh_key_names": [spec.ssh_key_name], "name": provider_name(spec.name)[:64]}
        try:
            data = self._data("POST", "/instance-operations/launch", json=body, launch=True)
        except ProviderError as e:
            if e.code in CAPACITY_CODES:
                raise CapacityError(NAME, e.endpoint, e.message, status=e.status, code=e.code) from None
            raise
        ids = data.get("instance_ids") or []
        if not ids:   # a success without an id: the machine may exist all the same
            raise TransportError(NAME, f"POST {API}/instance-operations/launch", "answer has no instance id")
        return Instance(provider=NAME, instance_id=ids[0], name=body["name"],
                        status=InstanceState.PENDING, ssh_user=self.default_user,
                        gpu_name=offer.gpu_name, gpu_count=offer.gpu_count,
                        price_per_hour=offer.price_per_hour, instance_type=type_name, region=region,
                        raw_status="booting")

    def get(self, instance_id: str) -> Instance:
        return self._instance(self._data("GET", f"/instances/{instance_id}"))

    def list(self) -> list[Instance]:
        return [self._instance(i) for i in self._data("GET", "/instances") or []]

    def terminate(self, instance_id: str) -> None:
        self._data("POST", "/instance-operations/terminate", json={"instance_ids": [instance_id]})

    def _instance(self, raw: dict) -> Instance:
        itype = raw.get("instance_type") or {}
        specs = itype.get("specs") or {}
        status = raw.get("status", "")
        return Instance(
            provider=NAME, instance_id=raw["id"], name=raw.get("name") or "",
            status=STATUS.get(status, InstanceState.UNKNOWN), raw_status=status,
            ssh_host=raw.get("ip") or None,
            # Lambda always serves SSH on 22; a test double may publish another port.
            ssh_port=int(raw.get("ssh_port") or 22), ssh_user=raw.get("ssh_user") or self.default_user,
            gpu_name=normalize_gpu_name(itype.get("gpu_description") or itype.get("name", "")),
            gpu_count=int(specs.get("gpus") or 0),
            price_per_hour=(itype["price_cents_per_hour"] / 100.0
                            if itype.get("price_cents_per_hour") is not None else None),
            instance_type=itype.get("name", ""), region=(raw.get("region") or {}).get("name", ""),
            created_at=raw.get("created_at"),
        )


__all__ = ["LambdaCloud", "connect", "NotFoundError"]
