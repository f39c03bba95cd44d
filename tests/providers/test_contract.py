"""The contract every provider adapter keeps (the Provider protocol in common.py), run
against the in-process mock cloud: the same cases for every registry entry, so a new
entry is held to them as soon as it is added. A new adapter is done when this passes.

Quick by design: launched instances run with the mock's `ssh-refuses` fault, so they
reach their running state with an SSH address but no sshd is ever started.
"""

from __future__ import annotations

import time

import pytest

from gpubench.mock import MockCloud
from gpubench.providers import registry
from gpubench.providers.common import (NAME_PREFIX, AuthError, CapacityError, Instance,
                                       InstanceState, LaunchSpec, NotFoundError, Offer, Provider,
                                       ProviderError, RateLimitError, SshKeyRef, TransportError,
                                       key_body)

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAsiPWwcW43M+Yytg28oloP6sggNZ6ocEKmsydcY+/oR contract"
NO_SSHD = "ssh-refuses"      # every fault spec below keeps it: no test here needs SSH
DEADLINE_S = 10.0
UNKNOWN_ID = "987654321"     # an id no mock provider has handed out


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    with MockCloud.start(state_dir=tmp_path / "mock", boot_delay=0.0, faults=NO_SSHD) as c:
        for var, value in c.env().items():
            monkeypatch.setenv(var, value)
        monkeypatch.setenv("GPUBENCH_HTTP_RETRIES", "1")   # a 429 or 5xx case ends quickly
        yield c          # stopping it stops every instance's processes


@pytest.fixture(params=registry.names())
def name(request) -> str:
    return request.param


@pytest.fixture
def provider(cloud, name) -> Provider:
    return registry.get(name)


def faults(cloud: MockCloud, spec: str) -> None:
    cloud.set_faults(f"{NO_SSHD},{spec}")


def _launch(provider: Provider, ref: SshKeyRef) -> tuple[Offer, Instance]:
    offer = next(o for o in provider.offers(gpus=1) if o.available != 0)
    spec = LaunchSpec(gpus=1, disk_gb=50, name="contract", ssh_key=ref)
    return offer, provider.launch(offer, spec)


def _wait(what: str, check, deadline_s: float = DEADLINE_S):
    end = time.monotonic() + deadline_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"{what} not within {deadline_s:g} s")
        time.sleep(0.05)


# -- the happy path -----------------------------------------------------------------

def test_is_a_provider(provider, name):
    assert isinstance(provider, Provider) and provider.name == name


def test_offers_are_well_formed(provider, name):
    offers = provider.offers(gpus=1)
    assert offers, "the mock has something to rent"
    for o in offers:
        assert isinstance(o, Offer) and o.provider == name
        assert isinstance(o.offer_id, str) and o.offer_id
        assert isinstance(o.gpu_name, str) and o.gpu_name
        assert o.gpu_count == 1 and o.interruptible is False
        assert isinstance(o.price_per_hour, float) and o.price_per_hour > 0
        assert isinstance(o.region, str) and isinstance(o.instance_type, str)
        assert o.available is None or (isinstance(o.available, int) and o.available >= 0)
        assert o.disk_gb is None or o.disk_gb >= 0
    assert any(o.available != 0 for o in offers)
    assert all(o.gpu_count >= 1 for o in provider.offers())
    assert all(isinstance(o, Offer) and o.interruptible for o in provider.offers(interruptible=True))


def test_ensure_ssh_key_is_idempotent(provider, cloud, name):
    first = provider.ensure_ssh_key(PUBLIC_KEY, "gpubench")
    again = provider.ensure_ssh_key(PUBLIC_KEY, "gpubench")
    other_comment = provider.ensure_ssh_key(key_body(PUBLIC_KEY) + " elsewhere", "gpubench")
    assert isinstance(first, SshKeyRef) and first == again
    assert key_body(first.public_key) == key_body(PUBLIC_KEY)
    assert (other_comment.name, other_comment.key_id) == (first.name, first.key_id)
    held = [k for k in cloud.engine.store.keys(name) if key_body(k.public_key) == key_body(PUBLIC_KEY)]
    assert len(held) == 1, "the same key twice is one key"


