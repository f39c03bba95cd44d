"""Namespace mode: mock instances as hosts of their own on the mock's bridge, the node-dies
fault, extra ports served, and nothing left behind (namespaces, veths, the bridge).
torchrun across two instances: tests/lifecycle/test_cluster_e2e_mock.py (Vast.ai)."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

import pytest

from gpubench.mock import netns
from tests.helpers import start_gpubench
from tests.mock.helpers import Api, netns_mock_cloud, pub, ssh, wait_for

pytestmark = pytest.mark.slow

# ssh on A, connect to B:PORT over the bridge, print what it says first
PROBE = ("python3 -c \"import socket,sys; s=socket.create_connection((sys.argv[1], int(sys.argv[2])), 5); "
         "print(s.recv(64).decode().strip())\" {host} {port}")
# one connection accepted on PORT of the instance, answered 'pong', for at most 30 s
PONG = ("nohup timeout 30 python3 -c \"import socket; s=socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', {port})); s.listen(); "
        "c, _ = s.accept(); c.sendall(b'pong'); c.close()\" >/dev/null 2>&1 &")


def _apis(cloud) -> tuple[Api, Api, Api]:
    e = cloud.env()
    return (Api(e["GPUBENCH_LAMBDA_URL"], {"Authorization": f"Bearer {e['LAMBDA_API_KEY']}"}),
            Api(e["GPUBENCH_VAST_URL"], {"Authorization": f"Bearer {e['VAST_API_KEY']}"}),
            Api(e["GPUBENCH_RUNPOD_URL"], {"Authorization": f"Bearer {e['RUNPOD_API_KEY']}"}))


def _vast_create(vast, env: dict | None = None) -> int:
    offer = vast("POST", "/bundles/", json={"num_gpus": {"eq": 1}, "limit": 5}).json()["offers"]
    for o in offer:
        r = vast("PUT", f"/asks/{o['id']}/", json={"client_id": "me", "image": "img", "disk": 10,
                                                   "runtype": "ssh_direc ssh_proxy", "env": env or {}})
        if r.status_code == 200:
            return r.json()["new_contract"]
    raise AssertionError("no Vast offer could be rented")


def _vast_running(vast, iid: int) -> dict:
    return wait_for(lambda: (r := vast("GET", f"/instances/{iid}/").json()["instances"])
                    and r["actual_status"] == "running" and r, timeout=20)


def _reaches(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            return bool(s.recv(8))
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _ours(cloud) -> tuple[set[str], set[str]]:
    """This mock's namespaces and interfaces (bridge and veths) as the kernel lists them."""
    mock_id = cloud.engine.network.mock_id       # kept after stop(), for the checks that follow it
    names = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, timeout=20).stdout
    links = {line.split(":")[1].strip().split("@")[0] for line in names.splitlines()}
    return ({n for n in netns.namespaces() if n.startswith(netns.PREFIX + mock_id)},
            {link for link in links if mock_id in link})


def test_two_vast_instances_reach_each_other_over_the_bridge(tmp_path, keys):
    with netns_mock_cloud(tmp_path / "mock") as cloud:
        _, vast, _ = _apis(cloud)
        assert cloud.admin("/_mock/health")["network"]["mode"] == "netns"
        vast("POST", "/ssh/", json={"ssh_key": pub(keys["good"])})
        a_id, b_id = _vast_create(vast), _vast_create(vast, {"-p 29500:29500": "1"})
        a, b = _vast_running(vast, a_id), _vast_running(vast, b_id)
        subnet = cloud.engine.network.cidr.rsplit(".", 1)[0]
        assert a["public_ipaddr"] != b["public_ipaddr"]
        assert a["public_ipaddr"].startswith(subnet) and b["public_ipaddr"].startswith(subnet)
        assert a["ssh_host"] == a["public_ipaddr"] and a["ssh_port"] == 22
        assert b["ports"]["22/tcp"][0]["HostPort"] == "22"
        assert b["ports"]["29500/tcp"][0]["HostPort"] == "29500"      # public port = container port
        user = cloud.engine.host.user
        out = ssh(22, keys["good"], "echo $GPUBENCH_MOCK_GPU_COUNT", user=user, host=a["public_ipaddr"])
        assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr
        # A reaches B's sshd over the bridge, from inside its own namespace
        out = ssh(22, keys["good"], PROBE.format(host=b["public_ipaddr"], port=22), user=user,
                  host=a["public_ipaddr"])
        assert out.returncode == 0 and out.stdout.startswith("SSH-2.0"), out.stderr
        # B's process listens on 29500 in its namespace; this machine reaches it at B's mapping
        assert ssh(22, keys["good"], PONG.format(port=29500), user=user, host=b["public_ipaddr"]).returncode == 0
        assert wait_for(lambda: _reaches(b["public_ipaddr"], 29500), timeout=10)
        # ...and 127.0.0.1:29500 of this machine is not B's: the instance has a loopback of its own
        assert not _reaches("127.0.0.1", 29500, timeout=0.5)


