"""The cluster launcher: a sweep point of K nodes runs torchrun with the c10d
rendezvous on the first K live members of a cluster of rented machines, all at
once over SSH, head first.

Each member is driven by the SSH launcher's own machinery (gpubench.launch.ssh:
its session, rsync, lease, run markers, tagged stop, the files collected after a
run), one paramiko connection per member, and one thread per member streams its
torchrun's output with a `[nodeI]` prefix, its GPU sampler's lines among it (the SSH
launcher's, beside each member's torchrun: every GPU of every node, for the live view). Fabric's ThreadingGroup would do the
fan-out too, but it brings a second SSH layer (its own connections, host-key
handling and reconnects) beside the one every other launcher uses; a thread per
existing connection is all the fan-out needs.

A run ends for every member as soon as one member fails: its SSH link drops or
its torchrun exits non-zero. The others are stopped through their own
connections; what they print as they stop (torch's SignalException traceback) is
not streamed, nor taken for the failure, which is the first member's. A member
whose link dropped (and does not answer again at once) is lost for the rest of
the sweep: the launcher's Machine then spans fewer nodes
and the sweep skips the points that no longer fit. Nothing waits for ever: the
rendezvous, each store read and each collective have timeouts (cluster_torchrun),
a silent link is noticed within ConnectOptions.dead_link_s, and every member's
run sits under the remote `timeout` of the SSH launcher.
"""

from __future__ import annotations

import collections
import json
import queue
import shlex
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpubench.errors import UsageError
from gpubench.remote import cluster_link
from gpubench.remote.pull import RunFiles
from gpubench.onhost import cluster_probe
from gpubench.launch import nccl_log
from gpubench.launch.gpu_sampling import is_live_line
from gpubench.launch.base import (Launcher, LineSink, Machine, NodeSpan, RunOutcome, SweepPoint, record_args,
                                  script_argv)
from gpubench.launch.cluster_torchrun import (FROM_MACHINE, FROM_ROUTE, PG_TIMEOUT_ENV, NodeFacts, Rendezvous,
                                              comm_settings, endpoint_for, socket_ifname, torchrun_command)
from gpubench.launch.failures import Failure, RunFacts, explain
from gpubench.launch.ssh import (LOCAL_MARGIN_S, TIMEOUT_EXIT, SshLauncher, connect, machine_for,
                                 record_path, remote_cwd, remote_probe, remote_script)
from gpubench.remote.cluster import ClusterHosts, ClusterNode, gpu_disagreement
from gpubench.remote.connection import ConnectOptions, StreamResult
from gpubench.remote.errors import ConnectionLostError, HostUnreachableError, SshError
from gpubench.remote.session import RemoteLayout, SessionOptions
from gpubench.suite import WorkloadRef

PROBE = Path(cluster_probe.__file__).read_text()
LOST = "node lost"  # Failure.kind of a run that lost a member: not one that repeats
TAIL_LINES = 400
STOP_WAIT_S = 30.0  # stopping the other members, each over its own connection


class ClusterError(UsageError):
    """A cluster gpubench will not run on (members that differ, too few nodes)."""


@dataclass(frozen=True)
class ClusterOptions:
    """What only the cluster launcher reads (LaunchOptions.scheme_options)."""

    rendezvous: Rendezvous = Rendezvous()
    keepalive_s: int = 5        # a quiet link is probed this often...
    dead_link_s: float = 30.0   # ...and dropped once unanswered this long
    rejoin_wait_s: float = 5.0  # a member whose link dropped gets one quick reconnect


DEFAULTS = ClusterOptions()


@dataclass
class Member:
    node: ClusterNode
    launcher: SshLauncher
    lost: str | None = None  # why it is out of the sweep
    facts: dict[str, NodeFacts] = field(default_factory=dict)  # head address -> what it said

    @property
    def label(self) -> str:
        return f"node{self.node.index}"

    def describe(self) -> str:
        return f"node {self.node.index} ({self.node.host.target.host})"


