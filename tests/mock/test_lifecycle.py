"""Whole-mock behaviour: states over a boot delay, restart with state kept, no sshd left behind,
the `gpubench mock serve` command, concurrency, rsync into an instance, startup time."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from gpubench.mock import MockCloud
from tests.helpers import start_gpubench
from tests.mock.helpers import SSH_OPTS, Api, pub, ssh, sshd_count, wait_for


def _runpod(cloud) -> Api:
    e = cloud.env()
    return Api(e["GPUBENCH_RUNPOD_URL"], {"Authorization": f"Bearer {e['RUNPOD_API_KEY']}"})


def _launch_pod(api: Api, key_pub: str) -> str:
    api("PUT", "/account/ssh-keys", json={"keys": [key_pub]})
    r = api("POST", "/pods", json={"name": "p", "image": "img", "gpu": {"id": "NVIDIA L40S", "count": 2},
                                   "ports": ["22/tcp"], "startSsh": True})
    assert r.status_code == 201, r.text
    return r.json()["id"]


@pytest.mark.slow
def test_states_follow_the_boot_delay(tmp_path, keys):
    with MockCloud.start(state_dir=tmp_path / "s", boot_delay=0.8) as cloud:
        rp = _runpod(cloud)
        pid = _launch_pod(rp, pub(keys["good"]))
        seen = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (not seen or seen[-1] != "RUNNING"):
            p = rp("GET", f"/pods/{pid}").json()
            if not seen or seen[-1] != p["status"]:
                seen.append(p["status"])
                assert (p["ssh"]["direct"] is None) == (p["status"] != "RUNNING")
            time.sleep(0.05)
        assert seen == ["PROVISIONING", "STARTING", "RUNNING"]

        e = cloud.env()
        vast = Api(e["GPUBENCH_VAST_URL"], {"Authorization": f"Bearer {e['VAST_API_KEY']}"})
        iid = vast("PUT", "/asks/6000001/", json={"image": "img", "disk": 20.0}).json()["new_contract"]
        seen = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (not seen or seen[-1] != "running"):
            row = vast("GET", f"/instances/{iid}/").json()["instances"]
            if not seen or seen[-1] != row["actual_status"]:
                seen.append(row["actual_status"])
                assert (row["ports"] is None) == (row["actual_status"] != "running")
            time.sleep(0.05)
        assert seen == [None, "loading", "running"]


@pytest.mark.slow
def test_restart_keeps_instances_and_no_sshd_survives_stop(tmp_path, keys):
    state = tmp_path / "s"
    with MockCloud.start(state_dir=state) as cloud:
        rp = _runpod(cloud)
        pid = _launch_pod(rp, pub(keys["good"]))
        pod = wait_for(lambda: (p := rp("GET", f"/pods/{pid}").json())["status"] == "RUNNING" and p)
        port = pod["ssh"]["direct"]["port"]
        assert ssh(port, keys["good"], "echo kept > marker").returncode == 0
        wait_for(lambda: sshd_count(state) == 1, timeout=5)   # a readiness probe may linger briefly
    assert sshd_count(state) == 0
    assert ssh(port, keys["good"], "true").returncode == 255
    with MockCloud.start(state_dir=state) as cloud:
        rp = _runpod(cloud)
        pod = rp("GET", f"/pods/{pid}").json()
        assert pod["status"] in ("RUNNING",)
        port = pod["ssh"]["direct"]["port"]
        out = wait_for(lambda: (o := ssh(port, keys["good"], "cat marker")).returncode == 0 and o, timeout=15)
        assert out.stdout.strip() == "kept"
    assert sshd_count(state) == 0


@pytest.mark.slow
def test_rsync_and_tools_inside_an_instance(cloud, keys, tmp_path):
    rp = _runpod(cloud)
    pid = _launch_pod(rp, pub(keys["good"]))
    d = wait_for(lambda: (p := rp("GET", f"/pods/{pid}").json())["status"] == "RUNNING" and p)["ssh"]["direct"]
    src = tmp_path / "suite"
    src.mkdir()
    (src / "job.py").write_text("print('hello from the instance')\n")
    rsh = " ".join(["ssh", *SSH_OPTS, "-i", str(keys["good"]), "-p", str(d["port"])])
    r = subprocess.run(["rsync", "-az", "-e", rsh, f"{src}/", f"{d['username']}@127.0.0.1:suite/"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = ssh(d["port"], keys["good"], "python suite/job.py && command -v torchrun && echo $HOME")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[:3] == ["hello", "from", "the"] and lines[-1].endswith("/home")
    assert Path(lines[-2]).parent == Path(sys.executable).parent


@pytest.mark.slow
def test_launch_to_ssh_ready_time(cloud, keys):
    rp = _runpod(cloud)
    rp("PUT", "/account/ssh-keys", json={"keys": [pub(keys["good"])]})
    t0 = time.monotonic()
    pid = rp("POST", "/pods", json={"name": "t", "image": "img", "gpu": {"id": "NVIDIA L40S", "count": 1},
                                    "ports": ["22/tcp"], "startSsh": True}).json()["id"]
    port = wait_for(lambda: (p := rp("GET", f"/pods/{pid}").json())["status"] == "RUNNING"
                    and p["ssh"]["direct"]["port"], interval=0.01)
    wait_for(lambda: ssh(port, keys["good"], "true").returncode == 0, interval=0.01)
    elapsed = time.monotonic() - t0
    print(f"\nlaunch to SSH-ready (boot delay 0): {elapsed:.2f} s")
    assert elapsed < 5


@pytest.mark.slow
def test_concurrent_launches_respect_capacity(cloud):
    e = cloud.env()
    vast = Api(e["GPUBENCH_VAST_URL"], {"Authorization": f"Bearer {e['VAST_API_KEY']}"})
    offer = vast("POST", "/bundles/", json={"num_gpus": {"eq": 1}, "gpu_name": {"eq": "A10"}}).json()["offers"][0]
    codes: list[int] = []
    lock = threading.Lock()

    def go():
        r = requests.put(f"{e['GPUBENCH_VAST_URL']}/asks/{offer['id']}/", json={"image": "i", "disk": 10.0},
                         headers={"Authorization": f"Bearer {e['VAST_API_KEY']}"}, timeout=30)
        with lock:
            codes.append(r.status_code)

    threads = [threading.Thread(target=go) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(codes) == [200] * 4 + [404] * 6     # an A10 1x offer holds 4


def _serve(tmp_path: Path, *args: str) -> subprocess.Popen:
    return start_gpubench("mock", "serve", "--state", str(tmp_path / "s"), *args,
                          env={"PYTHONUNBUFFERED": "1"})


def _exports(proc: subprocess.Popen) -> dict[str, str]:
    got = {}
    while len(got) < 6:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        name, _, value = line.strip().removeprefix("export ").partition("=")
        got[name] = value
    return got


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_serve_command_prints_exports_and_cleans_up(tmp_path, keys, sig):
    t0 = time.monotonic()
    proc = _serve(tmp_path)
    try:
        env = _exports(proc)
        startup = time.monotonic() - t0
        print(f"\n`gpubench mock serve` to export lines: {startup:.2f} s")
        assert env["GPUBENCH_LAMBDA_URL"].endswith("/api/v1") and env["GPUBENCH_VAST_URL"].endswith("/api/v0")
        assert env["GPUBENCH_RUNPOD_URL"].endswith("/v2") and env["RUNPOD_API_KEY"]
        lam = Api(env["GPUBENCH_LAMBDA_URL"], {"Authorization": f"Bearer {env['LAMBDA_API_KEY']}"})
        lam("POST", "/ssh-keys", json={"name": "k", "public_key": pub(keys["good"])})
        iid = lam("POST", "/instance-operations/launch", json={"region_name": "us-east-1", "ssh_key_names": ["k"],
                                                               "instance_type_name": "gpu_1x_h100_sxm5"}).json()
        iid = iid["data"]["instance_ids"][0]
        wait_for(lambda: lam("GET", f"/instances/{iid}").json()["data"]["status"] == "active")
        wait_for(lambda: sshd_count(tmp_path / "s") == 1, timeout=5)
        proc.send_signal(sig)
        proc.wait(timeout=15)
        # SIGKILL gives the mock no chance to clean up: PDEATHSIG takes the sshd down with it
        wait_for(lambda: sshd_count(tmp_path / "s") == 0, timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.parametrize("args,words", [
    (["--faults", "vast:explode"], "unknown fault"),
    (["--port", "70000"], "bad port"),
    (["--boot-delay", "-1"], "must not be negative"),
])
def test_serve_bad_input_is_one_line(tmp_path, cli, args, words):
    code, _, err = cli("mock", "serve", "--state", str(tmp_path / "s"), *args)
    assert code != 0 and words in err and len(err.strip().splitlines()) == 1, err


def test_unwritable_state_dir(tmp_path, cli):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = cli("mock", "serve", "--state", str(blocker / "s"))
    assert code != 0 and "not writable" in err and "Traceback" not in err


@pytest.mark.slow
def test_stale_sshd_from_a_killed_mock_is_reaped(tmp_path):
    from gpubench.mock.sshhost import InstanceHost
    from gpubench.mock.state import MockInstance, Store

    store = Store(tmp_path / "mock.sqlite")
    inst = MockInstance(provider="lambda", id="abc", name="", offer_key="k", units=1, gpu_name="A10",
                        gpu_count=1, price_per_hour=1.0, region="r", created_at=0, ready_at=0)
    first = InstanceHost(tmp_path, store)
    assert first.start(inst)
    wait_for(lambda: sshd_count(tmp_path) == 1, timeout=5)
    # a second host on the same state stands for a restarted mock that never knew the process
    assert InstanceHost(tmp_path, store).reap_stale() == 1
    wait_for(lambda: sshd_count(tmp_path) == 0, timeout=5)
    first.stop_all()
    store.close()