def test_lambda_and_runpod_answer_their_own_addresses(tmp_path, keys):
    with netns_mock_cloud(tmp_path / "mock") as cloud:
        lam, _, rp = _apis(cloud)
        lam("POST", "/ssh-keys", json={"name": "k", "public_key": pub(keys["good"])})
        types = lam("GET", "/instance-types").json()["data"]
        name, t = next((n, t) for n, t in types.items() if t["regions_with_capacity_available"])
        region = t["regions_with_capacity_available"][0]["name"]
        iid = lam("POST", "/instance-operations/launch", json={
            "region_name": region, "instance_type_name": name, "ssh_key_names": ["k"]}).json()["data"]["instance_ids"][0]
        inst = wait_for(lambda: (d := lam("GET", f"/instances/{iid}").json()["data"])["status"] == "active" and d)
        assert inst["ip"] != inst["private_ip"] and "ssh_port" not in inst      # a real answer has none
        assert _reaches(inst["ip"], 22) and _reaches(inst["private_ip"], 22)
        out = ssh(22, keys["good"], "hostname; getent hosts $(hostname)", user=cloud.engine.host.user,
                  host=inst["private_ip"])
        assert out.stdout.split()[0] == inst["hostname"], out.stderr         # a name of its own
        assert {inst["ip"], inst["private_ip"]} <= set(out.stdout.split()[1:])

        gpu = rp("GET", "/catalog/gpus").json()["gpus"][0]["id"]
        pod = rp("POST", "/pods", json={"name": "p", "image": "img", "gpu": {"id": gpu, "count": 1},
                                        "ports": ["22/tcp", "29500/tcp", "8888/http"], "startSsh": True,
                                        "env": {"PUBLIC_KEY": pub(keys["good"])}}).json()
        pod = wait_for(lambda: (p := rp("GET", f"/pods/{pod['id']}").json())["status"] == "RUNNING" and p)
        host = pod["ssh"]["direct"]["host"]
        assert host not in (inst["ip"], "127.0.0.1") and pod["ssh"]["direct"]["port"] == 22
        assert {(p["private"], p["public"], p["ip"]) for p in pod["runtime"]["ports"]} == \
            {(22, 22, host), (29500, 29500, host)}
        assert _reaches(host, 22)


def test_node_dies_cuts_the_link_in_bounded_time(tmp_path, keys):
    with netns_mock_cloud(tmp_path / "mock") as cloud:
        _, vast, _ = _apis(cloud)
        vast("POST", "/ssh/", json={"ssh_key": pub(keys["good"])})
        iid = _vast_create(vast)
        row = _vast_running(vast, iid)
        host = row["public_ipaddr"]
        assert _reaches(host, 22)
        answer = cloud.admin("/_mock/node-dies", {"provider": "vast", "id": str(iid), "after": 0.5})
        assert answer["id"] == str(iid)
        assert _reaches(host, 22)                                   # not yet
        t0 = time.monotonic()
        wait_for(lambda: not _reaches(host, 22, timeout=1.0), timeout=10)
        assert time.monotonic() - t0 < 5
        # packets vanish: a connect times out rather than being refused
        with pytest.raises((socket.timeout, TimeoutError)):
            socket.create_connection((host, 22), timeout=1.0)
        # the provider has not noticed: still running
        assert vast("GET", f"/instances/{iid}/").json()["instances"]["actual_status"] == "running"

        # the fault SPEC form: the next instance launched loses its link 0.3 s after boot
        cloud.set_faults("vast:node-dies=0.3")
        second = _vast_running(vast, _vast_create(vast))
        wait_for(lambda: not _reaches(second["public_ipaddr"], 22, timeout=1.0), timeout=10)
        third = _vast_running(vast, _vast_create(vast))              # one instance only
        time.sleep(0.6)
        assert _reaches(third["public_ipaddr"], 22)