@dataclass
class NodeRun:
    """One member's part of one run."""

    member: Member
    rank: int  # its place in this run: 0 = the run's head
    tag: str   # the run id on this member (its files, its processes' GPUBENCH_RUN)
    command: list[str]
    env: dict[str, str]
    cwd: str = "."  # relative to the remote base
    gpus: list[int] | None = None  # its GPUs, watched beside it (None: no nvidia-smi there)
    result: StreamResult | None = None
    error: BaseException | None = None
    stopped: bool = False  # gpubench stopped it (another member failed, Ctrl-C)
    unshown: int = 0       # lines it printed once stopped: how it took the stop, not the failure

    @property
    def link_lost(self) -> bool:
        return isinstance(self.error, ConnectionLostError)

    @property
    def failed(self) -> bool:
        return self.error is not None or self.result is None or self.result.exit_code != 0


class ClusterLauncher(Launcher):
    """torchrun c10d across a cluster's members; made by open_cluster, connected."""

    def __init__(self, cluster: ClusterHosts, members: list[Member], machine: Machine,
                 options: ClusterOptions, echo: LineSink) -> None:
        self.cluster = cluster
        self.members = members
        self._machine = machine
        self.options = options
        self.echo = echo

    @property
    def live(self) -> list[Member]:
        return [m for m in self.members if m.lost is None]

    def machine(self) -> Machine:
        return replace(self._machine, max_nodes=len(self.live))

    def prepare(self, workload: WorkloadRef) -> None:
        """The workload on every live member, one after the other (rsync sends only
        what changed; members that share a filesystem are not raced)."""
        for member in self.live:
            member.launcher.prepare(workload)

    def files_at(self, workload: WorkloadRef) -> RunFiles | None:
        """The head's: rank 0, which saves what a script saves, runs there."""
        live = self.live
        return live[0].launcher.files_at(workload) if live else None

    def prepare_log(self) -> list[str]:
        return [line for member in self.members for line in member.launcher.prepare_log()]

    def close(self) -> None:
        for member in self.members:
            member.launcher.close()

    # ------------------------------------------------------------------ one run
    def run(self, workload: WorkloadRef, point: SweepPoint, workload_args: list[str],
            on_line: LineSink, timeout: float) -> RunOutcome:
        live = self.live
        if point.nodes > len(live):
            raise ValueError(f"{point.nodes} nodes: {self.cluster.name} has {len(live)} live")
        chosen = live[:point.nodes]
        hosts = ClusterHosts(self.cluster.name, tuple(m.node for m in chosen))
        network = hosts.network
        head = chosen[0].node
        head_address = head.address_for_peers(network)
        run_id = uuid.uuid4().hex
        parts = [self._node_run(m, i, workload, point, workload_args, hosts, network, run_id)
                 for i, m in enumerate(chosen)]
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        start = time.perf_counter()
        self._run_all(parts, timeout, on_line, tail)
        elapsed = time.perf_counter() - start

        for part in parts:
            if part.link_lost:
                self._lose_or_rejoin(part.member, on_line)
        for part in parts:  # run --trace: every member's ranks' files, into one folder
            if not part.member.lost:
                part.member.launcher.bring_traces(workload, part.tag, on_line, said=not part.failed)
        found = {part.rank: self._collect(part) for part in parts}
        record_rank = next((r for r, f in found.items() if f.get("record")), None)
        record = found[record_rank]["record"] if record_rank is not None else None
        failure = self._failure(parts, timeout)
        code = 0 if failure is None else self._code(parts)
        head_part = parts[0]
        measured = (head_part.member.launcher._measured(workload, head_part.env, found[0])
                    if found[0] else {})
        measured.pop(nccl_log.LOGS, None)  # what NCCL said on every member, not the head's alone
        measured.update(nccl_log.collected({p.member.label: found[p.rank].get("nccl", "")
                                            for p in parts}))
        endpoint = endpoint_for(head, network, self.options.rendezvous.port, on_head=False)
        settings = [self._comm(p, head_address) for p in parts]
        fields = {
            "node_addresses": [p.member.node.address_for_peers(network) for p in parts],
            "node_network": network,
            "rendezvous": self.options.rendezvous.as_record(endpoint, run_id),
            "collective_timeout_s": float(self.options.rendezvous.collective_timeout),
            "comm_settings": [c.as_record(p.rank, p.member.node.address_for_peers(network), head_address)
                              for c, p in zip(settings, parts)],
            "socket_ifname": socket_ifname(settings),
            "interconnect": [self._interconnect(p, head_address) for p in parts],
            "rank0_node": parts[record_rank].member.node.index if record_rank is not None else None,
            "lost_nodes": [p.member.describe() for p in parts if p.link_lost and p.member.lost],
            **cluster_link.record_fields(hosts),
        }
        shown = [f"{self._where(workload, head_part.member)}/{arg}"
                 if arg == remote_script(workload) else arg for arg in head_part.command]
        shown = ["RECORD" if arg == record_path(head_part.tag) else arg for arg in shown]
        return RunOutcome(code, {**(record or {}), **fields}, shown, elapsed, failure.error if failure else None, list(tail),
                          None, measured, failure)

    def _node_run(self, member: Member, rank: int, workload: WorkloadRef, point: SweepPoint,
                  workload_args: list[str], hosts: ClusterHosts, network: str,
                  run_id: str) -> NodeRun:
        head = hosts.head
        head_address = head.address_for_peers(network)
        tag = f"{run_id}n{rank}"
        launcher = member.launcher
        settings = self._comm(NodeRun(member, rank, tag, [], {}), head_address)
        env = {**launcher.environment(point.procs_per_node), **settings.env_set,
               **launcher.nccl_environment(tag, settings.in_force),  # NCCL's word, per member
               **launcher.trace_environment(workload, tag),  # run --trace: its ranks' files
               PG_TIMEOUT_ENV: str(self.options.rendezvous.collective_timeout)}
        # a user's script runs under the probe (launch/base.py script_argv), as on one node
        script, *probed = script_argv(workload, remote_script(workload), remote_probe(workload))
        command = torchrun_command(
            launcher._session.python, script,
            [*probed, *record_args(workload, record_path(tag)), *workload_args],
            nnodes=point.nodes, procs_per_node=point.procs_per_node, node_rank=rank,
            endpoint=endpoint_for(head, network, self.options.rendezvous.port, on_head=rank == 0),
            run_id=run_id, local_addr=member.node.address_for_peers(network),
            rendezvous=self.options.rendezvous)
        return NodeRun(member, rank, tag, command, env, remote_cwd(workload),
                       launcher.watched_gpus(point.procs_per_node))

    def _run_all(self, parts: list[NodeRun], timeout: float, on_line: LineSink,
                 tail: collections.deque) -> None:
        """Start every member's torchrun at once and wait for them all; the first to
        fail has the others stopped. Ctrl-C stops every member, then goes on up."""
        lock = threading.Lock()
        ended: queue.Queue[NodeRun] = queue.Queue()

        def stream(part: NodeRun) -> None:
            prefix = f"[{part.member.label}] "

            def sink(line: str) -> None:
                with lock:
                    if is_live_line(line):  # its GPUs: shown while it runs, never its tail
                        if not part.stopped:
                            on_line(prefix + line)
                        return
                    if part.stopped:  # torch's SignalException traceback and the like
                        part.unshown += 1
                        return
                    tail.append(prefix + line)
                    on_line(prefix + line)

            launcher = part.member.launcher
            line = launcher.shell_line(part.tag, part.command, part.env, timeout, part.cwd, part.gpus)
            try:
                part.result = launcher._session.conn.stream(line, sink, timeout + LOCAL_MARGIN_S,
                                                            untailed=is_live_line)
            except BaseException as e:  # a dropped link above all; reported through the part
                part.error = e
            finally:
                ended.put(part)

        threads = [threading.Thread(target=stream, args=(p,), name=f"run-{p.member.label}",
                                    daemon=True) for p in parts]
        for thread in threads:
            thread.start()
        # every stream ends by its own deadline or a dead link's; this bounds the wait besides
        deadline = time.monotonic() + timeout + LOCAL_MARGIN_S + self.options.dead_link_s + 60
        waiting, stopped = len(parts), False
        try:
            while waiting and time.monotonic() < deadline:
                try:
                    part = ended.get(timeout=0.5)
                except queue.Empty:
                    continue
                waiting -= 1
                if part.failed and not stopped:
                    stopped = True
                    others = [p for p in parts if p is not part]
                    with lock:
                        on_line(f"{part.member.describe()} {_how_it_ended(part)}; "
                                "stopping the run on every node")
                        for other in others:
                            other.stopped = other.result is None and other.error is None
                    self._stop(others)
        except BaseException:  # Ctrl-C: nothing of the run may outlive us on any node
            with lock:
                for part in parts:
                    part.stopped = True
            self._stop(parts)
            raise
        for part in parts:
            if part.unshown:
                on_line(f"{part.member.describe()} stopped by gpubench; the {part.unshown} "
                        "line(s) it printed as it stopped are not shown (torch's report of "
                        "the stop signal, not the failure)")

    def _stop(self, parts: list[NodeRun]) -> None:
        """Stop the given members' runs, each through its own connection, at once."""
        def stop(part: NodeRun) -> None:
            try:
                part.member.launcher.kill([part.tag])
            except (SshError, OSError):
                pass  # its link is gone too: its remote `timeout` and collective timeout end it

        threads = [threading.Thread(target=stop, args=(p,), daemon=True) for p in parts]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + STOP_WAIT_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _lose_or_rejoin(self, member: Member, on_line: LineSink) -> None:
        """A member whose link dropped gets one quick reconnect; one that does not
        answer is out of the sweep."""
        session = member.launcher._session
        try:
            session.conn.open(wait=self.options.rejoin_wait_s)
            member.launcher.begin()  # also stops the run the dropped link orphaned
            on_line(f"{member.describe()} answers again; it stays in the sweep")
        except (SshError, OSError) as e:
            member.lost = f"its SSH link dropped mid-run and it did not answer again ({e})"
            self.echo(f"{self.cluster.name}: {member.describe()} lost: {member.lost}; "
                      f"the sweep goes on with {len(self.live)} node(s)")

    def _collect(self, part: NodeRun) -> dict:
        """What the run left on a member (record, exit status, load figures), unless
        its link is gone."""
        if part.member.lost:
            return {}
        try:
            return part.member.launcher._collect(part.tag, wanted=True, stop=True)
        except (SshError, OSError):
            return {}

    def _failure(self, parts: list[NodeRun], timeout: float) -> Failure | None:
        """Why the run failed, in one line: a lost member first (the others failed
        because of it), then the first member whose torchrun failed."""
        lost = [p for p in parts if p.link_lost]
        if lost:
            names = ", ".join(p.member.describe() for p in lost)
            return Failure(f"lost {names}: its SSH link dropped mid-run; the run was stopped on "
                           "every node", LOST)
        timed_out = [p for p in parts if p.result is not None and
                     (p.result.timed_out or p.result.exit_code == TIMEOUT_EXIT)]
        if timed_out:
            return Failure(f"timed out after {timeout:.0f}s", "timeout")
        bad = [p for p in parts if p.failed]
        if not bad:
            return None
        first = _first_to_fail(bad)
        if first.error is not None:
            return Failure(f"{first.member.describe()}: {first.error}", "failed")
        own = list(first.result.tail) if first.result is not None else []
        code = first.result.exit_code if first.result else -9
        explained = explain(own, RunFacts(code if code is not None else -9,
                                          exit_status_known=code != -1, remote=True))
        return replace(explained, error=f"{first.member.describe()}: {explained.error}")

    @staticmethod
    def _code(parts: list[NodeRun]) -> int:
        for part in sorted(parts, key=lambda p: p.stopped):  # the failed member's own first
            if part.result is not None and part.result.exit_code not in (0, None):
                return part.result.exit_code
        return -9

    def _comm(self, part: NodeRun, head_address: str):
        return comm_settings(self._facts(part.member, head_address))

    def _facts(self, member: Member, head_address: str) -> NodeFacts:
        """What the member says of its route to `head_address` and its interconnect;
        asked once per head address."""
        if head_address not in member.facts:
            q = shlex.quote
            launcher = member.launcher
            try:
                _, text = launcher._session.conn.capture(
                    f"{launcher._session.python} -c {q(PROBE)} {q(head_address)}", 60)
                found = json.loads((text.strip().splitlines() or ["{}"])[-1])
            except (SshError, OSError, ValueError):
                found = {}
            member.facts[head_address] = NodeFacts.from_probe(found if isinstance(found, dict) else {})
            self.echo(f"[{member.label}] {_binding(comm_settings(member.facts[head_address]), head_address)}")
        return member.facts[head_address]

    def _interconnect(self, part: NodeRun, head_address: str) -> dict:
        facts = self._facts(part.member, head_address)
        return {"node": part.rank, "nvidia_smi_topo": facts.nvidia_smi_topo or "absent",
                "ibstat": facts.ibstat or "absent"}

    @staticmethod
    def _where(workload: WorkloadRef, member: Member) -> str:
        base = member.launcher._session.layout.base
        cwd = remote_cwd(workload)
        return base if cwd == "." else f"{base}/{cwd}"


