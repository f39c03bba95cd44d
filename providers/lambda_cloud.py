"""Lambda Cloud API v1 (https://cloud.lambda.ai/api/v1), spec 1.10.0.

Facts that shape this adapter:
- success bodies are {"data": ...}; errors {"error": {"code", "message", "suggestion"}}:
  branch on `code` only;
- /instance-types is a map keyed by type name; capacity = regions_with_capacity_available;
- launch takes exactly one SSH key *name*, so the key is registered first;
- about 1 request/s overall and 1 launch per 12 s (client-side limiter, see http.py);
- no stop, no interruptible instances; SSH is ubuntu@ip:22 (the API has no port or user field);
- launches carry tags ([{key, value}]): gpubench tags what it launches (common.TAG_KEY);
- older API versions (1.5.3) wrote prices as strings ("80") and had no specs.gpus: the type
  name's gpu_<N>x_ prefix gives the count; an entry that cannot be read is left out, never
  the whole catalog;
- the Cloud API has no billing call: billed_cost is None;
- filesystems (Volumes): listed at GET /file-systems (with a hyphen), made at POST
  /filesystems {name, region}, deleted at DELETE /filesystems/{id}; no size (Lambda bills the
  bytes used), bound to a region, mounted at launch only (file_system_mounts), never deleted
  while mounted (400 filesystems/filesystem-in-use); the API gives no price (PRICE_GB_MONTH).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections import Counter

import requests

from gpubench.providers.common import (VOLUME_MOUNT, Account, CapacityError, Instance, InstanceState,
                                       InvalidRequestError, LaunchSpec, NotFoundError, Offer, ProviderError,
                                       NAME_PREFIX, SshKeyRef, TransportError, Volume, VolumePlace, key_body,
                                       launch_tags, provider_name)
from gpubench.providers.gpus import gpu_matches, normalize_gpu_name
from gpubench.providers.http import ANSWER_ERRORS, HttpClient, HttpSettings, checked_answers, strip_suffix

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
_TYPE_COUNT = re.compile(r"^gpu_(\d+)x_")
# A filesystem's name (FilesystemCreateRequest in spec 1.10.0): 1-60 characters.
FILESYSTEM_NAME = re.compile(r"^[a-zA-Z]+[0-9a-zA-Z-]*$")
FILESYSTEM_NAME_MAX = 60
# $ per GB used a month: Lambda's pricing page (lambda.ai/pricing, "Filesystems"); the API
# gives no price. Billed on bytes_used, which Lambda updates every few hours.
PRICE_GB_MONTH = 0.20


def _reads(endpoint: str):
    """A volume call whose answer has the wrong shape (a missing field, a list where an
    object belongs) is a ProviderError naming `endpoint`, as http.checked_answers makes it
    for the Provider operations."""
    def wrap(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except ANSWER_ERRORS as e:
                text = f"no {e.args[0]!r} field" if isinstance(e, KeyError) and e.args else str(e)
                raise ProviderError(NAME, endpoint, f"unexpected answer: {text[:160]}") from None
        return wrapper
    return wrap


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
    account: Account | None = None   # set by registry.get

    def __init__(self, client: HttpClient) -> None:
        self.client = client
        # Lambda's images log in as ubuntu; GPUBENCH_LAMBDA_SSH_USER serves other images
        # and the mock cloud, whose sshd logs in the user running it.
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
        if not isinstance(data, dict):
            raise ProviderError(NAME, f"GET {API}/instance-types", "'data' is not a map of instance types")
        offers: list[Offer] = []
        read, unreadable = 0, None
        for type_name, item in data.items():
            try:
                offers += _type_offers(type_name, item, gpus)
            except ANSWER_ERRORS as e:
                unreadable = e   # one entry we cannot read: the others still stand
                continue
            read += 1
        if unreadable is not None and not read:
            raise unreadable    # nothing in it could be read: the answer itself is wrong
        return offers

    # -- keys ---------------------------------------------------------------
    def ensure_ssh_key(self, public_key: str, name: str) -> SshKeyRef:
        """A registered key with this public key (launches name it), registering it if needed."""
        wanted = key_body(public_key)
        keys = self._data("GET", "/ssh-keys") or []
        for key in keys:
            if key_body(key.get("public_key", "")) == wanted:
                return SshKeyRef(public_key.strip(), name=key["name"], key_id=str(key.get("id") or ""))
        taken = {k.get("name") for k in keys}
        key_name = name
        if key_name in taken:  # same name, other key: make it unique and stable
            key_name = f"{name}-{hashlib.sha1(wanted.encode()).hexdigest()[:8]}"
        added = self._data("POST", "/ssh-keys", json={"name": key_name, "public_key": public_key.strip()})
        key_id = str(added.get("id") or "") if isinstance(added, dict) else ""
        return SshKeyRef(public_key.strip(), name=key_name, key_id=key_id)

    # -- instances ----------------------------------------------------------
    def launch(self, offer: Offer, spec: LaunchSpec) -> Instance:
        type_name, _, region = offer.offer_id.partition("@")
        region = spec.region or region
        if spec.ssh_key is None or not spec.ssh_key.name:   # refused here, before anything is sent
            raise InvalidRequestError(NAME, f"POST {API}/instance-operations/launch",
                                      "needs an SSH key name (call ensure_ssh_key first)")
        body = {"region_name": region, "instance_type_name": type_name,
                "ssh_key_names": [spec.ssh_key.name], "name": provider_name(spec.name)[:64],
                "tags": [{"key": k, "value": v[:128]} for k, v in launch_tags(spec).items()]}
        if spec.volume is not None:      # mounted at launch only; Lambda refuses one of another region
            if spec.volume.provider != NAME:
                raise InvalidRequestError(NAME, f"POST {API}/instance-operations/launch",
                                          f"volume {spec.volume.name} is {spec.volume.provider}'s, "
                                          "not a Lambda filesystem")
            body["file_system_mounts"] = [{"mount_point": VOLUME_MOUNT,
                                           "file_system_id": spec.volume.volume_id}]
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
                        raw_status="booting", tags=launch_tags(spec))

    def get(self, instance_id: str) -> Instance:
        return self._instance(self._data("GET", f"/instances/{instance_id}"))

    def list(self) -> list[Instance]:
        return [self._instance(i) for i in self._data("GET", "/instances") or []]

    def terminate(self, instance_id: str) -> None:
        self._data("POST", "/instance-operations/terminate", json={"instance_ids": [instance_id]})

    def lookup_account_id(self) -> str | None:
        return None     # Cloud API v1 has no call that names the account

    def billed_cost(self, instance_id: str, since: float | None = None) -> float | None:
        return None     # Cloud API v1 has no billing or usage call

    def _instance(self, raw: dict) -> Instance:
        itype = raw.get("instance_type") or {}
        status = raw.get("status", "")
        return Instance(
            provider=NAME, instance_id=raw["id"], name=raw.get("name") or "",
            status=STATUS.get(status, InstanceState.UNKNOWN), raw_status=status,
            ssh_host=raw.get("ip") or None, ssh_port=_ssh_port(raw), ssh_user=self.default_user,
            gpu_name=normalize_gpu_name(itype.get("gpu_description") or itype.get("name", "")),
            gpu_count=_gpu_count(itype, itype.get("name", "")),
            price_per_hour=(float(itype["price_cents_per_hour"]) / 100.0
                            if itype.get("price_cents_per_hour") is not None else None),
            instance_type=itype.get("name", ""), region=(raw.get("region") or {}).get("name", ""),
            tags=_tags(raw.get("tags")), private_ip=_text(raw.get("private_ip")),
            extra=_instance_extra(raw),
        )

    # -- filesystems (the Volumes protocol) ---------------------------------------
    def volume_places(self, gpu_type: str | None = None, size_gb: int | None = None) -> list[VolumePlace]:
        """The regions some instance type has capacity in now (regions_with_capacity_available,
        read as offers() reads it), each with how many offers of `gpu_type` it has: most
        first, regions without one after (then by all their offers, then by name). Without
        `gpu_type` every count is 0 and the order is by all offers. `size_gb` is not
        Lambda's: a filesystem has no size."""
        offers = [o for o in self.offers() if o.region and o.available != 0]
        everything = Counter(o.region for o in offers)
        wanted = Counter(o.region for o in offers if gpu_type
                         and gpu_matches(gpu_type, o.gpu_name, o.extra.get("vram_gb")))
        order = sorted(everything, key=lambda r: (-wanted[r], -everything[r], r))
        return [VolumePlace(place=r, offers=wanted[r], price_gb_month=PRICE_GB_MONTH,
                            extra={"offers_all_types": everything[r]}) for r in order]

    @_reads(f"POST {API}/filesystems")
    def create_volume(self, name: str, size_gb: int | None, place: VolumePlace) -> Volume:
        """Make the filesystem NAME_PREFIX + name in region `place.place` (POST /filesystems).
        `size_gb` is ignored: a Lambda filesystem has no size and bills the bytes used.
        A name Lambda's rule refuses is refused here, before any call; Lambda's own refusals
        come back typed: 400 global/duplicate, global/quota-exceeded, global/invalid-parameters
        as InvalidRequestError, 403 global/account-inactive as AuthError."""
        full = provider_name(name)
        if full == NAME_PREFIX or len(full) > FILESYSTEM_NAME_MAX or not FILESYSTEM_NAME.match(full):
            raise InvalidRequestError(NAME, f"POST {API}/filesystems",
                                      f"filesystem name {full!r} refused: Lambda takes 1-{FILESYSTEM_NAME_MAX} "
                                      "characters matching ^[a-zA-Z]+[0-9a-zA-Z-]*$ (after "
                                      f"{NAME_PREFIX!r}: letters, digits and '-', at most "
                                      f"{FILESYSTEM_NAME_MAX - len(NAME_PREFIX)})")
        data = self._data("POST", "/filesystems", json={"name": full, "region": place.place})
        return _volume(data)

    @_reads(f"GET {API}/file-systems")
    def list_volumes(self) -> list[Volume]:
        """Every filesystem of the account (GET /file-systems), gpubench's or not."""
        return [_volume(raw) for raw in self._data("GET", "/file-systems") or []]

    @_reads(f"DELETE {API}/filesystems/{{id}}")
    def delete_volume(self, volume_id: str) -> None:
        """DELETE /filesystems/{id}. A mounted one is refused by Lambda (400
        filesystems/filesystem-in-use: an InvalidRequestError in Lambda's words); an id
        Lambda does not know is a NotFoundError."""
        self._data("DELETE", f"/filesystems/{volume_id}")

    def offer_at(self, offer: Offer, volume: Volume) -> bool:
        """A Lambda filesystem mounts on machines of its own region only."""
        return volume.provider == NAME and bool(offer.region) and offer.region == volume.place


