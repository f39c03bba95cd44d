"""Every cloud provider gpubench knows, one entry each: its adapter module (imported
only when asked for), where its API key comes from, the variable that points it at
another endpoint, its display name, and what its machines and offers can do.
Whatever lists providers is derived from this table: credentials lookup, the API
keys scrubbed from a workload's environment, help texts, the mock cloud's providers,
routing and environment, and the tests' isolation.

Adding a provider:
  1. write providers/<name>.py with DEFAULT_URL and `connect(api_key, base_url)`
     returning a Provider (see the protocol in common.py); a provider with clusters
     of its own says so on the adapter class (the NativeClusters protocol in
     common.py), not here;
  2. add one ProviderEntry to ENTRIES below: name, display_name, module, key_var,
     key_files, api_path, setting_vars, and its capabilities, each off by default:
     - mock_api: the mock cloud's module that speaks the API ("gpubench.mock.vast_api";
       see gpubench/mock/apis.py for what it defines), with its catalog rows in
       gpubench/mock/catalog.py;
     - self_removal: a SelfRemoval where a machine can remove itself with its own
       key: the variables on the machine holding its id and key, and the documented
       call (method, path under the endpoint, body). The controller hands these to
       the watchdog it starts on the machine (lifecycle/watchdog.py); without one
       the machine halts (shutdown -h) at its deadline;
     - one_machine_per_offer: every offer id is one physical machine, so a region
       has as many machines as offers (lifecycle/cluster_placement.py);
     - machine_field: the Offer.extra field that names the physical machine behind
       an offer, where offers name one; hosts are told apart by it
       (bench/hosts.py: host_key), and elsewhere every launch is a machine of its own;
  3. tests/providers/test_contract.py runs every entry through the same cases
     against the mock cloud: when it passes, the adapter is done.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass

from gpubench.errors import UsageError
from gpubench.format import spoken
from gpubench.providers import credentials
from gpubench.providers.common import Account, Provider, key_fingerprint
from gpubench.providers.credentials import KeyFile


@dataclass(frozen=True)
class SelfRemoval:
    """How a machine of the provider removes itself with its own key: the variables on
    the machine that hold its id and key, and the provider's documented call, made
    against the account's endpoint (`endpoint` below) with `Authorization: Bearer KEY`."""

    id_var: str                  # the machine's id: "RUNPOD_POD_ID"
    key_var: str                 # a key that may remove this machine: "RUNPOD_API_KEY"
    method: str                  # "DELETE"
    path: str                    # under the endpoint, "{id}" for the machine's id: "/v2/pods/{id}"
    body: str | None = None      # a JSON body to send (as application/json); None: none


@dataclass(frozen=True)
class VolumeKind:
    """The storage a provider sells that outlives a machine (its adapter speaks Volumes)."""

    noun: str                    # how the provider calls it: "filesystem", "network volume"
    bound_to: str                # what pins a machine rented with it: "region", "data centre", "machine"
    one_machine: bool = False    # it lives on one machine: a cluster cannot share it
    price_note: str = ""         # where its monthly price comes from


@dataclass(frozen=True)
class ProviderEntry:
    name: str                    # what commands take: "lambda"
    display_name: str            # how the provider writes itself: "Lambda"
    module: str                  # the adapter module, imported by get() only
    key_var: str                 # the API-key variable the provider's own tools read
    key_files: tuple[KeyFile, ...] = ()   # the official tool's credential files, in order
    api_path: str = ""           # the API's base path ("/api/v1"); an override URL may end in it
    setting_vars: tuple[str, ...] = ()    # further variables the adapter reads
    # Capabilities (see "Adding a provider" above).
    mock_api: str = ""           # the mock cloud's module that speaks this API; "": none
    self_removal: SelfRemoval | None = None   # None: the machine halts itself instead
    one_machine_per_offer: bool = False       # each offer id is one physical machine
    machine_field: str | None = None          # the Offer.extra field naming the machine
    volumes: VolumeKind | None = None          # storage beside its machines; None: none

    @property
    def url_var(self) -> str:
        """GPUBENCH_<NAME>_URL overrides the endpoint (the mock cloud uses it)."""
        return f"GPUBENCH_{self.name.upper()}_URL"


