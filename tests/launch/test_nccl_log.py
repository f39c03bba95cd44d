"""The network's truth on a GPU: NCCL writes what it chose (NCCL_DEBUG=INFO,
NCCL_DEBUG_SUBSYS=INIT,NET) into a file per host and process; the parser reads its
transports, its network and devices, and why a node fell back to TCP sockets; the
launchers set it only for GPU runs and never over the user's own NCCL_DEBUG, bring
the files back with the run's other files and remove them; the record carries the
facts and the report says, under the table, which nodes fell back.

The recorded NCCL output is in tests/fixtures/nccl/, each file saying where its
lines come from."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpubench.launch import local, nccl_log
from gpubench.launch.base import Machine, RunOutcome, SweepPoint
from gpubench.launch.cluster import ClusterLauncher, ClusterOptions, Member
from gpubench.launch.cluster_torchrun import NodeFacts
from gpubench.launch.local import LocalLauncher
from gpubench.launch.process import Finished
from gpubench.launch.ssh import SshLauncher
from gpubench.remote.cluster import PRIVATE, ClusterHosts, ClusterNode
from gpubench.remote.envcheck import RemoteEnv
from gpubench.remote.session import RemoteLayout
from gpubench.remote.target import SshTarget
from gpubench.remote.targets import RemoteHost
from gpubench.report.compute import build_report
from gpubench.report.render import render
from gpubench.suite import WorkloadRef, resolve
from gpubench.sweep.records import finish_record
from gpubench.sweep.run import SweepPlan
from gpubench.workloads import record_schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def hosts_of(name: str) -> dict[str, dict]:
    return {h.host: h.as_record() for h in nccl_log.parse(fixture(name)).hosts.values()}


# ---------------------------------------------------------------------- the parser
def test_an_nvlink_box_stays_on_nvlink_and_did_not_fall_back():
    facts = nccl_log.parse(fixture("nvlink_box.log"))
    assert facts.version == "2.21.5+cuda12.4"
    (host,) = facts.hosts.values()
    assert host.host == "gpu-h100-01" and host.transport == "P2P+NVLS"
    # NCCL initialised sockets (no InfiniBand here), but no channel left the node
    assert host.network == "Socket" and host.net == "eth0" and host.ib_missing
    assert host.fallback is None and facts.fallbacks() == []
    assert nccl_log.record_fields({"": fixture("nvlink_box.log")}) == {
        "nccl_transport": "P2P+NVLS", "nccl_net": None, "nccl_fallback": None,
        "nccl_fallback_nodes": None, "nccl_version": "2.21.5+cuda12.4",
        "nccl_hosts": [{"host": "gpu-h100-01", "transport": "P2P+NVLS", "network": "Socket",
                        "net": "eth0", "plugin": None, "fallback": None}]}


def test_an_infiniband_cluster_uses_the_devices_its_channels_name():
    facts = nccl_log.parse(fixture("ib_cluster.log"))
    assert facts.version == "2.21.5+cuda12.4"  # rank 0's bare version line
    assert hosts_of("ib_cluster.log") == {
        name: {"host": name, "transport": "P2P+NET/IB", "network": "IB",
               "net": "mlx5_2:1/IB, mlx5_3:1/IB", "plugin": None, "fallback": None}
        for name in ("H20-GPU-05", "H20-GPU-06")}
    fields = nccl_log.record_fields({"node0": fixture("ib_cluster.log")})
    assert fields["nccl_transport"] == "P2P+NET/IB" and fields["nccl_net"] == "mlx5_2:1/IB, mlx5_3:1/IB"
    assert fields["nccl_fallback"] is None and fields["nccl_fallback_nodes"] is None


def test_nodes_without_infiniband_fall_back_to_tcp_sockets():
    facts = nccl_log.parse(fixture("socket_fallback.log"))
    assert facts.version == "2.18.5+cuda12.1"
    assert [h.host for h in facts.fallbacks()] == ["ip-172-31-12-21", "ip-172-31-5-233"]
    for host in facts.hosts.values():
        assert host.transport == "SHM+NET/Socket" and host.net == "ens3"
        assert host.fallback == "NET/IB : No device found; the all-reduce ran over ens3"
    # each node's text apart, as the cluster launcher brings them back
    lines = fixture("socket_fallback.log").splitlines(keepends=True)
    per_node = {f"node{i}": "".join(ln for ln in lines if ln.startswith(host))
                for i, host in enumerate(("ip-172-31-12-21", "ip-172-31-5-233"))}
    fields = nccl_log.record_fields(per_node)
    assert fields["nccl_fallback_nodes"] == 2 and fields["nccl_transport"] == "SHM+NET/Socket"
    assert fields["nccl_fallback"] == "NET/IB : No device found; the all-reduce ran over ens3"
    assert fields["nccl_net"] == "ens3" and fields["nccl_version"] is None  # only in rank 0's bare line


def test_an_efa_plugin_that_fails_is_the_reason_given():
    facts = nccl_log.parse(fixture("efa_plugin_failed.log"))
    assert facts.version == "2.21.5+cuda12.8"
    assert len(facts.fallbacks()) == 2
    host = facts.hosts["ip-10-36-29-253"]
    assert host.plugin == "aws-ofi-nccl 1.14.0" and host.ofi_provider == "efa (4 NICs)"
    assert host.warnings[0].startswith("NET/OFI Creating new endpoint")
    assert host.fallback == ("NET/OFI aws-ofi-nccl initialization failed (efa (4 NICs) found); "
                             "NET/IB : No device found; the all-reduce ran over eth0")


def test_an_efa_machine_without_its_plugin_falls_back_and_says_the_plugin_is_missing():
    fields = nccl_log.record_fields({"": fixture("efa_plugin_missing.log")})
    assert fields["nccl_version"] == "2.18.5+cuda12.1"  # the prefixed version line
    assert fields["nccl_transport"] == "P2P+NET/Socket" and fields["nccl_fallback_nodes"] == 2
    assert fields["nccl_fallback"] == (
        "no network plugin loaded (libnccl-net.so: cannot open shared object file); "
        "NET/IB : No device found; the all-reduce ran over ens32")


def test_output_with_nothing_of_nccl_gives_nothing():
    facts = nccl_log.parse(fixture("no_nccl.log"))
    assert not facts.said_anything and facts.hosts == {}
    assert set(nccl_log.record_fields({"": fixture("no_nccl.log")}).values()) == {None}
    assert set(nccl_log.record_fields(None).values()) == {None}


def test_other_formats_roce_old_rings_and_devices_listed_but_sockets_chosen():
    roce = ("dgxh100-4:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE "
            "[1]mlx5_11:1/RoCE [RO]; OOB enp220s0np0:11.1.128.136<0>\n"  # NVIDIA/nccl-tests#185
            "dgxh100-4:460770:460842 [0] NCCL INFO Using network IB\n"
            "[1,7]<stdout>:dgxh100-4:460770:460842 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] "
            "[send] via NET/IB/1\n")  # under mpirun's prefix
    host = nccl_log.parse(roce).hosts["dgxh100-4"]
    assert (host.transport, host.net, host.fallback) == ("NET/IB", "mlx5_11:1/RoCE", None)
    old = ("c6ad99331184:117277:117384 [0] NCCL INFO Ring 00 : 15 -> 0 [receive] via NET/Socket/0\n"
           "c6ad99331184:117291:117389 [0] NCCL INFO Ring 00 : 2[0] -> 3[0] via direct shared memory\n"
           "NCCL version 2.4.8+cuda10.1\n")  # NVIDIA/nccl#367
    facts = nccl_log.parse(old)
    assert facts.version == "2.4.8+cuda10.1"
    assert facts.hosts["c6ad99331184"].transport == "SHM+NET/Socket"
    assert facts.fallbacks() == []  # sockets, but nothing said of a faster fabric
    chosen = ("n1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.1<0>\n"
              "n1:1:2 [0] NCCL INFO NET/Socket : Using [0]ib0:10.0.0.1<0> [1]eth0:10.1.0.1<0>\n"
              "n1:1:2 [0] NCCL INFO Using network Socket\n"
              "n1:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/1\n")
    assert nccl_log.parse(chosen).hosts["n1"].fallback == (
        "NET/IB found mlx5_0:1/IB but NCCL chose sockets; the all-reduce ran over eth0")
    disabled = chosen.replace("NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.1<0>",
                              "NCCL_IB_DISABLE set by environment to 1.")
    assert nccl_log.parse(disabled).hosts["n1"].fallback is None  # the user's choice


# ---------------------------------------------------------------------- the environment
def test_the_environment_is_for_gpu_runs_and_never_over_the_users_own():
    assert nccl_log.environment("/tmp/r/nccl", True, {}) == {
        "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG_FILE": "/tmp/r/nccl.%h.%p"}
    assert nccl_log.environment("/tmp/r/nccl", False, {}) == {}  # a CPU run: gloo
    assert nccl_log.environment("/tmp/r/nccl", True, {"NCCL_DEBUG": "WARN"}) == {}
    assert nccl_log.environment("/tmp/r/nccl", True, {"NCCL_DEBUG_FILE": "/my/nccl.log"}) == {}
    kept = nccl_log.environment("/tmp/r/nccl", True, {"NCCL_DEBUG_SUBSYS": "ALL"})
    assert "NCCL_DEBUG_SUBSYS" not in kept and kept["NCCL_DEBUG"] == "INFO"


def _ssh(cuda: bool, base: str = "gpubench") -> SshLauncher:
    env = RemoteEnv("3.11", "2.13", cuda, gpus=["H100"] * 8 if cuda else [], cpu_count=16)
    session = SimpleNamespace(env=env, python=sys.executable, layout=RemoteLayout(base))
    return SshLauncher(session, Machine("ssh", "box", "H100", 8, None))


def test_the_ssh_launcher_sets_it_on_a_cuda_machine_only(monkeypatch):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    env = _ssh(True).nccl_environment("abc")
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_FILE"] == "$B/runs/abc.nccl.%h.%p"
    assert _ssh(False).nccl_environment("abc") == {}
    assert _ssh(True).nccl_environment("abc", {"NCCL_DEBUG": "TRACE"}) == {}  # the machine's own
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    assert _ssh(True).nccl_environment("abc") == {}  # the user's own, in gpubench's environment


class LocalShell:
    """The SSH connection's capture and stream, run by bash in `home` here."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.commands: list[str] = []

    def capture(self, command: str, timeout: float = 60.0) -> tuple[int, str]:
        self.commands.append(command)
        done = subprocess.run(["bash", "-c", command], cwd=self.home, capture_output=True, text=True,
                              timeout=timeout)
        return done.returncode, done.stdout + done.stderr


