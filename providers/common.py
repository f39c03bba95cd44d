"""The common vocabulary every provider adapter speaks: offers, launch specs,
instances, one state enum, and typed errors that carry the provider's own words."""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from gpubench.errors import GpubenchError


class InstanceState(str, enum.Enum):
    PENDING = "pending"        # asked for, not yet booted
    RUNNING = "running"        # booted; SSH may still be coming up
    STOPPED = "stopped"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    FAILED = "failed"          # will never run (RunPod ERROR, Lambda unhealthy, preempted)
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Offer:
    provider: str
    offer_id: str              # what the provider's launch call needs to pick this offer
    gpu_name: str              # normalised, e.g. "H100 PCIe", "A100 80GB", "RTX 4090"
    gpu_count: int
    price_per_hour: float      # whole machine, USD
    region: str = ""
    disk_gb: float | None = None
    interruptible: bool = False
    available: int | None = None  # how many can be had now, where the provider says
    instance_type: str = ""    # the provider's own name for the machine type
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def price_per_gpu_hour(self) -> float:
        return self.price_per_hour / max(self.gpu_count, 1)


@dataclass(frozen=True)
class SshKeyRef:
    """An SSH public key as the provider's account holds it: what ensure_ssh_key returns
    and what a launch needs to put the key on the machine. Lambda launches name the key
    (`name`); Vast.ai puts every account key on a new instance and knows it by `key_id`;
    RunPod knows keys only by their text."""

    public_key: str            # the full line, "ssh-ed25519 AAAA... comment"
    name: str = ""             # the provider's name for the key, where it names keys
    key_id: str = ""           # the provider's id for the key, where it has one


@dataclass(frozen=True)
class LaunchSpec:
    gpus: int
    disk_gb: int = 100
    image: str = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-devel"
    region: str | None = None
    name: str = ""
    interruptible: bool = False
    ssh_key: SshKeyRef | None = None   # from ensure_ssh_key; every launch needs one to log in
    ports: tuple[int, ...] = ()        # TCP ports to expose besides SSH's (where the provider maps ports)
    volume: "Volume | None" = None     # mounted at VOLUME_MOUNT (the offer must be where it is: offer_at)


def key_fingerprint(api_key: str) -> str:
    """A short, non-secret name for an API key: the first 12 hex digits of its sha256.
    Enough to tell two keys apart in the ledger and on screen; the key cannot be
    recovered from it."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Account:
    """Whose machines a connected adapter sees: the provider, the API's endpoint, a
    fingerprint of the API key (never the key) and, where the API tells it, the
    provider's own id of the account. A provider's list speaks only for its account,
    so a ledger row is checked against the list of the account it was launched under."""

    provider: str
    endpoint: str                  # the base URL, without the API path or a trailing "/"
    key_fingerprint: str
    account_id: str | None = None

    def same_as(self, other: "Account") -> bool:
        """One account: the same provider and endpoint, and the same key, or a rotated
        key whose account id the provider gave both times."""
        if (self.provider, self.endpoint) != (other.provider, other.endpoint):
            return False
        if self.key_fingerprint == other.key_fingerprint:
            return True
        return self.account_id is not None and self.account_id == other.account_id


@dataclass
class Instance:
    provider: str
    instance_id: str
    name: str
    status: InstanceState
    ssh_host: str | None = None
    ssh_port: int = 22
    ssh_user: str = "root"
    gpu_name: str = ""
    gpu_count: int = 0
    price_per_hour: float | None = None
    created_at: str | None = None
    instance_type: str = ""
    region: str = ""
    raw_status: str = ""       # the provider's own status word
    tags: dict[str, str] = field(default_factory=dict)   # the provider's tags, where it has them
    private_ip: str | None = None  # its address on the provider's private network, where it has one
    port_map: dict[int, int] = field(default_factory=dict)  # container port -> public port (Vast.ai, RunPod)
    extra: dict = field(default_factory=dict)

    @property
    def launched_by_gpubench(self) -> bool:
        """Named gpubench-* or tagged as gpubench tags what it launches: how an instance
        the ledger lacks is known as gpubench's (an orphan), even one renamed since."""
        return self.name.startswith(NAME_PREFIX) or TAG_KEY in self.tags

    @property
    def gpubench_name(self) -> str:
        """The name gpubench gave it: from its gpubench-* name, else from its tag."""
        if self.name.startswith(NAME_PREFIX):
            return self.name[len(NAME_PREFIX):]
        return self.tags.get(TAG_KEY) or self.name