def _binding(settings, head_address: str) -> str:
    """'collectives bind to ens1 (the route to the head's address 10.65.0.2)', once per member."""
    name = socket_ifname([settings])
    if name is None:
        return f"collectives bind where torch chooses ({settings.interface_from.removeprefix('none: ')})"
    how = {FROM_ROUTE: f"the route to the head's address {head_address}",
           FROM_MACHINE: "the machine's own environment"}.get(settings.interface_from, settings.interface_from)
    return f"collectives bind to {name} ({how})"


def _how_it_ended(part: NodeRun) -> str:
    if part.link_lost:
        return "lost its SSH link"
    if part.error is not None:
        return f"failed: {part.error}"
    if part.result is not None and part.result.timed_out:
        return "ran past the timeout"
    code = part.result.exit_code if part.result else None
    return f"torchrun exited with code {code}"


def _first_to_fail(bad: list[NodeRun]) -> NodeRun:
    """The member whose own failure started it: one that exited on its own rather
    than one stopped by gpubench (marked so, or SIGTERM's 143, SIGKILL's 137, no
    status; torchrun stopped by SIGTERM exits 1 after torch's SignalException)."""
    stopped = (143, 137, -1, None)
    own = [p for p in bad if p.result is not None and p.result.exit_code not in stopped]
    return ([p for p in own if not p.stopped] or own or bad)[0]