def _type_offers(type_name: str, item: dict, gpus: int | None) -> list[Offer]:
    """The offers of one /instance-types entry: one per region with capacity, or one
    with available=0 where none has."""
    itype = item.get("instance_type") or {}
    specs = itype.get("specs") or {}
    count = _gpu_count(itype, type_name)
    if not count or (gpus and count != gpus):
        return []
    gpu = normalize_gpu_name(itype.get("gpu_description") or type_name)
    price = float(itype.get("price_cents_per_hour") or 0) / 100.0     # "80" in API 1.5.3
    regions = [r["name"] for r in item.get("regions_with_capacity_available") or []]
    common = dict(provider=NAME, gpu_name=gpu, gpu_count=count, price_per_hour=price,
                  disk_gb=specs.get("storage_gib"), instance_type=itype.get("name", type_name),
                  extra={"vram_gb": _vram_gb(itype)})
    if not regions:
        return [Offer(offer_id=f"{type_name}@", region="", available=0, **common)]
    return [Offer(offer_id=f"{type_name}@{region}", region=region, available=1, **common)
            for region in regions]


def _volume(raw: dict) -> Volume:
    """A Filesystem (spec 1.10.0) as a Volume: no size; used and cost from bytes_used."""
    used = raw.get("bytes_used")
    used = int(used) if used is not None else None
    in_use = raw.get("is_in_use")
    return Volume(provider=NAME, volume_id=str(raw["id"]), name=str(raw["name"]),
                  place=(raw.get("region") or {}).get("name", ""), size_gb=None, used_bytes=used,
                  monthly_cost=round(PRICE_GB_MONTH * used / 1e9, 4) if used is not None else None,
                  in_use=bool(in_use) if in_use is not None else None,
                  extra={"mount_point": raw.get("mount_point"), "created": raw.get("created")})