# a stand-in for the run: its process changes directory, then writes what NCCL would
WRITES = ("import os, socket, sys; os.chdir('/'); "
          "path = os.environ['NCCL_DEBUG_FILE'].replace('%h', socket.gethostname())"
          ".replace('%p', str(os.getpid())); open(path, 'w').write(sys.argv[1])")


def test_the_ssh_launcher_brings_the_files_back_in_its_one_call_and_removes_them(tmp_path, monkeypatch):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    launcher = _ssh(True, "my base")  # a base with a space: quoted, and still globbed
    shell = LocalShell(tmp_path)
    launcher._session.conn = shell
    (tmp_path / "my base").mkdir()
    run = uuid.uuid4().hex  # the tag its processes are stopped by: this test's alone
    env = {**launcher.environment(2), **launcher.nccl_environment(run)}
    said = fixture("ib_cluster.log")
    line = launcher.shell_line(run, [sys.executable, "-c", WRITES, said], env, 60)
    done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (tmp_path / "my base" / "runs").glob(f"{run}.nccl.*")]  # NCCL's own file

    found = launcher._collect(run, wanted=True, stop=True)
    assert found["nccl"] == said and len(shell.commands) == 1  # one remote call
    assert list((tmp_path / "my base" / "runs").glob(f"{run}.*")) == []  # removed like the others
    measured = launcher._measured(resolve("mnist-ddp"), env, found)
    assert measured[nccl_log.LOGS] == {"": said}
    assert _ssh(False)._measured(resolve("mnist-ddp"), {}, {"nccl": ""}).get(nccl_log.LOGS) is None