class ProviderError(GpubenchError):
    """A provider refused or failed a call. Carries enough to say what happened in one line.

    Class attributes say what the error means for the lifecycle, so that no caller
    keeps its own list of error classes:

    - `nothing_created`: a launch that ended in this error certainly created nothing
      (the provider said no), so its ledger row can go. None (a plain ProviderError):
      the answer's status decides, see `launch_refused`.
    - `final`: no later call will do better (the account cannot act), so waits and
      retries stop and the error goes up.
    - `offer_unavailable`: this offer cannot be had now, but the next one may.
    """

    kind = "provider error"
    nothing_created: bool | None = None
    final: bool = False
    offer_unavailable: bool = False

    def __init__(self, provider: str, endpoint: str, message: str, status: int | None = None,
                 code: str | None = None) -> None:
        self.provider = provider
        self.endpoint = endpoint
        self.message = message
        self.status = status
        self.code = code
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.provider} {self.endpoint}"
        status = f" (HTTP {self.status})" if self.status else ""
        return f"{where}: {self.kind}{status}: {self.message}"

    @property
    def launch_refused(self) -> bool:
        """A launch that raised this created nothing: the class says so, or, for an
        error whose class does not say, the provider answered with a 4xx."""
        if self.nothing_created is not None:
            return self.nothing_created
        return self.status is not None and 400 <= self.status < 500


class AuthError(ProviderError):
    kind = "authentication failed"
    nothing_created = True
    final = True


class CapacityError(ProviderError):
    kind = "no capacity"
    nothing_created = True
    offer_unavailable = True


class RateLimitError(ProviderError):
    kind = "rate limited"
    nothing_created = True


class NotFoundError(ProviderError):
    """The thing named is not there: at launch the offer, afterwards the instance."""

    kind = "not found"
    nothing_created = True
    offer_unavailable = True


class PaymentError(ProviderError):
    kind = "payment required"
    nothing_created = True
    final = True


class MissingKeyError(ProviderError):
    """No API key to call with: refused before anything was sent."""

    kind = "no API key"
    nothing_created = True
    final = True


class InvalidRequestError(ProviderError):
    """The provider rejected the request itself: retrying it unchanged fails again."""

    kind = "request rejected"
    nothing_created = True


class TransportError(ProviderError):
    """No usable answer (connection refused, timeout, garbage). Whether the call took
    effect is unknown, so a launch that ends here must be reconciled by name."""

    kind = "no answer"
    nothing_created = False


#: Every instance gpubench creates carries this prefix in its provider-side name, so
#: state can be rebuilt from the provider's own list.
NAME_PREFIX = "gpubench-"


#: Where a provider takes tags (Lambda), every launch carries {TAG_KEY: the user's name},
#: so that a sweeper finds an account's gpubench machines by tag as well as by name.
TAG_KEY = "gpubench"


def provider_name(name: str) -> str:
    return name if name.startswith(NAME_PREFIX) else NAME_PREFIX + name


def launch_tags(spec: "LaunchSpec") -> dict[str, str]:
    """The tags a launch of `spec` carries."""
    name = spec.name[len(NAME_PREFIX):] if spec.name.startswith(NAME_PREFIX) else spec.name
    return {TAG_KEY: name or "unnamed"}


