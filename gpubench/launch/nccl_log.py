"""What NCCL says of the network a GPU run used: the environment that has it say it
into a file per host and process, and the parser of what it said.

A run on GPUs gets NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,NET and
NCCL_DEBUG_FILE=<prefix>.%h.%p (NCCL writes %h as the host name, %p as the pid):
its console stays as it was (NCCL prints nothing there unless asked), and the
files say, per host, which transport each channel took (P2P over NVLink or PCIe,
SHM, NET over InfiniBand/RoCE, an EFA plugin or TCP sockets), which network
NCCL chose and over which devices, and why it did not take a faster one. A user
who set NCCL_DEBUG (or NCCL_DEBUG_FILE) themselves keeps their setting and gets
no files. A CPU run (gloo) gets nothing.

The launchers collect the files with the run's other files (as text, per node:
`collected`), and the sweep puts `record_fields` of them on the record
(record_schema: nccl_transport, nccl_net, nccl_fallback, nccl_fallback_nodes,
nccl_hosts, nccl_version). A host "fell back to TCP sockets" when its channels
crossed the network over NET/Socket and NCCL said why no faster fabric served:
its InfiniBand transport found no device (or no verbs library), a network plugin
(aws-ofi-nccl for EFA, an IB plugin) failed to load or to initialise, or
InfiniBand devices were listed and sockets chosen all the same. Sockets chosen
by the environment (NCCL_IB_DISABLE=1, NCCL_NET=Socket) with nothing to say of a
fabric are not a fall-back; a host whose channels never left it (one node over
NVLink) is not one either, whatever network NCCL initialised.

Pure Python, the standard library only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

# The launchers' key in RunOutcome.measured for the collected text: {node label: text};
# not a record field (the sweep turns it into record_fields and drops it).
LOGS = "nccl_logs"

DEBUG_VARS = ("NCCL_DEBUG", "NCCL_DEBUG_FILE")  # the user's own: gpubench sets nothing
SUBSYS = "INIT,NET"
SOCKET = "Socket"

# host:pid:tid [dev] [file.cc:line ]NCCL INFO|WARN message (anywhere in a line:
# mpirun's "[1,0]<stdout>:" or a log service's timestamp may stand before it)
LINE = re.compile(r"(?P<host>[^\s:\[\]<>|]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
                  r"(?:\S+ )?NCCL (?P<level>INFO|WARN) (?P<msg>.*?)\s*$")
VERSION = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+\S*)")
# Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read; ... [send] via NET/IB/0/GDRDMA;
# older: Ring 00 : 15 -> 0 [receive] via NET/Socket/0, ... via direct shared memory
VIA = re.compile(r"^(?:Channel|Ring) \S+ : .* via (?P<via>.+)$")
NET_VIA = re.compile(r"^NET/(?P<net>[^/]+)/(?P<dev>\d+)")
COUNTS = re.compile(r"(\d+) (coll|collnet|nvls) channels")
USING_NETWORK = re.compile(r"^Using network (?P<net>.+)$")
# NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [RO]; OOB eth0:10.0.0.2<0>
# NET/Socket : Using [0]eth0:10.0.0.2<0> [1]ens5:10.1.0.2<0>
NET_USING = re.compile(r"^NET/(?P<net>\w+) ?: Using (?P<devices>.*?)(?:; OOB .*)?$")
DEVICE = re.compile(r"\[(?P<index>\d+)\](?P<name>\S+?)(?:<\d+>)?(?=\s|$)")
IB_MISSING = (re.compile(r"^(NET/IB ?: No device found)\.?$"),
              re.compile(r"^(Failed to open libibverbs\.so\S*)"),
              re.compile(r"^(Net/IB: call to devices\(\) returned 0 devices)", re.I))
PLUGIN_FAILED = (re.compile(r"^NET/Plugin ?: Plugin load \(\S+\) returned \d+ : (?P<why>.+)$"),
                 re.compile(r"^NET/Plugin ?: dlerror=(?P<why>.+?)(?: No plugin found.*)?$"),
                 re.compile(r"^NET/Plugin ?: Could not find:? (?P<why>\S+?)\.?(?: Using internal.*)?$"),
                 re.compile(r"^NET/Plugin ?: No plugin found \((?P<why>[^)]+)\)"))
PLUGIN_LOADED = (re.compile(r"^NET/Plugin ?: Loaded net plugin (?P<name>.+)$"),
                 re.compile(r"^NET/OFI (?:Initializing|Using) (?P<name>aws-ofi-nccl \S+)"),
                 re.compile(r"^P2P plugin (?P<name>\S+)$"))
OFI_PROVIDER = re.compile(r"^NET/OFI Selected [Pp]rovider is (?P<provider>[^\s,]+).*?"
                          r"\(found (?P<nics>\d+) nics?\)")
SET_BY_ENV = re.compile(r"^(?P<var>NCCL_IB_DISABLE|NCCL_NET) set by environment to (?P<value>.+?)\.?$")

ORDER = ("P2P", "NVLS", "SHM", "CollNet")  # the transports within a node, in the record's order


def environment(prefix: str | Path, uses_gpus: bool = True,
                environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables that have NCCL write what it chose into <prefix>.<host>.<pid>:
    none for a run without GPUs, and none where `environ` (gpubench's environment,
    os.environ) has NCCL_DEBUG or NCCL_DEBUG_FILE of the user's own; a user's
    NCCL_DEBUG_SUBSYS is kept as it is."""
    environ = os.environ if environ is None else environ
    if not uses_gpus or any(var in environ for var in DEBUG_VARS):
        return {}
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": f"{prefix}.%h.%p"}
    if "NCCL_DEBUG_SUBSYS" not in environ:
        env["NCCL_DEBUG_SUBSYS"] = SUBSYS
    return env


