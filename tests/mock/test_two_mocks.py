"""Two mocks on one machine (tests side by side, a demo beside a test run) keep to
their own instances: different Vast.ai ids, and taking down one mock's instance
leaves the processes of the other's running."""

from __future__ import annotations

import os
import time

import pytest

from gpubench.mock import MockCloud
from tests.mock.helpers import Api, pub, ssh, wait_for

pytestmark = pytest.mark.slow


def _vast(cloud: MockCloud) -> Api:
    e = cloud.env()
    return Api(e["GPUBENCH_VAST_URL"], {"Authorization": f"Bearer {e['VAST_API_KEY']}"})


def _launch_running(vast: Api, key) -> dict:
    vast("POST", "/ssh/", json={"ssh_key": pub(key)})
    body = {"verified": {"eq": True}, "rentable": {"eq": True}, "num_gpus": {"eq": 1},
            "order": [["dph_total", "asc"]]}
    offer = vast("POST", "/bundles/", json=body).json()["offers"][0]
    iid = vast("PUT", f"/asks/{offer['id']}/", json={"image": "img", "disk": 10.0}).json()["new_contract"]
    return wait_for(lambda: (row := vast("GET", f"/instances/{iid}/").json()["instances"])
                    and row.get("actual_status") == "running" and row.get("ssh_port") and row, timeout=20)


def _sleepers(marker: str) -> list[int]:
    """Pids of the `sleep` started with this marker as its argument."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if f.read().split(b"\0")[:2] == [b"sleep", marker.encode()]:
                        found.append(int(d))
            except OSError:
                pass
    return found


def test_stopping_one_mocks_instance_leaves_the_others_processes(tmp_path, keys):
    with MockCloud.start(state_dir=tmp_path / "a") as a, MockCloud.start(state_dir=tmp_path / "b") as b:
        assert a.engine.store.mock_id != b.engine.store.mock_id
        va, vb = _vast(a), _vast(b)
        row_a, row_b = _launch_running(va, keys["good"]), _launch_running(vb, keys["good"])
        assert row_a["id"] != row_b["id"]
        # a long job in each instance, in a session of its own (as torchrun's workers are)
        marks = {"a": "301", "b": "302"}
        for row, mark in ((row_a, marks["a"]), (row_b, marks["b"])):
            r = ssh(row["ssh_port"], keys["good"], f"setsid sleep {mark} >/dev/null 2>&1 </dev/null & echo ok")
            assert r.returncode == 0, r.stderr
        wait_for(lambda: _sleepers(marks["a"]) and _sleepers(marks["b"]))
        other = _sleepers(marks["b"])

        assert va("DELETE", f"/instances/{row_a['id']}/", json={}).json()["success"] is True
        wait_for(lambda: not _sleepers(marks["a"]), timeout=15)
        time.sleep(0.5)  # anything that would wrongly reach b has had its chance
        assert _sleepers(marks["b"]) == other
        assert ssh(row_b["ssh_port"], keys["good"], "true").returncode == 0