@runtime_checkable
class Provider(Protocol):
    """What each adapter implements. Clients and credentials are passed in, never global.

    Every method may raise, besides what it names below:
      AuthError        the API key is wrong, expired or not allowed (401/403, and
                       Vast.ai's 404 "Invalid user key");
      PaymentError     the account cannot pay (402);
      RateLimitError   still rate limited after the client's retries (429);
      InvalidRequestError  the provider rejected the request itself (another 4xx);
      ProviderError    itself: a server error (5xx) after the retries, or an answer
                       that is not JSON or not of the documented shape ("unexpected
                       answer"); launch raises TransportError for these instead;
      TransportError   no answer: connection refused or lost, timeout.
    All are ProviderError subclasses carrying provider, endpoint and the provider's own
    message; MissingKeyError comes earlier, from registry.get. The cases in
    tests/providers/test_contract.py hold every registered adapter to this.
    """

    name: str
    #: Whose machines this adapter sees; set by registry.get (None for an adapter built
    #: by hand, whose account is unknown).
    account: Account | None

    def offers(self, gpus: int | None = None, gpu_type: str | None = None,
               interruptible: bool = False) -> list[Offer]:
        """What can be rented now, one Offer per (machine type, place) with
        `offer_id` being what launch needs. `gpus` keeps only machines with that many
        GPUs; `gpu_type` is a hint an adapter may use to narrow its query (callers filter
        with gpus.gpu_matches again); `interruptible` asks for spot/bid offers instead of
        on-demand ones ([] where the provider has none). Sold-out types may be listed
        with available=0. Raises only the common errors above."""
        ...

    def ensure_ssh_key(self, public_key: str, name: str) -> SshKeyRef:
        """Make sure the account holds `public_key` and return how launch refers to it.
        Idempotent: a key already there (compared by type and body, not comment) is
        reused, never added twice. `name` is the wanted name where the provider names
        keys; a name taken by another key gets a stable suffix."""
        ...

    def launch(self, offer: Offer, spec: LaunchSpec) -> Instance:
        """Rent one machine from `offer` as `spec` says, named NAME_PREFIX + spec.name.
        Returns at once with the new instance (usually PENDING, no SSH address yet).
        Raises CapacityError when the offer cannot be had now (the caller tries the
        next offer; nothing was rented), InvalidRequestError when the request itself
        is refused (nothing was rented), and TransportError when the answer does not
        say whether a machine was rented (a 5xx, a lost or garbled answer): the caller
        must then find it by name in list()."""
        ...

    def get(self, instance_id: str) -> Instance:
        """The instance as the provider reports it now; its SSH host and port are set
        once it is RUNNING and reachable. Raises NotFoundError for an id the provider
        does not know (never launched, or terminated and forgotten)."""
        ...

    def list(self) -> list[Instance]:
        """Every instance of the account (not only gpubench's), all pages followed.
        A terminated instance may still be listed as TERMINATED for a while."""
        ...

    def terminate(self, instance_id: str) -> None:
        """Ask for the instance to be destroyed. Returns when the provider accepted the
        request, not when the machine is gone: confirm with get() (TERMINATED or
        NotFoundError). Raises NotFoundError for an id the provider does not know."""
        ...

    def lookup_account_id(self) -> str | None:
        """The provider's own id of the account the API key belongs to, where its API
        has a documented call for it (one call, remembered); None where it has none.
        Raises only the common errors above."""
        ...

    def billed_cost(self, instance_id: str, since: float | None = None) -> float | None:
        """What the provider says it billed for the instance so far, in USD, where its
        API reports it per instance (RunPod GET /v2/billing/pods?podId=, Vast.ai GET
        /api/v0/charges/); None where it does not (Lambda's Cloud API has no billing
        call) or has no record of the instance yet. `since` (unix seconds) is when the
        instance was asked for: the search window starts a day before it (the last 30
        days without it). Bills lag: read after teardown, the amount may still grow.
        Raises only the common errors above."""
        ...


@dataclass
class ClusterCreated:
    """What a provider's cluster create answered: its id for the cluster and the member
    instances it has placed so far, head (rank 0) first (possibly none yet: poll
    cluster_instances)."""

    cluster_id: str
    instances: list[Instance] = field(default_factory=list)


