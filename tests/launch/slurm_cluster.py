"""A real Slurm cluster on this host for the tests: munged, slurmctld and two
slurmd, started as root without systemd from a configuration written to a
temporary directory, and stopped again with nothing left running.

Each compute node is a network namespace of its own, joined to a bridge in this
one by a veth pair, with addresses in 10.232.0.0/16 (a range only these tests
use; the bridge is the controller's address). slurmd runs there under a
hostname of its own and with an /etc/hosts that names every node, because
torchrun's c10d rendezvous and gloo find their peers by host name:

    nsenter --net=/var/run/netns/NAME unshare --uts --mount sh -c \
        'mount --bind HOSTS /etc/hosts; hostname NAME; exec slurmd -D -N NAME'

(`ip netns exec` remounts /sys, and slurmd 22.05's cgroup set-up then fails.)
Each node has CPUs=1 and one "GPU": a GRES whose device file is /dev/null (without
one slurmd counts none), so jobs ask for --gres=gpu:1 as on a real cluster and
the workloads run on the CPU.

There is no accounting database: `JobCompType=jobcomp/filetxt` writes each
job's end state to a file that `sacct -c` reads.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

START_DEADLINE_S = 30.0
PARTITION = "debug"
CLUSTER = "gbtest"
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd")


def slurm_installed() -> str | None:
    """Why no cluster can be started here, or None when one can."""
    for tool in ("munged", "slurmctld", "slurmd", "sbatch", "nsenter", "unshare", "ip"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed (apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "the test Slurm cluster needs root (network namespaces, slurmd)"
    return None


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=20)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    name: str
    address: str
    netns: str
    host_link: str  # the veth end on the bridge


@dataclass
class SlurmCluster:
    dir: Path
    nodes: list[Node]
    controller_address: str
    bridge: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a Slurm command needs to find this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    # ------------------------------------------------------------------ start
    @classmethod
    def start(cls, directory: Path) -> "SlurmCluster":
        tag = f"{os.getpid() % 10000}{random.randrange(10)}"
        subnet = random.randrange(256)
        nodes = [Node(f"gbn{i}", f"10.232.{subnet}.{i + 1}", f"gbslurm{tag}n{i}", f"gbs{tag}n{i}")
                 for i in (1, 2)]
        cluster = cls(directory, nodes, f"10.232.{subnet}.1", f"gbs{tag}br")
        try:
            cluster._network()
            cluster._configure()
            cluster._daemons()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _network(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.controller_address}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for node in self.nodes:
            _run("ip", "netns", "add", node.netns)
            _run("ip", "link", "add", node.host_link, "type", "veth", "peer", "name", "eth0",
                 "netns", node.netns)
            _run("ip", "link", "set", node.host_link, "master", self.bridge)
            _run("ip", "link", "set", node.host_link, "up")
            _run("ip", "-n", node.netns, "addr", "add", f"{node.address}/24", "dev", "eth0")
            _run("ip", "-n", node.netns, "link", "set", "eth0", "up")
            _run("ip", "-n", node.netns, "link", "set", "lo", "up")

    def _configure(self) -> None:
        d = self.dir
        (d / "state").mkdir(parents=True)
        (d / "munge").mkdir(mode=0o755)  # the socket is for every job user
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o400)
        hosts = ["127.0.0.1 localhost", f"{self.controller_address} {socket.gethostname()}"]
        hosts += [f"{n.address} {n.name}" for n in self.nodes]
        (d / "hosts").write_text("\n".join(hosts) + "\n")
        nodes = "\n".join(f"NodeName={n.name} NodeAddr={n.address} NodeHostname={n.name} "
                          "CPUs=1 RealMemory=1000 Gres=gpu:1 State=UNKNOWN" for n in self.nodes)
        names = ",".join(n.name for n in self.nodes)
        self.conf.write_text(f"""\