def read_files(prefix: str | Path) -> str:
    """The text of every <prefix>.* file on this machine (each process's), one after
    the other; '' where NCCL wrote none."""
    prefix = Path(prefix)
    texts = []
    for path in sorted(prefix.parent.glob(f"{prefix.name}.*")):
        try:
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return "".join(text if text.endswith("\n") else text + "\n" for text in texts if text)


def collected(texts: dict[str, str]) -> dict:
    """What a launcher adds to RunOutcome.measured: {LOGS: {node: text}} for the nodes
    whose NCCL said anything, else nothing."""
    said = {node: text for node, text in texts.items() if text and text.strip()}
    return {LOGS: said} if said else {}


@dataclass
class HostFacts:
    """What NCCL said on one host (all its processes together)."""

    host: str
    transports: set[str] = field(default_factory=set)  # "P2P", "SHM", "NET/IB", "NET/Socket", ...
    network: str | None = None  # the network NCCL chose: "IB", "Socket", "AWS Libfabric"
    devices: dict[str, dict[int, str]] = field(default_factory=dict)  # network -> index -> device
    used_devices: dict[str, set[int]] = field(default_factory=dict)  # network -> indices channels took
    ofi_provider: str | None = None  # "efa (4 NICs)"
    plugin: str | None = None  # the network plugin that loaded
    plugin_failed: str | None = None  # why a network plugin did not load
    ib_missing: str | None = None  # "NET/IB : No device found"
    set_by_env: dict[str, str] = field(default_factory=dict)  # NCCL_IB_DISABLE, NCCL_NET
    warnings: list[str] = field(default_factory=list)  # NCCL WARN messages, in order

    @property
    def transport(self) -> str:
        return join_transports(self.transports)

    @property
    def net(self) -> str | None:
        """The devices of the chosen network that the channels took (all it listed where no
        channel said): 'eth0', 'mlx5_0:1/IB, mlx5_3:1/IB', 'efa (4 NICs)'."""
        network = self.network or next((t[4:] for t in sorted(self.transports) if t.startswith("NET/")),
                                       None)
        if network is None:
            return None
        if self.ofi_provider and ("fabric" in network.lower() or network.upper() == "OFI"):
            return self.ofi_provider
        listed = self.devices.get(network) or (self.devices.get("IB") if network.startswith("IB") else None)
        if not listed:
            return None
        used = self.used_devices.get(network) or set()
        names = [name for index, name in sorted(listed.items()) if not used or index in used]
        names = names or [name for _, name in sorted(listed.items())]
        if network == SOCKET:
            names = [name.split(":", 1)[0] for name in names]  # the interface, not its address
        return ", ".join(dict.fromkeys(names))

    @property
    def crossed_on_sockets(self) -> bool:
        return "NET/Socket" in self.transports

    @property
    def fallback(self) -> str | None:
        """Why this host's channels went over TCP sockets where a faster fabric could
        have served them, in one line; None where they did not."""
        if not self.crossed_on_sockets:
            return None
        why = []
        ofi = [w for w in self.warnings if w.startswith("NET/OFI")]
        if ofi:
            failed = [w for w in ofi if "initializ" in w.lower()]
            found = f" ({self.ofi_provider} found)" if self.ofi_provider else ""
            why.append((failed or ofi)[0] + found)
        ib = self.devices.get("IB")
        if ib and self.set_by_env.get("NCCL_IB_DISABLE") != "1" and "NCCL_NET" not in self.set_by_env:
            why.append(f"NET/IB found {', '.join(ib[i] for i in sorted(ib))} but NCCL chose sockets")
        if self.plugin_failed and not ofi:
            why.append(f"no network plugin loaded ({self.plugin_failed})")
        if self.ib_missing and not ib:
            why.append(self.ib_missing)
        if not why:
            return None
        where = self.net
        return "; ".join(why) + (f"; the all-reduce ran over {where}" if where else "")

    def as_record(self) -> dict:
        return {"host": self.host, "transport": self.transport or None, "network": self.network,
                "net": self.net, "plugin": self.plugin, "fallback": self.fallback}


@dataclass
class NcclFacts:
    """What NCCL said in one text: its version and each host's facts, in the order seen."""

    version: str | None = None
    hosts: dict[str, HostFacts] = field(default_factory=dict)

    @property
    def said_anything(self) -> bool:
        return self.version is not None or bool(self.hosts)

    def fallbacks(self) -> list[HostFacts]:
        return [h for h in self.hosts.values() if h.fallback]


