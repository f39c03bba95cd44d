"""A provider is one adapter module plus one registry entry: everything that lists
providers is derived from the registry, so one more entry is seen everywhere."""

from __future__ import annotations

import importlib
import os
import sys
import types

import pytest

from gpubench.providers import credentials, registry
from gpubench.providers.common import MissingKeyError
from gpubench.providers.credentials import KeyFile
from gpubench.providers.registry import ProviderEntry
from tests.helpers import clear_provider_env


def _read_acme(path):
    return path.read_text().removeprefix("token:").strip() or None


ACME = ProviderEntry("acme", "Acme GPU", "tests.providers.acme_adapter", "ACME_API_KEY",
                     (KeyFile("home", ".acme/token", _read_acme),), api_path="/v9",
                     setting_vars=("GPUBENCH_ACME_REGION",))


@pytest.fixture
def acme(monkeypatch):
    """A fifth provider: its entry, and an adapter module that only records connect()."""
    module = types.ModuleType(ACME.module)
    module.DEFAULT_URL = "https://api.acme.example"
    module.connect = lambda api_key, base_url: ("connected", api_key, base_url)
    monkeypatch.setitem(sys.modules, ACME.module, module)
    monkeypatch.setattr(registry, "ENTRIES", registry.ENTRIES + (ACME,))
    return ACME


def test_the_three_clouds_and_their_help_texts():
    assert registry.names() == ["lambda", "vast", "runpod"]
    assert registry.help_names() == "lambda, vast or runpod"
    assert registry.help_names("and") == "lambda, vast and runpod"
    assert registry.help_display_names() == "Lambda, Vast.ai or RunPod"
    assert registry.display_name("vast") == "Vast.ai"
    assert registry.key_vars() == {"LAMBDA_API_KEY", "VAST_API_KEY", "RUNPOD_API_KEY"}
    assert [e.url_var for e in registry.entries()] == \
        ["GPUBENCH_LAMBDA_URL", "GPUBENCH_VAST_URL", "GPUBENCH_RUNPOD_URL"]


def test_registry_is_one_line_per_provider():
    assert registry.names() == ["lambda", "vast", "runpod"]
    assert all(e.module.startswith("gpubench.providers.") for e in registry.entries())


@pytest.mark.parametrize("entry", registry.entries(), ids=registry.names())
def test_every_entry_names_an_adapter_module_that_connects(entry):
    module = importlib.import_module(entry.module)
    assert module.DEFAULT_URL.startswith("https://") and callable(module.connect)
    assert module.connect("KEY", module.DEFAULT_URL).name == entry.name


def test_unknown_provider_is_one_usage_line():
    with pytest.raises(registry.UnknownProviderError, match="unknown provider 'azure' "
                                                             r"\(known: lambda, vast, runpod\)"):
        registry.check("azure")


def test_a_fifth_entry_is_in_every_derived_list(acme, monkeypatch):
    assert registry.names()[-1] == "acme" and registry.check("acme") == "acme"
    assert registry.help_names() == "lambda, vast, runpod or acme"
    assert registry.help_display_names().endswith("RunPod or Acme GPU")
    assert "ACME_API_KEY" in registry.key_vars()
    assert {"ACME_API_KEY", "GPUBENCH_ACME_URL", "GPUBENCH_ACME_REGION"} <= registry.env_vars()


def test_a_fifth_entrys_key_is_scrubbed_from_workloads(acme, monkeypatch):
    from gpubench.launch.local import LocalLauncher

    monkeypatch.setenv("ACME_API_KEY", "secret")
    monkeypatch.setenv("LAMBDA_API_KEY", "secret")
    monkeypatch.setenv("UNRELATED", "kept")
    env = LocalLauncher(gpus=[]).environment(1)
    assert "ACME_API_KEY" not in env and "LAMBDA_API_KEY" not in env and env["UNRELATED"] == "kept"


def test_a_fifth_entrys_variables_are_cleared_for_tests(acme, monkeypatch):
    for var in ("ACME_API_KEY", "GPUBENCH_ACME_URL", "GPUBENCH_ACME_REGION"):
        monkeypatch.setenv(var, "from the machine")
    clear_provider_env(monkeypatch)
    assert not {"ACME_API_KEY", "GPUBENCH_ACME_URL", "GPUBENCH_ACME_REGION"} & set(os.environ)


def test_a_fifth_entrys_credentials_and_connection(acme, isolated, monkeypatch):
    with pytest.raises(MissingKeyError, match="set ACME_API_KEY, or api_key under \\[acme\\]"):
        registry.get("acme")
    (isolated.home / ".acme").mkdir()
    (isolated.home / ".acme" / "token").write_text("token: from-tool\n")
    assert credentials.api_key(registry.entry("acme")) == "from-tool"
    assert registry.get("acme") == ("connected", "from-tool", "https://api.acme.example")
    monkeypatch.setenv("ACME_API_KEY", "from-env")
    monkeypatch.setenv("GPUBENCH_ACME_URL", "http://127.0.0.1:9/v9")
    assert registry.get("acme") == ("connected", "from-env", "http://127.0.0.1:9/v9")


def test_the_mock_env_is_derived_from_the_registry(acme):
    from gpubench.mock import API_KEYS, env_for

    env = env_for("http://127.0.0.1:1")
    for entry in registry.entries()[:3]:
        assert env[entry.url_var] == "http://127.0.0.1:1" + entry.api_path
        assert env[entry.key_var] == API_KEYS[entry.name]
    # the mock does not speak Acme's API, so it points nothing at itself for it
    assert not {"ACME_API_KEY", "GPUBENCH_ACME_URL"} & set(env)