# ---------------------------------------------------------------------- opening
def open_cluster(cluster: ClusterHosts, known_hosts: Path, python: str, remote_dir: str,
                 connect_wait: float, echo: LineSink,
                 options: ClusterOptions | None = None) -> ClusterLauncher:
    """Connect to every member (head first), check that they are alike, and return
    the launcher. Members that differ in GPUs are refused before any connection."""
    options = options or DEFAULTS
    differ = cluster.disagreement()
    if differ:
        raise ClusterError(f"--on {cluster.name}: {differ}; gpubench runs only on alike members")
    session = SessionOptions(python, RemoteLayout(remote_dir),
                             ConnectOptions(wait=connect_wait, keepalive_s=options.keepalive_s,
                                            dead_link_s=options.dead_link_s), reconnects=1)
    members: list[Member] = []
    try:
        for node in cluster.nodes:
            def said(line: str, label: str = f"node{node.index}") -> None:
                echo(f"[{label}] {line}")
            try:
                launcher = connect(node.host, known_hosts, session, said)
            except HostUnreachableError as e:
                raise HostUnreachableError(f"{cluster.name} node {node.index}: {e}") from None
            members.append(Member(node, launcher))
        machines = [machine_for(m.node.host, m.launcher._session.env) for m in members]
        differ = gpu_disagreement([(m.node.index, machine.gpu_name, machine.gpu_count)
                                   for m, machine in zip(members, machines)])
        if differ:
            raise ClusterError(f"--on {cluster.name}: {differ}; gpubench runs only on alike members")
    except BaseException:
        for member in members:
            member.launcher.close()
        raise
    machine = replace(machines[0], max_nodes=cluster.size,
                      span=NodeSpan(f"cluster {cluster.name}", gpus_per_node=True))
    echo(f"{cluster.name}: {cluster.size} node(s) of {machine.instance_type}, joined by the "
         f"{cluster.network} network; rendezvous at "
         f"{endpoint_for(cluster.head, cluster.network, options.rendezvous.port, on_head=False)}")
    return ClusterLauncher(cluster, members, machine, options, echo)