ClusterName={CLUSTER}
SlurmctldHost={socket.gethostname()}({self.controller_address})
MailProg=/bin/true
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge/munge.socket
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={d}/jobcomp.txt
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
KillWait=2
MinJobAge=300
MessageTimeout=10
{nodes}
PartitionName={PARTITION} Nodes={names} Default=YES MaxTime=INFINITE State=UP
""")
        (d / "gres.conf").write_text(f"NodeName={self.nodes[0].name.rstrip('0123456789')}"
                                     f"[1-{len(self.nodes)}] Name=gpu File=/dev/null\n")

    def _daemons(self) -> None:
        d = self.dir
        self._spawn("munged", ["munged", "-F", "--force", f"--socket={d}/munge/munge.socket",
                               f"--key-file={d}/munge/munge.key", f"--pid-file={d}/munge/munged.pid",
                               f"--log-file={d}/munge/munged.log", f"--seed-file={d}/munge/seed"])
        self._wait_for(lambda: (d / "munge" / "munge.socket").exists(), "munged")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        for node in self.nodes:
            inner = (f"mount --bind {d / 'hosts'} /etc/hosts && hostname {node.name} && "
                     f"exec slurmd -D -N {node.name} -f {self.conf}")
            self._spawn(node.name, ["nsenter", f"--net=/var/run/netns/{node.netns}",
                                    "unshare", "--uts", "--mount", "sh", "-c", inner])
        self._wait_for(self._all_idle, "the nodes to be idle")

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.dir / f"{name}.stdout", "ab")
        self.procs[name] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, env={**os.environ, **self.env},
                                            start_new_session=True)

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited while waiting for {what}: {self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}: {self.logs()}")

    def _all_idle(self) -> bool:
        out = self.command("sinfo", "--noheader", "--Node", "--format=%N|%T")
        states = dict(line.split("|", 1) for line in out.stdout.split() if "|" in line)
        return len(states) == len(self.nodes) and all(s == "idle" for s in states.values())

    # ------------------------------------------------------------------ use
    def command(self, *cmd: str, timeout: float = 20) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **self.env})

    def logs(self) -> str:
        parts = []
        for path in sorted(self.dir.glob("*.log")) + sorted(self.dir.glob("*.stdout")):
            text = path.read_text(errors="replace").strip().splitlines()[-8:]
            parts.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(parts)

    def jobs(self) -> list[str]:
        """Jobs the controller still holds pending or running."""
        out = self.command("squeue", "--noheader", "--states=PENDING,RUNNING,COMPLETING",
                           "--format=%i")
        return out.stdout.split()

    def clear_queue(self) -> None:
        """Cancel whatever a test left queued, and wait for the nodes to be idle again."""
        if self.jobs():
            self.command("scancel", "--full", *self.jobs())
            self._wait_for(lambda: not self.jobs() and self._all_idle(), "an empty queue")

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Stop every daemon (slurmd first, then the controller, then munge), then
        remove the namespaces and the bridge."""
        order = [n.name for n in self.nodes] + ["slurmctld", "munged"]
        for name in order:
            proc = self.procs.pop(name, None)
            if proc is None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
        for node in self.nodes:
            self._kill_namespace(node.netns)  # job steps slurmd left behind
            subprocess.run(["ip", "netns", "del", node.netns], capture_output=True, timeout=20)
            subprocess.run(["ip", "link", "del", node.host_link], capture_output=True, timeout=20)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=20)

    @staticmethod
    def _kill_namespace(netns: str) -> None:
        out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True,
                             timeout=20).stdout
        for pid in out.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass

    def leftovers(self) -> list[str]:
        """Daemons of this cluster still running (pgrep on its configuration's path)."""
        out = subprocess.run(["pgrep", "-af", str(self.dir)], capture_output=True, text=True,
                             timeout=20).stdout
        return [line for line in out.splitlines() if any(d in line for d in DAEMONS)]


if __name__ == "__main__":  # start one by hand: python -m tests.launch.slurm_cluster DIR
    import sys
    import tempfile

    where = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="gbslurm-"))
    # Ctrl-C, or `kill PID` for one started in the background (which ignores SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    t0 = time.monotonic()
    c = SlurmCluster.start(where)
    print(f"up in {time.monotonic() - t0:.1f}s; export SLURM_CONF={c.conf}; Ctrl-C stops it", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        c.stop()
        print("left running:", c.leftovers() or "nothing", flush=True)