def join_transports(transports: set[str]) -> str:
    """'P2P+SHM+NET/IB': within a node first (P2P, NVLS, SHM, CollNet), then the networks,
    sockets last."""
    within = [t for t in ORDER if t in transports]
    nets = sorted(t for t in transports if t not in ORDER and t != "NET/Socket")
    return "+".join(within + nets + (["NET/Socket"] if "NET/Socket" in transports else []))


def parse(text: str) -> NcclFacts:
    """NCCL's INFO/WARN output (any of its versions' formats since 2.4) -> NcclFacts.
    Lines that are not NCCL's are passed over; a text with none gives empty facts."""
    facts = NcclFacts()
    for line in text.splitlines():
        if "NCCL" not in line:
            continue
        found = LINE.search(line)
        if found is None:  # the bare 'NCCL version 2.21.5+cuda12.4' of rank 0
            version = VERSION.search(line)
            if version and facts.version is None:
                facts.version = version.group("version")
            continue
        host = facts.hosts.setdefault(found.group("host"), HostFacts(found.group("host")))
        msg = found.group("msg")
        if found.group("level") == "WARN":
            host.warnings.append(msg)
            continue
        _read_info(facts, host, msg)
    return facts


def _read_info(facts: NcclFacts, host: HostFacts, msg: str) -> None:
    version = VERSION.match(msg)
    if version:
        facts.version = facts.version or version.group("version")
        return
    via = VIA.match(msg)
    if via:
        _read_via(host, via.group("via"))
        return
    for count, kind in COUNTS.findall(msg):
        if int(count) > 0 and kind in ("nvls", "collnet"):
            host.transports.add("NVLS" if kind == "nvls" else "CollNet")
    using = USING_NETWORK.match(msg)
    if using:
        host.network = using.group("net").strip()
        return
    listed = NET_USING.match(msg)
    if listed:
        net = listed.group("net")
        devices = {int(d.group("index")): d.group("name") for d in DEVICE.finditer(listed.group("devices"))}
        if devices:
            host.devices[net] = devices
        return
    for pattern in IB_MISSING:
        missing = pattern.match(msg)
        if missing:
            host.ib_missing = host.ib_missing or missing.group(1)
            return
    for pattern in PLUGIN_FAILED:
        failed = pattern.match(msg)
        if failed:
            host.plugin_failed = host.plugin_failed or _short(failed.group("why"))
            return
    for pattern in PLUGIN_LOADED:
        loaded = pattern.match(msg)
        if loaded:
            host.plugin = host.plugin or loaded.group("name").strip()
            return
    provider = OFI_PROVIDER.match(msg)
    if provider:
        host.ofi_provider = f"{provider.group('provider')} ({provider.group('nics')} NICs)"
        return
    env = SET_BY_ENV.match(msg)
    if env:
        host.set_by_env[env.group("var")] = env.group("value").strip()


def _read_via(host: HostFacts, via: str) -> None:
    net = NET_VIA.match(via)
    if net:
        name = net.group("net")
        host.transports.add(f"NET/{name}")
        host.used_devices.setdefault(name, set()).add(int(net.group("dev")))
    elif via.startswith("P2P"):
        host.transports.add("P2P")
    elif via.startswith("SHM") or via.startswith("direct shared memory"):
        host.transports.add("SHM")
    elif via.upper().startswith("NVLS"):
        host.transports.add("NVLS")
    elif via.upper().startswith("COLLNET"):
        host.transports.add("CollNet")


def _short(why: str) -> str:
    """'libnccl-net.so: cannot open shared object file: No such file or directory' ->
    'libnccl-net.so: cannot open shared object file'; a bare name: 'libnccl-net.so not found'."""
    why = why.strip().removesuffix(": No such file or directory").strip()
    return why if " " in why else f"{why} not found"


def record_fields(logs: dict[str, str] | None) -> dict:
    """The record's NCCL fields (record_schema) from the collected text of each node;
    all null where NCCL said nothing (a CPU run, a user's own NCCL_DEBUG)."""
    empty = {"nccl_transport": None, "nccl_net": None, "nccl_fallback": None,
             "nccl_fallback_nodes": None, "nccl_hosts": None, "nccl_version": None}
    hosts: list[HostFacts] = []
    version = None
    for text in (logs or {}).values():
        facts = parse(text)
        version = version or facts.version
        hosts += list(facts.hosts.values())
    if not hosts and version is None:
        return empty
    fell_back = [h for h in hosts if h.fallback]
    transports = set().union(*(h.transports for h in hosts)) if hosts else set()
    nets = [h.net for h in hosts if h.net and any(t.startswith("NET/") for t in h.transports)]
    reasons = list(dict.fromkeys(h.fallback for h in fell_back))
    return {
        "nccl_transport": join_transports(transports) or None,
        "nccl_net": ", ".join(dict.fromkeys(nets)) or None,
        "nccl_fallback": " | ".join(reasons) or None,
        "nccl_fallback_nodes": len(fell_back) if fell_back else None,
        "nccl_hosts": [h.as_record() for h in hosts] or None,
        "nccl_version": version,
    }