def test_terminate_and_stop_leave_no_namespace_veth_or_bridge(tmp_path, keys):
    with netns_mock_cloud(tmp_path / "mock") as cloud:
        _, vast, _ = _apis(cloud)
        vast("POST", "/ssh/", json={"ssh_key": pub(keys["good"])})
        first, second = _vast_create(vast), _vast_create(vast)
        _vast_running(vast, first), _vast_running(vast, second)
        spaces, links = _ours(cloud)
        assert len(spaces) == 2 and len(links) == 3                  # two veths and the bridge
        out = ssh(22, keys["good"], "nohup sleep 300 >/dev/null 2>&1 &", user=cloud.engine.host.user,
                  host=cloud.address("vast", str(first)))
        assert out.returncode == 0
        ns = cloud.engine.network.addresses(1).namespace
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                              timeout=20).stdout.split()
        assert pids                                     # its sshd and the sleep
        assert vast("DELETE", f"/instances/{first}/").json()["success"]
        spaces, links = _ours(cloud)
        assert ns not in spaces and len(spaces) == 1 and len(links) == 2
        assert wait_for(lambda: not any(_alive(int(p)) for p in pids), timeout=5)
        bridge = cloud.engine.network.bridge
    spaces, links = _ours(cloud)
    assert spaces == set() and links == set() and bridge not in links


def test_a_dead_mocks_namespaces_are_reaped(tmp_path):
    mock_id = "0ddba11e"
    bridge, ns = f"{netns.PREFIX}{mock_id}", f"{netns.PREFIX}{mock_id}-1"
    try:
        subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True, capture_output=True, timeout=20)
        subprocess.run(["ip", "link", "set", "dev", bridge, "alias", "gpubench-mock pid=1 start=0"],
                       check=True, capture_output=True, timeout=20)
        subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=20)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot make a bridge and a namespace here: {e}")
    with netns_mock_cloud(tmp_path / "mock"):
        assert ns not in netns.namespaces()
        out = subprocess.run(["ip", "link", "show", bridge], capture_output=True, timeout=20)
        assert out.returncode != 0


# torchrun's c10d rendezvous and a gloo all-reduce across two instances (each resolving
# its own hostname, not its peer's: --local_addr gives each node's address) runs on the
# Vast.ai cluster of tests/lifecycle/test_cluster_e2e_mock.py: one pair of instances
# serves both.


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_serve_netns_says_its_mode_and_leaves_nothing(tmp_path, keys, sig):
    if netns.available() is not None:
        pytest.skip(netns.available())
    proc = start_gpubench("mock", "serve", "--netns", "--state", str(tmp_path / "s"),
                          env={"PYTHONUNBUFFERED": "1"})
    try:
        exports = {}
        while len(exports) < 6:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            name, _, value = line.strip().removeprefix("export ").partition("=")
            exports[name] = value
        startup = proc.stderr.readline()
        assert "in netns mode" in startup and "bridge gbm" in startup, startup
        bridge = startup.split("bridge ", 1)[1].split()[0]
        vast = Api(exports["GPUBENCH_VAST_URL"], {"Authorization": f"Bearer {exports['VAST_API_KEY']}"})
        vast("POST", "/ssh/", json={"ssh_key": pub(keys["good"])})
        _vast_running(vast, _vast_create(vast))
        assert any(n.startswith(bridge + "-") for n in netns.namespaces())
        proc.send_signal(sig)
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    if sig == signal.SIGKILL:        # no chance to clean up: the next mock reaps what it left
        with netns_mock_cloud(tmp_path / "next"):
            pass
    assert not any(n.startswith(bridge) for n in netns.namespaces())
    assert subprocess.run(["ip", "link", "show", bridge], capture_output=True, timeout=20).returncode != 0