ENTRIES: tuple[ProviderEntry, ...] = (
    ProviderEntry("lambda", "Lambda", "gpubench.providers.lambda_cloud", "LAMBDA_API_KEY",
                  (KeyFile("home", ".lambda_cloud/lambda_keys", credentials.read_api_key_line),),
                  api_path="/api/v1", setting_vars=("GPUBENCH_LAMBDA_SSH_USER",),
                  mock_api="gpubench.mock.lambda_api",
                  volumes=VolumeKind("filesystem", "region",
                                     price_note="$0.20 per GB used a month (Lambda's pricing page)")),
    ProviderEntry("vast", "Vast.ai", "gpubench.providers.vast", "VAST_API_KEY",
                  (KeyFile("config", "vastai/vast_api_key", credentials.read_plain),
                   KeyFile("home", ".config/vastai/vast_api_key", credentials.read_plain),
                   KeyFile("home", ".vast_api_key", credentials.read_plain)),
                  api_path="/api/v0", mock_api="gpubench.mock.vast_api",
                  self_removal=SelfRemoval("CONTAINER_ID", "CONTAINER_API_KEY", "DELETE",
                                           "/api/v0/instances/{id}/", body="{}"),
                  one_machine_per_offer=True, machine_field="machine_id",
                  volumes=VolumeKind("local volume", "machine", one_machine=True,
                                     price_note="the host's storage_cost per GB a month")),
    ProviderEntry("runpod", "RunPod", "gpubench.providers.runpod", "RUNPOD_API_KEY",
                  (KeyFile("home", ".runpod/config.toml", credentials.read_toml_default),),
                  api_path="/v2", mock_api="gpubench.mock.runpod_api",
                  self_removal=SelfRemoval("RUNPOD_POD_ID", "RUNPOD_API_KEY", "DELETE", "/v2/pods/{id}"),
                  volumes=VolumeKind("network volume", "data centre",
                                     price_note="$0.07 per GB a month below 1 TB, $0.05 above, $0.14 "
                                                "high-performance (RunPod's pricing page)")),
)


class UnknownProviderError(UsageError):
    pass


def entries() -> tuple[ProviderEntry, ...]:
    return ENTRIES


def names() -> list[str]:
    return [e.name for e in ENTRIES]


def find(name: str) -> ProviderEntry | None:
    """The entry for `name`; None for a provider the registry does not know (a test's
    stand-in), which has none of the capabilities."""
    return next((e for e in ENTRIES if e.name == name), None)


def entry(name: str) -> ProviderEntry:
    found = find(name)
    if found is None:
        raise UnknownProviderError(f"unknown provider '{name}' (known: {', '.join(names())})")
    return found


def check(name: str) -> str:
    return entry(name).name


def help_names(conjunction: str = "or") -> str:
    """"lambda, vast or runpod": the names as a help text lists them."""
    return spoken(names(), conjunction)


def help_display_names(conjunction: str = "or") -> str:
    """"Lambda, Vast.ai or RunPod"."""
    return spoken([e.display_name for e in ENTRIES], conjunction)


def display_name(name: str) -> str:
    return entry(name).display_name


def key_vars() -> frozenset[str]:
    """Every provider's API-key variable: what no workload's environment may carry."""
    return frozenset(e.key_var for e in ENTRIES)


def env_vars() -> frozenset[str]:
    """Every variable any adapter reads (keys, endpoint overrides, settings): what a test
    clears so that nothing from the machine it runs on leaks in."""
    return frozenset(v for e in ENTRIES for v in (e.key_var, e.url_var, *e.setting_vars))


def base_url(name: str, default: str) -> str:
    return os.environ.get(entry(name).url_var) or default


def endpoint(name: str, url: str) -> str:
    """A base URL as accounts compare it: without a trailing "/" or the API's own path,
    so that an override that names the path and one that does not are the same."""
    url = url.strip().rstrip("/")
    path = entry(name).api_path
    if path and url.lower().endswith(path.lower()):
        url = url[:-len(path)].rstrip("/")
    return url.lower()


def get(name: str) -> Provider:
    """A connected adapter for `name`, carrying the account its key belongs to (the id
    is not looked up here: see lookup_account_id); raises MissingKeyError when it has
    no API key."""
    e = entry(name)
    module = importlib.import_module(e.module)
    api_key = credentials.api_key(e)
    url = base_url(name, module.DEFAULT_URL)
    adapter = module.connect(api_key, url)
    if hasattr(adapter, "account"):     # declared by every adapter (the Provider protocol)
        adapter.account = Account(name, endpoint(name, url), key_fingerprint(api_key))
    return adapter

