"""Vast.ai against the running mock: REST calls, SSH, errors, and the official vastai CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from tests.mock.helpers import clean_env, pub, ssh, wait_for


def _offers(vast, **q):
    body = {"verified": {"eq": True}, "rentable": {"eq": True}, "order": [["dph_total", "asc"]], **q}
    return vast("POST", "/bundles/", json=body).json()["offers"]


def test_search_filters_and_prices(vast):
    rows = _offers(vast, num_gpus={"eq": "1"}, gpu_name={"eq": "H100 SXM"})
    assert rows and all(r["num_gpus"] == 1 and r["gpu_name"] == "H100 SXM" for r in rows)
    assert 2.0 <= rows[0]["dph_total"] <= 4.3
    bid = _offers(vast, num_gpus={"eq": "1"}, gpu_name={"eq": "H100 SXM"}, type="bid")
    assert bid[0]["dph_total"] < rows[0]["dph_total"] and bid[0]["is_bid"] is True
    limited = _offers(vast, gpu_name={"in": ["RTX 4090", "RTX 3090"]}, limit=3)
    assert len(limited) == 3 and [r["dph_total"] for r in limited] == sorted(r["dph_total"] for r in limited)
    r = vast("POST", "/bundles", json={"num_gpus": {"gte": 8}})   # no trailing slash works too
    assert r.headers["Content-Type"] == "application/json" and all(o["num_gpus"] >= 8 for o in r.json()["offers"])


@pytest.mark.slow
def test_launch_ssh_list_destroy(vast, keys):
    r = vast("POST", "/ssh/", json={"ssh_key": pub(keys["good"])})
    assert r.json()["success"] is True and r.json()["key"]["public_key"] == pub(keys["good"])
    assert vast("GET", "/ssh/").json()[0]["key"] == pub(keys["good"])
    offer = _offers(vast, num_gpus={"eq": 2}, gpu_name={"eq": "A100 SXM4"})[0]
    r = vast("PUT", f"/asks/{offer['id']}/", json={"client_id": "me", "image": "pytorch/pytorch", "disk": 40.0,
                                                    "label": "bench", "env": {"A": "B"}, "runtype": "ssh_direc ssh_proxy",
                                                    "price": None})
    assert r.status_code == 200 and r.json()["success"] is True
    iid = r.json()["new_contract"]
    row = wait_for(lambda: (x := vast("GET", f"/instances/{iid}/").json()["instances"])["actual_status"] == "running" and x)
    assert row["num_gpus"] == 2 and row["gpu_name"] == "A100 SXM4" and row["extra_env"] == [["A", "B"]]
    port = int(row["ports"]["22/tcp"][0]["HostPort"])
    assert port == row["ssh_port"]
    out = ssh(port, keys["good"], "echo $GPUBENCH_MOCK_GPU_COUNT; command -v torchrun rsync")
    assert out.returncode == 0 and out.stdout.split()[0] == "2", out.stderr
    assert ssh(port, keys["other"], "true").returncode == 255
    base = vast.base.replace("/api/v0", "")
    listing = vast.s.get(base + "/api/v1/instances/", timeout=10,
                         params={"select_filters": "{}", "order_by": '[{"col":"id","dir":"asc"}]', "limit": 25}).json()
    assert listing["success"] and [i["id"] for i in listing["instances"]] == [iid] and listing["next_token"] is None
    r = vast("DELETE", f"/instances/{iid}/", json={})
    assert r.json()["success"] is True
    assert vast("GET", f"/instances/{iid}/").json() == {"instances": None}
    r = vast("DELETE", f"/instances/{iid}/", json={})
    assert r.status_code == 404 and r.json() == {"success": False, "error": "not_found", "msg": "Instance not found"}
    assert ssh(port, keys["good"], "true").returncode == 255


@pytest.mark.slow
def test_errors(cloud, vast):
    url = cloud.env()["GPUBENCH_VAST_URL"] + "/instances/"
    base = cloud.base_url
    r = requests.get(base + "/api/v1/instances/", headers={"Authorization": "Bearer nope"}, timeout=10)
    assert r.status_code == 401 and r.json() == {"success": False, "error": "auth_error", "msg": "Invalid user key"}
    key = cloud.env()["VAST_API_KEY"]
    assert requests.get(base + "/api/v1/instances/", params={"api_key": key}, timeout=10).status_code == 200
    assert requests.get(url + "1/", params={"api_key": "bad"}, timeout=10).status_code == 401
    r = vast("PUT", "/asks/123/", json={"image": "x"})
    assert r.status_code == 404 and "no_such_ask" in r.json()["msg"] and r.json()["success"] is False
    offer = _offers(vast, num_gpus={"eq": 8}, gpu_name={"eq": "H100 SXM"})[0]
    body = {"client_id": "me", "image": "img", "disk": 20.0}
    assert vast("PUT", f"/asks/{offer['id']}/", json=body).status_code == 200
    r = vast("PUT", f"/asks/{offer['id']}/", json=body)           # capacity 1: gone now
    assert r.status_code == 404 and r.json()["error"] == "invalid_args"
    assert offer["id"] not in [o["id"] for o in _offers(vast, num_gpus={"eq": 8})]
    r = vast("PUT", f"/asks/{offer['id'] + 1}/", json={**body, "price": 0.0001})
    assert r.status_code == 400 and r.json()["error"] == "invalid_price"


@pytest.mark.slow
def test_interruptible_is_outbid_when_dying(cloud, vast, keys):
    offer = _offers(vast, num_gpus={"eq": 1}, gpu_name={"eq": "RTX 4090"}, type="bid")[0]
    iid = vast("PUT", f"/asks/{offer['id']}/", json={"image": "img", "disk": 20.0,
                                                     "price": offer["min_bid"] * 1.1}).json()["new_contract"]
    wait_for(lambda: vast("GET", f"/instances/{iid}/").json()["instances"]["actual_status"] == "running")
    cloud.set_faults("vast:dies")
    row = wait_for(lambda: (x := vast("GET", f"/instances/{iid}/").json()["instances"])["actual_status"] != "running" and x)
    assert (row["intended_status"], row["cur_state"], row["next_state"]) == ("stopped",) * 3 and row["is_bid"]


VASTAI = shutil.which("vastai") or str(Path(sys.executable).parent / "vastai")

# The vastai command, run as its entry point runs it (`sys.exit(main())`), in a process of
# its own for each command: forked from one that imported the CLI once. Its import takes
# seconds (aiohttp and its serverless modules), and the test runs it a dozen times.
VASTAI_FORKS = """\
import json, os, sys
from vastai.cli import main as entry
from vastai.cli.commands import (  # what main() imports: imported before the forks
    instances, offers, machines, teams, keys, endpoints, billing, storage, auth, misc,
    deployments, metrics, benchmarks, price_increase, repl, update, uninstall)
