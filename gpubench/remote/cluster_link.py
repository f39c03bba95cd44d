"""The link between a cluster's head and each other member, measured once it is ready.

No iperf (a rented image may lack it): a python3 receiver is started over SSH on the
member, listening on a port the members talk on (mapped, where the provider maps
ports); a python3 sender on the head connects to it at the address the head reaches
it at over their joining network, sends for a few seconds, closes its side, and reads
back how many bytes the receiver counted and over how long. Throughput is the
receiver's count over the receiver's time, so what sat in socket buffers is not
counted as sent. Every step has a deadline: the receiver gives up after LIMIT_S, the
sender's connect and its whole run are bounded, and a failure is a line saying why,
never an error that stops the cluster.

The figure is kept in the member's ledger row, in the JSON of its `gate` column
(the machine's measured facts, beside the preflight's) under "link", so `run --on
CLUSTER` can put it in the records later.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

from gpubench.remote.cluster import LOOPBACK, PRIVATE, ClusterHosts, ClusterNode
from gpubench.remote.connection import ConnectOptions, SshConnection
from gpubench.remote.errors import SshError

LINK_PORT = 29510      # the last of the cluster's ports (cluster_provision.CLUSTER_PORTS)
SEND_S = 3.0           # how long the head sends
LIMIT_S = 30.0         # the most any one measurement may take
CHUNK = 1 << 20

RECEIVER = """\
import json, socket, sys, time
port, limit = int(sys.argv[1]), float(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen(1)
s.settimeout(limit)
print("listening", flush=True)
c, _ = s.accept()
c.settimeout(limit)
n, start, end = 0, None, None
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    if start is None:
        start = time.monotonic()
    n += len(b)
    end = time.monotonic()
c.sendall(json.dumps({"bytes": n, "seconds": (end - start) if start else 0.0}).encode() + b"\\n")
c.close()
"""

SENDER = """\
import json, socket, sys, time
host, port, seconds, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
deadline = time.monotonic() + 10
while True:
    try:
        s = socket.create_connection((host, port), timeout=5)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
s.settimeout(limit)
buf = b"\\0" * (1 << 20)
end = time.monotonic() + seconds
while time.monotonic() < end:
    s.sendall(buf)
s.shutdown(socket.SHUT_WR)
print(s.makefile().readline().strip(), flush=True)
"""


@dataclass(frozen=True)
class LinkMeasure:
    """The head -> member `node` link: its throughput, or why it was not measured."""

    node: int
    network: str                   # private, public, loopback
    address: str                   # where the head reached the member
    gbps: float | None = None      # Gb/s (1e9 bits), None when not measured
    seconds: float | None = None   # over how long the receiver counted
    error: str | None = None

    def line(self) -> str:
        if self.gbps is None:
            return f"link head->node{self.node}: not measured ({self.error})"
        return f"link head->node{self.node}: {self.gbps:.1f} Gb/s over {network_words(self.network)}"

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, found: dict) -> "LinkMeasure | None":
        try:
            return cls(**{k: found[k] for k in ("node", "network", "address", "gbps", "seconds", "error")})
        except (KeyError, TypeError):
            return None


def network_words(network: str) -> str:
    return {PRIVATE: "the private network", LOOPBACK: "this machine's loopback"}.get(
        network, "the public internet")


def measure_links(hosts: ClusterHosts, known_hosts: Path, python: str = "python3",
                  seconds: float = SEND_S) -> list[LinkMeasure]:
    """Head -> each other member, one after the other (at once they would share the
    head's uplink). Where every member is on this machine's loopback there is no
    link to measure."""
    network = hosts.network
    members = [n for n in hosts.nodes if n.index != hosts.head.index]
    if not members:
        return []
    if network == LOOPBACK:
        return [LinkMeasure(n.index, network, n.host.target.host,
                            error="every member is on this machine's loopback") for n in members]
    options = ConnectOptions(wait=30.0)
    head = SshConnection(hosts.head.host.target, known_hosts, options)
    try:
        head.open()
    except (SshError, OSError) as e:
        return [LinkMeasure(n.index, network, n.address_for_peers(network),
                            error=f"cannot reach the head: {e}") for n in members]
    try:
        return [_measure(head, node, network, known_hosts, options, python, seconds)
                for node in members]
    finally:
        head.close()


def _measure(head: SshConnection, node: ClusterNode, network: str, known_hosts: Path,
             options: ConnectOptions, python: str, seconds: float) -> LinkMeasure:
    q = shlex.quote
    address = node.address_for_peers(network)
    port = node.port_for_peers(LINK_PORT)
    said = LinkMeasure(node.index, network, address)
    member = SshConnection(node.host.target, known_hosts, options)
    try:
        member.open()
        member.hold(f"timeout {LIMIT_S:.0f} {python} -c {q(RECEIVER)} {LINK_PORT} {LIMIT_S:.0f}",
                    "listening", timeout=LIMIT_S)
        code, text = head.capture(f"timeout {LIMIT_S:.0f} {python} -c {q(SENDER)} {q(address)} {port} "
                                  f"{seconds:g} {LIMIT_S:.0f}", LIMIT_S + 10)
        if code != 0:
            last = (text.strip().splitlines() or [f"exit code {code}"])[-1]
            return _with_error(said, f"the sender on the head failed: {last}")
        found = json.loads((text.strip().splitlines() or ["{}"])[-1])
        secs = float(found["seconds"])
        if secs <= 0:
            return _with_error(said, "nothing arrived")
        return LinkMeasure(node.index, network, address, round(found["bytes"] * 8 / secs / 1e9, 3),
                           round(secs, 3))
    except (SshError, OSError, ValueError, KeyError, TypeError) as e:
        return _with_error(said, str(e).splitlines()[0] if str(e) else type(e).__name__)
    finally:
        member.close()


def _with_error(said: LinkMeasure, why: str) -> LinkMeasure:
    return LinkMeasure(said.node, said.network, said.address, error=why)


# -- kept in the ledger, read back for records -------------------------------------

def keep(ledger, entry, link: LinkMeasure) -> None:
    """The measure in the member's row: its `gate` JSON, under "link"."""
    facts = {**entry.gate_facts, "link": link.as_json()}
    ledger.update(entry.row_id, gate=json.dumps(facts, sort_keys=True))


def record_fields(hosts: ClusterHosts) -> dict:
    """What a run's records carry of the links: those measured from this run's head
    to its other members at provisioning (the measure is head -> member; a run whose
    head is another member carries none)."""
    if hosts.head.index != 0:
        return {}
    known = [n.link for n in hosts.nodes[1:] if n.link]
    return {"links": known} if known else {}
