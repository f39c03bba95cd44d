"""Provider name -> adapter module, imported only when asked for.

Adding a provider: write providers/<name>.py with a `connect(api_key, base_url)`
function returning a Provider and a DEFAULT_URL, then add one line here.
"""

from __future__ import annotations

import importlib
import os

from gpubench.errors import UsageError
from gpubench.providers.common import Provider

ADAPTERS: dict[str, str] = {
    "lambda": "gpubench.providers.lambda_cloud",
    "vast": "gpubench.providers.vast",
    "runpod": "gpubench.providers.runpod",
}


class UnknownProviderError(UsageError):
    pass


def names() -> list[str]:
    return list(ADAPTERS)


def check(name: str) -> str:
    if name not in ADAPTERS:
        raise UnknownProviderError(f"unknown provider '{name}' (known: {', '.join(ADAPTERS)})")
    return name


def base_url(name: str, default: str) -> str:
    """GPUBENCH_<NAME>_URL overrides the endpoint (the mock cloud uses this)."""
    return os.environ.get(f"GPUBENCH_{name.upper()}_URL") or default


def get(name: str) -> Provider:
    """A connected adapter for `name`; raises MissingKeyError when it has no API key."""
    from gpubench.providers import credentials

    module = importlib.import_module(ADAPTERS[check(name)])
    key = credentials.api_key(name)
    return module.connect(key, base_url(name, module.DEFAULT_URL))