def test_the_local_launcher_sets_it_for_gpus_and_reads_the_files(tmp_path, monkeypatch):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    monkeypatch.setattr(local, "torch_python", lambda: sys.executable)
    seen: list[dict] = []

    def fake_run(cmd, env, on_line, timeout, cwd=None, run_id=None) -> Finished:
        seen.append(env)
        if "NCCL_DEBUG_FILE" in env:
            for pid, host in ((101, "gpu-h100-01"), (102, "gpu-h100-01")):
                Path(env["NCCL_DEBUG_FILE"].replace("%h", host).replace("%p", str(pid))).write_text(
                    fixture("nvlink_box.log") if pid == 101 else "")
        Path(env["GPUBENCH_RECORD_FILE"]).write_text(json.dumps({"status": "ok", "throughput": 1.0}))
        return Finished(0)

    monkeypatch.setattr(local, "stream_process", fake_run)
    gpus = LocalLauncher(gpus=["NVIDIA H100 80GB HBM3"] * 2)
    outcome = gpus.run(resolve("mnist-ddp"), SweepPoint(1, 2), [], lambda _: None, 60)
    assert seen[0]["NCCL_DEBUG"] == "INFO" and seen[0]["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert outcome.measured[nccl_log.LOGS] == {"": fixture("nvlink_box.log")}
    cpu = LocalLauncher(gpus=[]).run(resolve("mnist-ddp"), SweepPoint(1, 2), [], lambda _: None, 60)
    assert "NCCL_DEBUG" not in seen[1] and nccl_log.LOGS not in cpu.measured


def test_each_cluster_member_gets_its_own_files_unless_its_machine_set_nccl_debug(monkeypatch):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)

    def node(index: int) -> ClusterNode:
        target = SshTarget(f"203.0.113.{index + 1}", 22, "root", Path("/k"))
        return ClusterNode(RemoteHost(target, "lambda", f"c-{index}", "gpu_8x_h100", "H100", 8, 10.0),
                           index, f"10.0.0.{index + 1}", {})

    nodes = (node(0), node(1))
    hosts = ClusterHosts("duo", nodes)
    members = [Member(n, _ssh(True)) for n in nodes]
    members[0].facts["10.0.0.1"] = NodeFacts(interface="ens1")
    members[1].facts["10.0.0.1"] = NodeFacts(interface="ens1", comm_env={"NCCL_DEBUG": "WARN"})
    launcher = ClusterLauncher(hosts, members, None, ClusterOptions(), lambda _: None)
    head = launcher._node_run(members[0], 0, resolve("mnist-ddp"), SweepPoint(2, 8), [], hosts, PRIVATE, "r9")
    peer = launcher._node_run(members[1], 1, resolve("mnist-ddp"), SweepPoint(2, 8), [], hosts, PRIVATE, "r9")
    assert head.env["NCCL_DEBUG_FILE"] == "$B/runs/r9n0.nccl.%h.%p"
    assert "NCCL_DEBUG" not in peer.env  # its machine's own NCCL_DEBUG stands


