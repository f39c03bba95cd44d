"""Terminate racing the requests that change an instance: the instance stays gone and no sshd
comes back for it, on every provider.

The race window between a handler's read and its write is a few microseconds; the tests widen
it by slowing every read of an instance that a request thread makes (the ticker's reads keep
their pace), then fire a terminate and a staggered volley of changes at one running instance.
"""

from __future__ import annotations

import threading
import time

import pytest

from gpubench.mock.state import MockInstance
from tests.mock.helpers import Api, pub, sshd_count, wait_for

READ_DELAY_S = 0.05      # how long a request thread's read of an instance takes
STAGGER_S = 0.015        # between the changes of one volley
VOLLEY = 12              # changes per volley (threads)


def _widen_races(cloud) -> None:
    store = cloud.engine.store
    real_get = store.get

    def slow_get(provider: str, iid: str):
        inst = real_get(provider, iid)
        if threading.current_thread().name != "mock-ticker":
            time.sleep(READ_DELAY_S)
        return inst

    store.get = slow_get


def _volley(terminate, changes: list) -> list[BaseException]:
    """Terminate at once and send the changes (cycled to VOLLEY threads) STAGGER_S apart."""
    errors: list[BaseException] = []

    def run(fn, delay: float) -> None:
        time.sleep(delay)
        try:
            r = fn()
            assert r.status_code < 500, r.text
        except BaseException as e:          # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=run, args=(terminate, 0.0))]
    threads += [threading.Thread(target=run, args=(changes[n % len(changes)], n * STAGGER_S))
                for n in range(VOLLEY)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a request hung"
    return errors


def _runpod(cloud, key: str):
    e = cloud.env()
    api = Api(e["GPUBENCH_RUNPOD_URL"], {"Authorization": f"Bearer {e['RUNPOD_API_KEY']}"})
    api("PUT", "/account/ssh-keys", json={"keys": [key]})
    r = api("POST", "/pods", json={"name": "p", "image": "img", "gpu": {"id": "NVIDIA L40S", "count": 1},
                                   "ports": ["22/tcp"], "startSsh": True})
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    wait_for(lambda: api("GET", f"/pods/{pid}").json()["status"] == "RUNNING")
    terminate = lambda: api("DELETE", f"/pods/{pid}")             # noqa: E731
    changes = [lambda: api("PATCH", f"/pods/{pid}", json={"name": "renamed", "env": {"A": "1"}}),
               lambda: api("POST", f"/pods/{pid}/action", json={"action": "stop"}),
               lambda: api("POST", f"/pods/{pid}/action", json={"action": "start"}),
               lambda: api("POST", f"/pods/{pid}/action", json={"action": "restart"})]
    gone = lambda: api("GET", f"/pods/{pid}").status_code == 404   # noqa: E731
    return pid, terminate, changes, gone


def _vast(cloud, key: str):
    e = cloud.env()
    api = Api(e["GPUBENCH_VAST_URL"], {"Authorization": f"Bearer {e['VAST_API_KEY']}"})
    r = api("PUT", "/asks/6000001/", json={"image": "img", "disk": 20.0})
    assert r.status_code == 200, r.text
    iid = str(r.json()["new_contract"])
    wait_for(lambda: api("GET", f"/instances/{iid}/").json()["instances"]["actual_status"] == "running")
    terminate = lambda: api("DELETE", f"/instances/{iid}/")       # noqa: E731
    changes = [lambda: api("PUT", f"/instances/{iid}/", json={"label": "renamed"}),
               lambda: api("PUT", f"/instances/{iid}/", json={"state": "stopped"}),
               lambda: api("PUT", f"/instances/{iid}/", json={"state": "running"}),
               lambda: api("POST", f"/instances/{iid}/ssh/", json={"ssh_key": key})]
    gone = lambda: api("GET", f"/instances/{iid}/").json()["instances"] is None   # noqa: E731
    return iid, terminate, changes, gone


def _lambda(cloud, key: str):
    e = cloud.env()
    api = Api(e["GPUBENCH_LAMBDA_URL"], {"Authorization": f"Bearer {e['LAMBDA_API_KEY']}"})
    assert api("POST", "/ssh-keys", json={"name": "k", "public_key": key}).status_code == 200
    r = api("POST", "/instance-operations/launch", json={"region_name": "us-east-1", "ssh_key_names": ["k"],
                                                         "instance_type_name": "gpu_1x_h100_sxm5"})
    assert r.status_code == 200, r.text
    iid = r.json()["data"]["instance_ids"][0]
    wait_for(lambda: api("GET", f"/instances/{iid}").json()["data"]["status"] == "active")
    terminate = lambda: api("POST", "/instance-operations/terminate", json={"instance_ids": [iid]})  # noqa: E731
    changes = [lambda: api("POST", f"/instances/{iid}", json={"name": "renamed"}),
               lambda: api("POST", "/instance-operations/restart", json={"instance_ids": [iid]})]
    gone = lambda: api("GET", f"/instances/{iid}").status_code == 404   # noqa: E731
    return iid, terminate, changes, gone


@pytest.mark.slow
@pytest.mark.parametrize("provider,setup", [("runpod", _runpod), ("vast", _vast), ("lambda", _lambda)])
def test_terminate_racing_changes_stays_terminated(cloud, keys, provider, setup):
    state = cloud.engine.state_dir
    iid, terminate, changes, gone = setup(cloud, pub(keys["good"]))
    wait_for(lambda: sshd_count(state) == 1, timeout=5)
    _widen_races(cloud)
    errors = _volley(terminate, changes)
    assert not errors, errors
    time.sleep(0.5)                     # ten ticks: time for the ticker to boot anything brought back
    assert gone(), f"{provider} instance {iid} came back after terminate"
    assert cloud.engine.store.instances(provider) == []
    wait_for(lambda: sshd_count(state) == 0, timeout=5)   # a readiness probe may linger briefly
    time.sleep(0.3)
    assert sshd_count(state) == 0


def test_a_write_after_terminate_is_dropped(cloud):
    engine = cloud.engine
    inst = engine.launch("runpod", iid="gone1", name="n", offer_key="k", units=1, gpu_name="g",
                         gpu_count=1, price_per_hour=1.0, region="r", authorized_keys=[])
    assert engine.mutate("runpod", "gone1", lambda i: setattr(i, "name", "m")).name == "m"
    assert engine.terminate(inst)
    assert engine.mutate("runpod", "gone1", lambda i: setattr(i, "name", "x")) is None
    stale = MockInstance(**{**inst.__dict__, "name": "stale"})
    assert engine.store.update(stale) is False
    assert engine.store.get("runpod", "gone1") is None