for line in sys.stdin:
    argv, out, err = json.loads(line)
    pid = os.fork()
    if pid == 0:
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, out, os.O_WRONLY), (2, err, os.O_WRONLY)):
            os.dup2(os.open(path, flags), fd)
        sys.argv = ["vastai", *argv]
        try:
            code = entry.main()
        except SystemExit as e:
            code = e.code
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class Vastai:
    """`vastai ARGS` -> CompletedProcess, each command a process of its own (VASTAI_FORKS)."""

    def __init__(self, env: dict[str, str], tmp_path: Path) -> None:
        first = Path(VASTAI).read_text().splitlines()[0]
        python = first[2:].strip() if first.startswith("#!") else sys.executable
        self.tmp = tmp_path
        self.calls = 0
        self.proc = subprocess.Popen([python, "-c", VASTAI_FORKS], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def __call__(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        self.calls += 1
        out, err = (self.tmp / f"vastai-{self.calls}.{name}" for name in ("out", "err"))
        out.touch()
        err.touch()
        self.proc.stdin.write(json.dumps([list(args), str(out), str(err)]) + "\n")
        self.proc.stdin.flush()
        done = [None]
        reader = threading.Thread(target=lambda: done.__setitem__(0, self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        assert done[0], f"vastai {' '.join(args)}: no answer in {timeout} s"
        return subprocess.CompletedProcess(["vastai", *args], int(done[0]), out.read_text(),
                                           err.read_text())

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.slow
@pytest.mark.skipif(not Path(VASTAI).exists(), reason="vastai CLI not installed (pip install --no-deps vastai==1.9.1)")
def test_official_vastai_cli(cloud, keys, tmp_path, request):
    env = clean_env({}, tmp_path)
    key = cloud.env()["VAST_API_KEY"]
    cli = Vastai(env, tmp_path)
    request.addfinalizer(cli.close)

    def vastai(*args):
        r = cli("--url", cloud.base_url, "--api-key", key, *args)
        assert "Traceback" not in r.stderr, r.stderr
        return r

    offers = json.loads(vastai("search", "offers", "num_gpus=1 gpu_name=RTX_4090", "--raw").stdout)
    assert offers and all(o["gpu_name"] == "RTX 4090" for o in offers)
    assert "ssh-key created" in vastai("create", "ssh-key", pub(keys["good"])).stdout
    made = json.loads(vastai("create", "instance", str(offers[0]["id"]), "--image", "pytorch/pytorch",
                             "--disk", "20", "--ssh", "--direct", "--raw").stdout)
    assert made["success"] is True
    iid = made["new_contract"]

    def running():
        rows = json.loads(vastai("show", "instances", "--raw").stdout)
        return rows and rows[0]["actual_status"] == "running" and rows[0]
    row = wait_for(running, timeout=30, interval=0.2)
    assert row["id"] == iid
    assert ssh(row["ssh_port"], keys["good"], "true").returncode == 0
    assert json.loads(vastai("show", "instance", str(iid), "--raw").stdout)["id"] == iid
    assert "destroying instance" in vastai("destroy", "instance", str(iid), "-y").stdout
    assert json.loads(vastai("show", "instances", "--raw").stdout) == []


@pytest.mark.slow
def test_instance_keys_attach_and_detach(vast, keys):
    offer = _offers(vast, num_gpus={"eq": 1}, gpu_name={"eq": "RTX 3090"})[0]
    iid = vast("PUT", f"/asks/{offer['id']}/", json={"image": "img", "disk": 10.0}).json()["new_contract"]
    row = wait_for(lambda: (x := vast("GET", f"/instances/{iid}/").json()["instances"])["actual_status"] == "running"
                   and x)
    assert ssh(row["ssh_port"], keys["other"], "true").returncode == 255
    r = vast("POST", f"/instances/{iid}/ssh/", json={"ssh_key": pub(keys["other"])})
    assert r.json()["success"] is True
    assert ssh(row["ssh_port"], keys["other"], "true").returncode == 0
    kid = vast("POST", "/ssh/", json={"ssh_key": pub(keys["good"])}).json()["key"]["id"]   # reaches it too
    assert ssh(row["ssh_port"], keys["good"], "true").returncode == 0
    assert vast("DELETE", f"/instances/{iid}/ssh/{kid}/", json={}).json()["success"] is True
    assert ssh(row["ssh_port"], keys["good"], "true").returncode == 255
    assert json.loads(vast("GET", f"/instances/{iid}/ssh/").json()["ssh_keys"]) == [pub(keys["other"])]
