"""Fault injection: parse a SPEC, answer "which faults hold for this provider now".

SPEC is a comma-separated list of items ``[PROVIDER:]FAULT[=VALUE][@N]``; see the package
docstring for the list of faults. An item with ``@N`` holds for the next N requests to that
provider only (useful for "fails twice, then works"); items without it hold until replaced.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from gpubench.errors import UsageError
from gpubench.providers import registry

# The providers the mock speaks (registry entries that name a mock API module).
PROVIDERS = tuple(e.name for e in registry.entries() if e.mock_api)

# fault name -> (takes a value?, default value)
FAULTS: dict[str, tuple[bool, float | None]] = {
    "bad-key": (False, None),
    "429": (True, 1.0),          # value: Retry-After seconds
    "500": (True, None),         # value: Retry-After seconds (none by default)
    "503": (True, None),
    "slow": (True, 2.0),         # value: seconds added to every response
    "no-capacity": (False, None),
    "never-boots": (False, None),
    "ssh-refuses": (False, None),
    "dies": (True, 0.0),         # value: seconds an instance runs before it dies
    "terminate-lies": (False, None),
    "hide-from-list": (False, None),
    "bad-host": (True, None),    # value: the check the next instance fails (BAD_HOST_CHECKS)
    "node-dies": (True, 0.0),    # value: seconds after boot the next instance's link goes down
}

# bad-host=CHECK: the next instance launched fails that preflight check (one instance
# unless @N gives how many). Its stand-in nvidia-smi says so, or (/dev/shm, the matrix
# product, which the mock cannot make real) the preflight probe is told through the
# instance's environment.
BAD_HOST_CHECKS = ("throttle", "pcie-x4", "ecc", "small-shm", "old-driver", "slow-matmul")
# Faults given by name rather than number.
WORD_FAULTS = {"bad-host": BAD_HOST_CHECKS}
# Faults that hold for the next N instances launched (one without @N).
INSTANCE_FAULTS = ("bad-host", "node-dies")
# Faults that only namespace mode can inject (a link to take down).
NETNS_FAULTS = ("node-dies",)

# Faults that answer an HTTP request instead of the API (and so are the ones @N counts).
REQUEST_FAULTS = ("bad-key", "429", "500", "503", "slow")
# Faults whose @N counts list answers (not every request).
LIST_FAULTS = ("hide-from-list",)
COUNTED_FAULTS = REQUEST_FAULTS + LIST_FAULTS + INSTANCE_FAULTS


class FaultSpecError(UsageError):
    """A --faults SPEC that cannot be parsed."""


@dataclass
class Fault:
    provider: str
    name: str
    value: float | str | None = None
    remaining: int | None = None   # None: until replaced


def parse(spec: str) -> list[Fault]:
    """Parse a SPEC; raise FaultSpecError with a one-line message on anything unknown."""
    faults: list[Fault] = []
    for raw in (spec or "").split(","):
        item = raw.strip()
        if not item:
            continue
        providers: tuple[str, ...] = PROVIDERS
        body = item
        if ":" in item:
            prov, body = item.split(":", 1)
            prov = prov.strip().lower()
            if prov not in PROVIDERS + ("*", "all"):
                raise FaultSpecError(f"bad fault {item!r}: unknown provider {prov!r} "
                                     f"(use one of {', '.join(PROVIDERS)} or *)")
            if prov in PROVIDERS:
                providers = (prov,)
        remaining = None
        if "@" in body:
            body, count = body.rsplit("@", 1)
            try:
                remaining = int(count)
            except ValueError:
                raise FaultSpecError(f"bad fault {item!r}: @N needs a whole number") from None
            if remaining < 1:
                raise FaultSpecError(f"bad fault {item!r}: @N must be at least 1")
        name, _, val = body.partition("=")
        name = name.strip().lower()
        if name not in FAULTS:
            raise FaultSpecError(f"bad fault {item!r}: unknown fault {name!r} "
                                 f"(known: {', '.join(FAULTS)})")
        takes_value, value = FAULTS[name]
        if name in WORD_FAULTS:
            value = val.strip().lower()
            if value not in WORD_FAULTS[name]:
                raise FaultSpecError(f"bad fault {item!r}: {name} takes one of "
                                     f"{', '.join(WORD_FAULTS[name])}")
            val = ""
        if val:
            if not takes_value:
                raise FaultSpecError(f"bad fault {item!r}: {name} takes no value")
            try:
                value = float(val)
            except ValueError:
                raise FaultSpecError(f"bad fault {item!r}: value must be a number") from None
            if value < 0:
                raise FaultSpecError(f"bad fault {item!r}: value must not be negative")
        if remaining is not None and name not in COUNTED_FAULTS:
            raise FaultSpecError(f"bad fault {item!r}: @N applies only to {', '.join(COUNTED_FAULTS)}")
        if name in INSTANCE_FAULTS and remaining is None:
            remaining = 1
        faults.extend(Fault(p, name, value, remaining) for p in providers)
    return faults


def check_mode(faults: list[Fault], netns: bool) -> None:
    """Refuse a fault that the mock's network mode cannot inject."""
    if netns:
        return
    for f in faults:
        if f.name in NETNS_FAULTS:
            raise FaultSpecError(f"fault {f.name} needs namespace mode (gpubench mock serve --netns): "
                                 f"in loopback mode an instance has no link of its own to take down")


