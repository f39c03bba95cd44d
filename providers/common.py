"""The common vocabulary every provider adapter speaks: offers, launch specs,
instances, one state enum, and typed errors that carry the provider's own words."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

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
class LaunchSpec:
    gpus: int
    gpu_type: str | None = None
    disk_gb: int = 100
    image: str = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-devel"
    region: str | None = None
    name: str = ""
    max_price: float | None = None
    interruptible: bool = False
    ssh_public_key: str = ""
    ssh_key_name: str = ""     # what ensure_ssh_key returned (Lambda launches by key name)


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
    extra: dict = field(default_factory=dict)


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


def provider_name(name: str) -> str:
    return name if name.startswith(NAME_PREFIX) else NAME_PREFIX + name


class Provider(Protocol):
    """What each adapter implements. Clients and credentials are passed in, never global."""

    name: str

    def offers(self, gpus: int | None = None, gpu_type: str | None = None,
               interruptible: bool = False) -> list[Offer]: ...

    def ensure_ssh_key(self, public_key: str, name: str) -> str: ...

    def launch(self, offer: Offer, spec: LaunchSpec) -> Instance: ...

    def get(self, instance_id: str) -> Instance: ...

    def list(self) -> list[Instance]: ...

    def terminate(self, instance_id: str) -> None: ...


def key_body(public_key: str) -> str:
    """'ssh-ed25519 AAAA... comment' -> 'ssh-ed25519 AAAA...': the part that identifies a
    key; providers may keep a different comment (or none) for the same key."""
    return " ".join(public_key.split()[:2])