@runtime_checkable
class NativeClusters(Protocol):
    """Optional, beside Provider: a provider that rents several machines as one cluster
    on a private network of its own (RunPod Instant Clusters, POST /v2/clusters). All or
    nothing is the provider's: one create places every member in one data centre or
    none. A member cannot be replaced or taken down alone: the cluster goes as a whole.
    Providers without it (Lambda, Vast.ai) rent a cluster one machine at a time."""

    def create_cluster(self, offer: Offer, spec: LaunchSpec, nodes: int) -> ClusterCreated:
        """Rent `nodes` machines of `offer` as one cluster named NAME_PREFIX + spec.name,
        each as `spec` says. Raises CapacityError when the provider cannot place them
        all in one data centre (nothing was rented), InvalidRequestError when the request
        is refused, TransportError when the answer does not say whether it was created."""
        ...

    def cluster_instances(self, cluster_id: str) -> list[Instance]:
        """The cluster's members as the provider reports them now, head (rank 0) first,
        each with its private address. NotFoundError for a cluster it does not know."""
        ...

    def delete_cluster(self, cluster_id: str) -> None:
        """Ask for the cluster and every member to be destroyed; confirm each member gone
        with get(). NotFoundError for a cluster it does not know."""
        ...


def native_clusters(provider: object) -> NativeClusters | None:
    """The provider as a NativeClusters where it has them, else None."""
    return provider if isinstance(provider, NativeClusters) else None


# --------------------------------------------------------------------------- volumes
# Where a volume is mounted on every provider's machine (Lambda's mount points must lie
# under /home, /lambda/nfs or /data); runs find it as $GPUBENCH_DATA.
VOLUME_MOUNT = "/data/gpubench"


@dataclass(frozen=True)
class Volume:
    """Storage that outlives a machine: a Lambda filesystem (bound to a region), a RunPod
    network volume (a Secure Cloud data centre), a Vast.ai local volume (one machine)."""

    provider: str
    volume_id: str
    name: str                        # the provider's name for it (NAME_PREFIX + the user's, when gpubench made it)
    place: str                       # Lambda's region name, RunPod's data centre id, Vast.ai's machine_id
    size_gb: float | None = None     # None: unbounded (Lambda bills what is used)
    used_bytes: int | None = None    # where the provider says (Lambda's bytes_used)
    monthly_cost: float | None = None  # $ a month, from the provider's answer or its published price
    attached_to: tuple[str, ...] = ()  # ids of the instances using it, where the provider says
    in_use: bool | None = None       # the provider's own word (Lambda's is_in_use), None: not said
    status: str = ""                 # the provider's own status word, where it has one
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def launched_by_gpubench(self) -> bool:
        return self.name.startswith(NAME_PREFIX)


@dataclass(frozen=True)
class VolumePlace:
    """Where a volume can be made: a region or data centre (Vast.ai: a volume offer on one
    machine), how many offers of the GPU type asked are there now, and its price."""

    place: str
    offers: int = 0                  # offers of the GPU type asked there now (0: none, or not asked)
    offer_id: str = ""               # Vast.ai: the volume offer to create from
    price_gb_month: float | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)


@runtime_checkable
class Volumes(Protocol):
    """Optional, beside Provider: storage that outlives a machine, made, listed and
    deleted through the provider's API, and attached to a machine at its launch
    (LaunchSpec.volume). Errors are the Provider's typed ones; a name the provider
    refuses or a size out of its range is an InvalidRequestError, deleting one in use
    too, with the provider's own words."""

    def volume_places(self, gpu_type: str | None = None, size_gb: int | None = None) -> list[VolumePlace]:
        """Where a volume can be made now, most offers of `gpu_type` first."""
        ...

    def create_volume(self, name: str, size_gb: int | None, place: VolumePlace) -> Volume:
        """Make the volume called NAME_PREFIX + name at `place`."""
        ...

    def list_volumes(self) -> list[Volume]:
        """Every volume of the account, gpubench's or not."""
        ...

    def delete_volume(self, volume_id: str) -> None:
        """NotFoundError for one it does not know; confirm it gone with list_volumes()."""
        ...

    def offer_at(self, offer: Offer, volume: Volume) -> bool:
        """Whether a machine of `offer` can mount `volume` (same region, data centre,
        machine)."""
        ...


def volumes_of(provider: object) -> Volumes | None:
    """The provider as Volumes where it has them, else None."""
    return provider if isinstance(provider, Volumes) else None


def key_body(public_key: str) -> str:
    """'ssh-ed25519 AAAA... comment' -> 'ssh-ed25519 AAAA...': the part that identifies a
    key; providers may keep a different comment (or none) for the same key."""
    return " ".join(public_key.split()[:2])