class FaultBoard:
    """The faults in force, shared by every request thread."""

    def __init__(self, spec: str = "") -> None:
        self._lock = threading.Lock()
        self._faults = parse(spec)
        self._spec = spec or ""
        self.netns = False     # set by the engine once namespace mode is up

    def check_mode(self) -> None:
        with self._lock:
            check_mode(self._faults, self.netns)

    def set(self, spec: str) -> None:
        faults = parse(spec)   # parse first: a bad spec leaves the old one in force
        check_mode(faults, self.netns)
        with self._lock:
            self._faults = faults
            self._spec = spec or ""

    @property
    def spec(self) -> str:
        return self._spec

    def active(self, provider: str, name: str) -> Fault | None:
        """The fault if it holds for this provider now (without using up an @N count)."""
        with self._lock:
            for f in self._faults:
                if f.provider == provider and f.name == name:
                    return f
        return None

    def take_request_faults(self, provider: str) -> list[Fault]:
        """The request-level faults for one request; each @N fault counts this request."""
        taken: list[Fault] = []
        with self._lock:
            for f in list(self._faults):
                if f.provider != provider or f.name not in REQUEST_FAULTS:
                    continue
                taken.append(Fault(f.provider, f.name, f.value, f.remaining))
                if f.remaining is not None:
                    f.remaining -= 1
                    if f.remaining <= 0:
                        self._faults.remove(f)
        return taken

    def take_instance_fault(self, provider: str, name: str) -> Fault | None:
        """The fault if it holds for an instance launched now, counting that instance."""
        with self._lock:
            for f in list(self._faults):
                if f.provider != provider or f.name != name:
                    continue
                if f.remaining is not None:
                    f.remaining -= 1
                    if f.remaining <= 0:
                        self._faults.remove(f)
                return Fault(f.provider, f.name, f.value, f.remaining)
        return None

    def hides_list(self, provider: str) -> bool:
        """Whether this list answer leaves out every instance (hide-from-list); an @N
        fault counts this answer."""
        with self._lock:
            for f in list(self._faults):
                if f.provider != provider or f.name != "hide-from-list":
                    continue
                if f.remaining is not None:
                    f.remaining -= 1
                    if f.remaining <= 0:
                        self._faults.remove(f)
                return True
        return False

    def describe(self) -> list[dict]:
        with self._lock:
            return [{"provider": f.provider, "fault": f.name, "value": f.value,
                     "remaining": f.remaining} for f in self._faults]


def listed(engine, provider: str) -> list:
    """The provider's instances as a list answer shows them: none while hide-from-list
    holds (a provider's list that leaves out what it still has, for a while)."""
    return [] if engine.faults.hides_list(provider) else engine.store.instances(provider)
