"""Every cloud provider gpubench knows, one entry each: its adapter module (imported
only when asked for), where its API key comes from, the variable that points it at
another endpoint, and its display name. Whatever lists providers is derived from
this table: credentials lookup, the API keys scrubbed from a workload's environment,
help texts, the mock cloud's environment and the tests' isolation.

Adding a provider:
  1. write providers/<name>.py with DEFAULT_URL and `connect(api_key, base_url)`
     returning a Provider (see the protocol in common.py);
  2. add one ProviderEntry to ENTRIES below;
  3. tests/providers/test_contract.py runs every entry through the same cases
     against the mock cloud: when it passes (the mock needs a module that speaks
     the new API), the adapter is done.
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
class ProviderEntry:
    name: str                    # what commands take: "lambda"
    display_name: str            # how the provider writes itself: "Lambda"
    module: str                  # the adapter module, imported by get() only
    key_var: str                 # the API-key variable the provider's own tools read
    key_files: tuple[KeyFile, ...] = ()   # the official tool's credential files, in order
    api_path: str = ""           # the API's base path ("/api/v1"); an override URL may end in it
    setting_vars: tuple[str, ...] = ()    # further variables the adapter reads

    @property
    def url_var(self) -> str:
        """GPUBENCH_<NAME>_URL overrides the endpoint (the mock cloud uses it)."""
        return f"GPUBENCH_{self.name.upper()}_URL"


ENTRIES: tuple[ProviderEntry, ...] = (
    ProviderEntry("lambda", "Lambda", "gpubench.providers.lambda_cloud", "LAMBDA_API_KEY",
                  (KeyFile("home", ".lambda_cloud/lambda_keys", credentials.read_api_key_line),),
                  api_path="/api/v1", setting_vars=("GPUBENCH_LAMBDA_SSH_USER",)),
    ProviderEntry("vast", "Vast.ai", "gpubench.providers.vast", "VAST_API_KEY",
                  (KeyFile("config", "vastai/vast_api_key", credentials.read_plain),
                   KeyFile("home", ".config/vastai/vast_api_key", credentials.read_plain),
                   KeyFile("home", ".vast_api_key", credentials.read_plain)),
                  api_path="/api/v0"),
    ProviderEntry("runpod", "RunPod", "gpubench.providers.runpod", "RUNPOD_API_KEY",
                  (KeyFile("home", ".runpod/config.toml", credentials.read_toml_default),),
                  api_path="/v2"),
)


class UnknownProviderError(UsageError):
    pass


def entries() -> tuple[ProviderEntry, ...]:
    return ENTRIES


def names() -> list[str]:
    return [e.name for e in ENTRIES]


def entry(name: str) -> ProviderEntry:
    for e in ENTRIES:
        if e.name == name:
            return e
    raise UnknownProviderError(f"unknown provider '{name}' (known: {', '.join(names())})")


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