# ---------------------------------------------------------------------- the record
def _finished(measured: dict) -> dict:
    plan = SweepPlan(WorkloadRef("gpt-ddp", Path("gpt_ddp.py"), True), [SweepPoint(2, 8)], [], "run-1")
    record = {"status": "ok", "throughput": 1000.0, "throughput_unit": "tokens/s"}
    outcome = RunOutcome(0, record, ["torchrun"], 60.0, measured=measured)
    return finish_record(outcome, plan, Machine("lambda", "gpu_8x_h100", "H100 SXM", 8, 24.0),
                         SweepPoint(2, 8))


def test_the_record_carries_what_nccl_said_and_nothing_on_a_cpu():
    lines = fixture("socket_fallback.log").splitlines(keepends=True)
    record = _finished({"device": "cuda", nccl_log.LOGS: {
        "node0": "".join(ln for ln in lines if not ln.startswith("ip-172-31-5-233")),
        "node1": "".join(ln for ln in lines if ln.startswith("ip-172-31-5-233"))}})
    record_schema.require_declared(record, record_schema.GPUBENCH)
    assert record_schema.type_problems(record) == []
    assert nccl_log.LOGS not in record
    assert (record["nccl_transport"], record["nccl_net"], record["nccl_fallback_nodes"],
            record["nccl_version"]) == ("SHM+NET/Socket", "ens3", 2, "2.18.5+cuda12.1")
    assert record["nccl_fallback"] == "NET/IB : No device found; the all-reduce ran over ens3"
    assert [h["host"] for h in record["nccl_hosts"]] == ["ip-172-31-12-21", "ip-172-31-5-233"]
    cpu = _finished({"device": "cpu"})
    assert all(cpu[name] is None for name in ("nccl_transport", "nccl_net", "nccl_fallback",
                                              "nccl_fallback_nodes", "nccl_hosts", "nccl_version"))


# ---------------------------------------------------------------------- the report
def _row(gpus: int, nodes: int, throughput: float, **fields) -> dict:
    return {"schema_version": 1, "status": "ok", "error": None, "workload": "gpt-ddp",
            "provider": "lambda", "instance_type": "gpu_8x_h100", "gpu_name": "H100 SXM",
            "precision": "bf16", "nodes": nodes, "gpu_count": gpus, "world_size": gpus,
            "throughput": throughput, "throughput_unit": "tokens/s", "epoch_samples": None,
            "price_per_hour": 3.0 * gpus, "run_id": "run-a", "time": "2026-01-10T00:00:00Z",
            "device": "cuda", **fields}


def test_the_report_says_which_nodes_fell_back_under_the_table():
    why = "NET/IB : No device found; the all-reduce ran over eth0"
    records = [_row(8, 1, 8000.0, nccl_transport="P2P+NVLS"),
               _row(16, 2, 9000.0, nccl_transport="P2P+NET/Socket", nccl_fallback=why,
                    nccl_fallback_nodes=2)]
    report = build_report(records)
    note = ("2 nodes of H100 SXM fell back to TCP sockets: NET/IB : No device found; the all-reduce "
            "ran over eth0 (gpt-ddp on lambda H100 SXM, 16 processes)")
    assert [n for n in report.notes if "fell back" in n] == [note]
    for fmt in ("table", "markdown"):
        assert note in render(report, fmt).text
    rows = json.loads(render(report, "json").text)
    assert [r["nccl_transport"] for r in rows] == ["P2P+NVLS", "P2P+NET/Socket"]
    assert [r["nccl_fallback"] for r in rows] == [None, why]
    assert not [n for n in build_report(records[:1]).notes if "fell back" in n]
