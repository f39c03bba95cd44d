"""Before a sweep across nodes pays for its first run: the link measured between a
cluster's members when it was provisioned (remote/cluster_link.py, kept in the ledger),
put through the performance model, says what more nodes would give each workload.

For every point of the sweep that spans K > 1 nodes: the slowest link measured from the
head to the other K-1 members the point uses is the network the gradient all-reduce
crosses (predict/links.between_machines, a measured figure); the model predicts the
throughput at K nodes and at one node of the same GPUs per node, and their ratio is the
node scaling ("link 95 Mb/s measured: 2 nodes would run resnet-ddp at 0.3x of one node
(predicted)"). Where some point is predicted slower than one node the user is asked
before the sweep starts; under --yes it goes on and says so in one line; with no one
to ask and no --yes nothing runs (LinkRefused). A "no" keeps the one-node points.

No basis (a CPU standing in for GPUs, a user's script, a GPU type the tables do not
know) is said, not guessed: such a point is never called slower.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gpubench.errors import UsageError
from gpubench.launch.base import Machine, SweepPoint
from gpubench.predict.advise import Config, Work, predict
from gpubench.predict.subject import NoSubject, suite_subject
from gpubench.providers.common import Offer
from gpubench.remote.cluster import ClusterHosts
from gpubench.sweep.run import Ask

ONE_UNIT = Work(1.0, "one unit")     # only throughputs are compared: any amount of work does


class LinkRefused(UsageError):
    """More nodes are predicted slower than one, and no one agreed to run them."""


@dataclass(frozen=True)
class NodeForecast:
    """One multi-node point of one workload against one node of the same GPUs per node."""

    workload: str
    point: SweepPoint
    mbit_s: float                # the slowest link measured among the point's nodes
    ratio: float | None          # predicted throughput at the point over one node's; None: no basis
    why_not: str = ""            # why there is no ratio

    @property
    def slower(self) -> bool:
        return self.ratio is not None and self.ratio < 1.0

    def line(self) -> str:
        head = f"link {say_rate(self.mbit_s)} measured: {say_nodes(self.point)}"
        if self.ratio is None:
            return f"{head} of {self.workload}: no prediction ({self.why_not})"
        return f"{head} would run {self.workload} at {say_ratio(self.ratio)} of one node (predicted)"


@dataclass(frozen=True)
class LinkCheck:
    forecasts: tuple[NodeForecast, ...]
    unmeasured: str = ""         # why no link is known, where none is

    @property
    def slower(self) -> tuple[NodeForecast, ...]:
        return tuple(f for f in self.forecasts if f.slower)

    def lines(self) -> list[str]:
        if self.unmeasured:
            return [f"node scaling not predicted: {self.unmeasured}"]
        return [f.line() for f in self.forecasts]

    def _worst(self) -> NodeForecast:
        return min(self.slower, key=lambda f: f.ratio)

    def question(self) -> str:
        w = self._worst()
        return (f"Over the {say_rate(w.mbit_s)} link measured, {say_nodes(w.point)} would run "
                f"{w.workload} at {say_ratio(w.ratio)} of one node (predicted). Run the multi-node "
                f"points anyway (no: one node only)?")

    def going_on(self) -> str:
        w = self._worst()
        return (f"going on (--yes): over the {say_rate(w.mbit_s)} link measured, {say_nodes(w.point)} "
                f"are predicted to run {w.workload} at {say_ratio(w.ratio)} of one node")

    def refusal(self) -> str:
        w = self._worst()
        return (f"not run: over the {say_rate(w.mbit_s)} link measured, {say_nodes(w.point)} would "
                f"run {w.workload} at {say_ratio(w.ratio)} of one node (predicted); pass --yes to "
                f"run anyway, or --nodes 1")


def say_rate(mbit_s: float) -> str:
    """'95 Mb/s', '9.4 Gb/s', '0.5 Mb/s'."""
    if mbit_s >= 1000:
        return f"{mbit_s / 1000:.1f} Gb/s"
    return f"{mbit_s:.0f} Mb/s" if mbit_s >= 10 else f"{mbit_s:.2g} Mb/s"


def say_ratio(ratio: float) -> str:
    """'0.3x', '1.8x'; two significant digits below a tenth ('0.0052x')."""
    return f"{ratio:.1f}x" if ratio >= 0.095 else f"{ratio:.2g}x"


def say_nodes(point: SweepPoint) -> str:
    per = "" if point.procs_per_node == 1 else f" x {point.procs_per_node} gpus"
    return f"{point.nodes} nodes{per}"


def measured_mbit_s(cluster: ClusterHosts, nodes: int) -> float | None:
    """The slowest head -> member link measured among the first `nodes` members (the
    ring crosses every one of them); None where one of them has no measure."""
    rates = []
    for node in cluster.nodes[1:nodes]:
        gbps = (node.link or {}).get("gbps")
        if not isinstance(gbps, (int, float)) or isinstance(gbps, bool) or gbps <= 0:
            return None
        rates.append(gbps * 1000.0)
    return min(rates) if rates else None


def _unmeasured(cluster: ClusterHosts) -> str:
    errors = {str((n.link or {}).get("error")) for n in cluster.nodes[1:] if (n.link or {}).get("error")}
    if errors:
        return f"the link between the nodes was not measured ({'; '.join(sorted(errors))})"
    return "the link between the nodes was not measured when the cluster was provisioned"


def forecast(workload: str, args: list[str], machine: Machine, point: SweepPoint, mbit_s: float,
             records: list[dict]) -> NodeForecast:
    """The point's predicted throughput over one node's, over a link of `mbit_s`."""
    def none(why: str) -> NodeForecast:
        return NodeForecast(workload, point, mbit_s, None, why)

    if machine.accelerator != "cuda" or machine.gpu_count <= 0:
        return none("processes on a CPU: the model predicts GPUs")
    try:
        subject = suite_subject(workload, tuple(args), records)
    except NoSubject:
        return none("nothing is known of the workload at these arguments")
    offer = Offer(machine.provider, "", machine.gpu_name, machine.gpu_count, machine.price_per_hour or 0.0)
    many = predict(subject, Config(offer, point.world_size, point.nodes, 0.0), records, ONE_UNIT, mbit_s)
    one = predict(subject, Config(offer, point.procs_per_node, 1, 0.0), records, ONE_UNIT)
    if not (many.has_figure and one.has_figure):
        return none(many.left_out or one.left_out or "no basis")
    return NodeForecast(workload, point, mbit_s, many.throughput / one.throughput)


def check(cluster: ClusterHosts, machine: Machine, points: list[SweepPoint],
          workloads: list[tuple[str, list[str]]], records: list[dict]) -> LinkCheck | None:
    """The node scaling of every multi-node point of every workload; None where no
    point spans nodes (nothing crosses the network)."""
    multi = [p for p in points if p.nodes > 1]
    if not multi:
        return None
    out = []
    for point in multi:
        rate = measured_mbit_s(cluster, point.nodes)
        if rate is None:
            return LinkCheck((), _unmeasured(cluster))
        out += [forecast(name, args, machine, point, rate, records) for name, args in workloads]
    return LinkCheck(tuple(out))


def settle(checked: LinkCheck | None, points: list[SweepPoint], yes: bool, ask: Ask | None,
           say: Callable[[str], None]) -> list[SweepPoint]:
    """The points to run, the check said first: all of them where no point is predicted
    slower than one node, under `yes` (said in one line), or when `ask` agrees; the
    one-node points when it does not. With no one to ask and no `yes`: LinkRefused."""
    if checked is None:
        return points
    for line in checked.lines():
        say(line)
    if not checked.slower:
        return points
    if yes:
        say(checked.going_on())
        return points
    if ask is None:
        raise LinkRefused(checked.refusal())
    if ask(checked.question()):
        return points
    kept = [p for p in points if p.nodes == 1]
    if not kept:
        raise LinkRefused("not run: the multi-node points were declined and no one-node point was asked for")
    say(f"multi-node points left out: running {', '.join(p.describe() for p in kept)} only")
    return kept


def points_to_run(cluster: ClusterHosts, machine: Machine, points: list[SweepPoint],
                  workloads: list[tuple[str, list[str]]], results, yes: bool, ask: Ask | None,
                  say: Callable[[str], None]) -> list[SweepPoint]:
    """`check` against the records in `results` (and the reference records), then `settle`."""
    from gpubench.predict.records import records_for_prediction

    records = records_for_prediction(results)[0]
    return settle(check(cluster, machine, points, workloads, records), points, yes, ask, say)