def _instance_extra(raw: dict) -> dict:
    """An instance's extra: its private address and hostname, and the filesystems it
    mounts where it mounts any (file_system_names; file_system_mounts with their paths)."""
    extra = {"private_ip": raw.get("private_ip"), "hostname": raw.get("hostname")}
    if raw.get("file_system_names"):
        extra["file_system_names"] = [str(n) for n in raw["file_system_names"]]
    if raw.get("file_system_mounts"):
        extra["file_system_mounts"] = [{"mount_point": m.get("mount_point"),
                                        "file_system_id": m.get("file_system_id")}
                                       for m in raw["file_system_mounts"] if isinstance(m, dict)]
    return extra


def _vram_gb(itype: dict) -> int | None:
    """Memory per GPU from the description, "H100 (80 GB SXM5)" or "1x GH200 (96 GB)"."""
    for text in (itype.get("gpu_description"), itype.get("description")):
        found = re.search(r"\((\d+)\s*GB", str(text or ""), re.I)
        if found:
            return int(found.group(1))
    return None


def _tags(raw) -> dict[str, str]:
    """[{key, value}] -> {key: value}; anything else -> {}."""
    if not isinstance(raw, list):
        return {}
    return {t["key"]: str(t.get("value", "")) for t in raw if isinstance(t, dict) and isinstance(t.get("key"), str)}


def _text(value) -> str | None:
    """A non-empty string field, else None (absent, null, or not a string)."""
    return (value.strip() or None) if isinstance(value, str) else None


def _gpu_count(itype: dict, type_name: str) -> int:
    """specs.gpus; answers that leave specs out (older API versions, trimmed listings)
    still name the type "gpu_<N>x_<model>"."""
    count = (itype.get("specs") or {}).get("gpus")
    if count is None:
        m = _TYPE_COUNT.match(type_name or "")
        return int(m.group(1)) if m else 0
    return int(count)


def _ssh_port(raw: dict) -> int:
    """Lambda serves SSH on port 22 and its API has no port field. The one exception
    to reading only what Lambda sends: the mock cloud's sshd cannot listen on port 22
    of a loopback address without root, so its active instances say where it listens
    in `ssh_port` (see gpubench/mock/lambda_api.py). Absent from every real answer,
    it leaves port 22."""
    return int(raw.get("ssh_port") or 22)


__all__ = ["LambdaCloud", "connect", "NotFoundError"]