def test_launch_get_list_terminate(provider, name):
    ref = provider.ensure_ssh_key(PUBLIC_KEY, "gpubench")
    offer, inst = _launch(provider, ref)
    assert isinstance(inst, Instance) and inst.provider == name and inst.instance_id
    assert inst.name == NAME_PREFIX + "contract"
    assert inst.status in (InstanceState.PENDING, InstanceState.RUNNING)

    def running():
        got = provider.get(inst.instance_id)
        return got if got.status is InstanceState.RUNNING else None

    got = _wait("RUNNING", running)
    assert got.instance_id == inst.instance_id and got.name == inst.name
    assert got.ssh_host and isinstance(got.ssh_port, int) and got.ssh_port > 0 and got.ssh_user
    assert got.gpu_count == 1 and got.gpu_name == offer.gpu_name

    listed = {i.instance_id: i for i in provider.list()}
    assert inst.instance_id in listed and listed[inst.instance_id].name == inst.name

    provider.terminate(inst.instance_id)

    def gone():
        try:
            return provider.get(inst.instance_id).status is InstanceState.TERMINATED
        except NotFoundError:
            return True

    _wait("terminated or not found", gone)
    still = [i for i in provider.list() if i.instance_id == inst.instance_id]
    assert all(i.status is InstanceState.TERMINATED for i in still)


def test_unknown_id_is_not_found(provider):
    with pytest.raises(NotFoundError):
        provider.get(UNKNOWN_ID)
    with pytest.raises(NotFoundError):
        provider.terminate(UNKNOWN_ID)


# -- each error class -----------------------------------------------------------------

def _carries_where(error: ProviderError, name: str) -> None:
    """Every error says which provider and endpoint, in one line."""
    assert error.provider == name and error.endpoint and "\n" not in str(error)


def test_wrong_api_key_is_auth_error(cloud, name, monkeypatch):
    monkeypatch.setenv(registry.entry(name).key_var, "not-the-key")
    with pytest.raises(AuthError) as e:
        registry.get(name).list()
    _carries_where(e.value, name)
    assert e.value.status in (401, 403, 404)   # Vast.ai answers some bad keys with 404


def test_rate_limit_is_rate_limit_error(provider, cloud, name):
    faults(cloud, f"{name}:429=0")
    with pytest.raises(RateLimitError) as e:
        provider.list()
    _carries_where(e.value, name)
    assert e.value.status == 429


def test_server_error_is_a_provider_error_and_an_unclear_launch(provider, cloud, name):
    ref = provider.ensure_ssh_key(PUBLIC_KEY, "gpubench")
    offer = next(o for o in provider.offers(gpus=1) if o.available != 0)
    faults(cloud, f"{name}:500")
    with pytest.raises(ProviderError) as e:
        provider.list()
    assert type(e.value) in (ProviderError, TransportError) and e.value.status == 500
    _carries_where(e.value, name)
    # A launch answered with a 5xx may have rented a machine: never a definite refusal.
    with pytest.raises(TransportError):
        provider.launch(offer, LaunchSpec(gpus=1, disk_gb=50, name="contract", ssh_key=ref))


def test_no_capacity_is_capacity_error(provider, cloud, name):
    ref = provider.ensure_ssh_key(PUBLIC_KEY, "gpubench")
    offer = next(o for o in provider.offers(gpus=1) if o.available != 0)
    faults(cloud, f"{name}:no-capacity")
    with pytest.raises(CapacityError) as e:
        provider.launch(offer, LaunchSpec(gpus=1, disk_gb=50, name="contract", ssh_key=ref))
    _carries_where(e.value, name)
    assert not [i for i in provider.list() if i.name == NAME_PREFIX + "contract"]
