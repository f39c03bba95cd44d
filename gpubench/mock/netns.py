"""Namespace mode: every mock instance a host of its own on a bridge the mock owns.

The mock makes one Linux bridge, ``gbm<mock id>``, with the address ``10.232.X.1/24``: X is
picked so that no other interface of this machine holds an address in that /24, which keeps
mocks running side by side (parallel test workers) apart. Instance slot k (1..125) gets a
network namespace ``gbm<mock id>-<k>`` joined to the bridge by a veth pair
(``gbv<mock id><k hex>`` outside, ``eth0`` inside) with two addresses on that link: the public
one ``10.232.X.(1+k)`` and the private one ``10.232.X.(128+k)``. Two addresses, although one
link carries both, so that a test can tell which one a client chose (Lambda's ``ip`` against
its ``private_ip``). The bridge's own address routes this machine's root namespace (the tests,
the gpubench client) to every instance, and is each namespace's default gateway.

A host of its own also has a name of its own: `exec_prefix` runs a command (the instance's
sshd) in the namespace, in a UTS namespace whose hostname is the instance's, with
/etc/netns/<ns>/hosts resolving that name to both its addresses and a resolv.conf that fails
fast (there is no DNS on the bridge). torchrun's c10d rendezvous decides whether this node
hosts the store by resolving its own hostname, and gloo binds the address the hostname
resolves to, so both work across instances as on a real machine.

Ownership: the bridge's alias names the process that made it (``gpubench-mock pid=P start=T``,
T the process's start time, so a reused pid is no owner). A mock that starts removes the
bridges, namespaces and veths of every mock whose owner is gone, as reap_stale does for
processes. All of it runs under one lock file, so two mocks starting at once never pick the
same /24 or reap what the other is making.

Vast.ai overlay networks (vast_overlays.py) are bridges of their own, ``gbo<mock id><n hex>``,
with no address in the root namespace (only the members reach each other on it); a joined
instance gets a second veth pair (``gbw<mock id><n hex><slot hex>`` outside, ``eth1`` inside)
with its address in the overlay's ``10.233.n.0/24``. The overlay bridges carry the same owner
alias, and are reaped with the mock that made them.

Needs root (CAP_NET_ADMIN and `ip netns`); `available()` says why not where it cannot work.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpubench.errors import GpubenchError

RANGE = "10.232"                  # 10.232.0.0/16 is kept for the mock's bridges
PREFIX = "gbm"                    # bridge gbm<id>, namespaces gbm<id>-<slot>
VETH_PREFIX = "gbv"               # host end of an instance's veth: gbv<id><slot hex>
OVERLAY_PREFIX = "gbo"            # an overlay's bridge: gbo<id><overlay hex>
OVERLAY_VETH_PREFIX = "gbw"       # host end of a member's overlay veth: gbw<id><overlay hex><slot hex>
OVERLAY_RANGE = "10.233"          # overlay n is 10.233.n.0/24
OVERLAY_IFNAME = "eth1"
MAX_SLOTS = 125                   # public .2-.126, private .129-.253
PRIVATE_OFFSET = 127
LOCK_FILE = Path("/run/lock/gpubench-mock-netns.lock")
IP_TIMEOUT_S = 20
ETC_NETNS = Path("/etc/netns")    # `ip netns exec NS` binds /etc/netns/NS/* over /etc/*
OWNER_TAG = "gpubench-mock"


class NetnsError(GpubenchError):
    """A namespace, veth or bridge could not be made or removed."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NetnsError(f"ip {' '.join(args)}: {e}") from None
    if check and r.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {(r.stderr or r.stdout).strip()}")
    return r


def _links(kind: str | None = None) -> list[dict]:
    args = ["-j", "link", "show"] + (["type", kind] if kind else [])
    out = _ip(*args, check=False).stdout
    try:
        return json.loads(out) if out.strip() else []
    except ValueError:
        return []


def namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_alive(alias: str) -> bool:
    fields = dict(f.split("=", 1) for f in alias.split()[1:] if "=" in f)
    try:
        pid = int(fields.get("pid", ""))
    except ValueError:
        return False
    return _start_time(pid) is not None and _start_time(pid) == fields.get("start")


def _owner_alias() -> str:
    return f"{OWNER_TAG} pid={os.getpid()} start={_start_time(os.getpid())}"


@contextmanager
def _machine_lock():
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def available() -> str | None:
    """None where namespace mode can work here, else the reason it cannot (one line)."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN)"
    probe = f"{PREFIX}probe{os.getpid() % 100000}"
    try:
        _ip("netns", "add", probe)
    except NetnsError as e:
        return f"cannot create a network namespace: {e}"
    _ip("netns", "del", probe, check=False)
    return None


def kill_namespace_processes(ns: str) -> int:
    """SIGKILL everything still running inside the namespace; how many were signalled."""
    out = _ip("netns", "pids", ns, check=False).stdout
    killed = 0
    for pid in out.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
            killed += 1
        except (ProcessLookupError, PermissionError, ValueError):
            pass
    return killed


def reap_stale() -> int:
    """Remove the bridges, namespaces and veths of mocks whose owning process is gone.
    Returns how many bridges and namespaces went."""
    with _machine_lock():
        return _reap_stale_locked()


def _reap_stale_locked() -> int:
    live: set[str] = set()
    reaped = 0
    for link in _links("bridge"):
        name = link.get("ifname", "")
        if name.startswith(OVERLAY_PREFIX):
            if not _owner_alive(link.get("ifalias") or ""):
                _ip("link", "del", name, check=False)
            continue
        if not name.startswith(PREFIX):
            continue
        alias = link.get("ifalias") or ""
        if alias.startswith(OWNER_TAG) and _owner_alive(alias):
            live.add(name[len(PREFIX):])
            continue
        _ip("link", "del", name, check=False)
        reaped += 1
    for ns in namespaces():
        if ns.startswith(PREFIX) and "-" in ns and ns[len(PREFIX):].split("-", 1)[0] not in live:
            kill_namespace_processes(ns)
            _ip("netns", "del", ns, check=False)
            reaped += 1
    if ETC_NETNS.is_dir():
        for d in ETC_NETNS.glob(f"{PREFIX}*-*"):
            if d.name[len(PREFIX):].split("-", 1)[0] not in live:
                _remove_etc(d)
    for link in _links("veth"):
        name = link.get("ifname", "")
        if name.startswith(VETH_PREFIX) and name[len(VETH_PREFIX):len(VETH_PREFIX) + 8] not in live:
            _ip("link", "del", name, check=False)
    return reaped


def _used_subnets() -> set[int]:
    """The X of every 10.232.X.0/24 that an address of this machine's root namespace is in."""
    out = _ip("-j", "-4", "addr", "show", check=False).stdout
    try:
        links = json.loads(out) if out.strip() else []
    except ValueError:
        links = []
    used = set()
    for link in links:
        for a in link.get("addr_info", []):
            parts = str(a.get("local", "")).split(".")
            if len(parts) == 4 and ".".join(parts[:2]) == RANGE:
                used.add(int(parts[2]))
    return used


def _remove_etc(d: Path) -> None:
    for f in d.glob("*"):
        f.unlink(missing_ok=True)
    try:
        d.rmdir()
    except OSError:
        pass


@dataclass(frozen=True)
class Addresses:
    """One instance's place on the mock's network."""
    slot: int
    namespace: str
    veth: str
    public_ip: str
    private_ip: str


class Network:
    """The mock's bridge and the namespaces of its instances."""

    def __init__(self, mock_id: str, subnet: int) -> None:
        self.mock_id = mock_id
        self.subnet = subnet
        self.bridge = f"{PREFIX}{mock_id}"
        self.gateway = f"{RANGE}.{subnet}.1"

    @property
    def cidr(self) -> str:
        return f"{RANGE}.{self.subnet}.0/24"

    @classmethod
    def create(cls, mock_id: str, prefer: int | None = None) -> "Network":
        """Reap stale mocks' leftovers, pick a free /24 (`prefer` first: the one this mock's
        state used before a restart) and make the bridge. Raises NetnsError."""
        if len(PREFIX + mock_id) > 15 or len(VETH_PREFIX + mock_id) + 2 > 15:
            raise NetnsError(f"mock id {mock_id!r} is too long for an interface name")
        with _machine_lock():
            _reap_stale_locked()
            if any(link.get("ifname") == PREFIX + mock_id for link in _links()):
                raise NetnsError(f"bridge {PREFIX + mock_id} belongs to a live mock on the same state")
            used = _used_subnets()
            start = prefer if prefer is not None else int(mock_id, 16) % 256
            free = [x for x in ((start + i) % 256 for i in range(256)) if x not in used]
            if not free:
                raise NetnsError(f"every /24 of {RANGE}.0.0/16 is in use on this machine")
            net = cls(mock_id, free[0])
            try:
                _ip("link", "add", "name", net.bridge, "type", "bridge")
                _ip("link", "set", "dev", net.bridge, "alias", _owner_alias())
                _ip("addr", "add", f"{net.gateway}/24", "dev", net.bridge)
                _ip("link", "set", "dev", net.bridge, "up")
            except NetnsError:
                _ip("link", "del", net.bridge, check=False)
                raise
        return net

    def addresses(self, slot: int) -> Addresses:
        if not 1 <= slot <= MAX_SLOTS:
            raise NetnsError(f"slot {slot} outside 1..{MAX_SLOTS}")
        base = f"{RANGE}.{self.subnet}"
        return Addresses(slot, f"{self.bridge}-{slot}", f"{VETH_PREFIX}{self.mock_id}{slot:02x}",
                         f"{base}.{1 + slot}", f"{base}.{PRIVATE_OFFSET + 1 + slot}")

    def namespace_path(self, slot: int) -> Path:
        return Path("/run/netns") / self.addresses(slot).namespace

    def exists(self, slot: int) -> bool:
        return self.namespace_path(slot).exists()

    def add_host(self, slot: int, hostname: str) -> Addresses:
        """The instance's namespace, its veth on the bridge, both addresses, lo up, a
        default route through the bridge, and its /etc/hosts naming `hostname`. Replaces a
        leftover of the same slot."""
        a = self.addresses(slot)
        self.remove_host(slot)
        try:
            etc = ETC_NETNS / a.namespace
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(f"127.0.0.1 localhost\n{a.public_ip} {hostname}\n"
                                       f"{a.private_ip} {hostname}\n")
            (etc / "resolv.conf").write_text("# no DNS on a mock instance's network\n"
                                             "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        except OSError as e:
            raise NetnsError(f"cannot write {ETC_NETNS / a.namespace}: {e.strerror or e}") from None
        try:
            _ip("netns", "add", a.namespace)
            _ip("link", "add", a.veth, "type", "veth", "peer", "name", "eth0", "netns", a.namespace)
            _ip("link", "set", a.veth, "master", self.bridge, "up")
            _ip("-n", a.namespace, "addr", "add", f"{a.public_ip}/24", "dev", "eth0")
            _ip("-n", a.namespace, "addr", "add", f"{a.private_ip}/24", "dev", "eth0")
            _ip("-n", a.namespace, "link", "set", "eth0", "up")
            _ip("-n", a.namespace, "link", "set", "lo", "up")
            _ip("-n", a.namespace, "route", "add", "default", "via", self.gateway)
        except NetnsError:
            self.remove_host(slot)
            raise
        return a

    def cut(self, slot: int) -> None:
        """Take the instance's link down inside its namespace: packets vanish, no reset is
        sent, nobody is told (a machine that dies, a route that dies)."""
        _ip("-n", self.addresses(slot).namespace, "link", "set", "eth0", "down")

    def link_up(self, slot: int) -> bool:
        r = _ip("-n", self.addresses(slot).namespace, "-j", "link", "show", "eth0", check=False)
        try:
            return "UP" in json.loads(r.stdout)[0].get("flags", [])
        except (ValueError, IndexError, AttributeError):
            return False

    def remove_host(self, slot: int) -> None:
        """Kill what runs in the namespace, delete it and its veth (no error if gone)."""
        a = self.addresses(slot)
        if self.namespace_path(slot).exists():
            kill_namespace_processes(a.namespace)
            _ip("netns", "del", a.namespace, check=False)
        _ip("link", "del", a.veth, check=False)
        _remove_etc(ETC_NETNS / a.namespace)

    def exec_prefix(self, slot: int, hostname: str) -> list[str]:
        """The words that run a command as a process of the instance: in its namespace (with
        its /etc/hosts and resolv.conf), under its own hostname. Each step execs the next, so
        the process started is the command itself."""
        return ["ip", "netns", "exec", self.addresses(slot).namespace, "unshare", "--uts",
                "sh", "-c", 'hostname "$0" && exec "$@"', hostname]

    # -- overlay networks (Vast.ai) ----------------------------------------------
    def overlay_bridge(self, n: int) -> str:
        return f"{OVERLAY_PREFIX}{self.mock_id}{n:02x}"

    @staticmethod
    def overlay_subnet(n: int) -> str:
        return f"{OVERLAY_RANGE}.{n}.0/24"

    @staticmethod
    def overlay_address(n: int, slot: int) -> str:
        return f"{OVERLAY_RANGE}.{n}.{1 + slot}"

    def add_overlay(self, n: int) -> str:
        """Overlay n's bridge (1..255), owned as the mock's own bridge is; its name."""
        if not 1 <= n <= 255:
            raise NetnsError(f"overlay {n} outside 1..255")
        bridge = self.overlay_bridge(n)
        _ip("link", "del", bridge, check=False)
        try:
            _ip("link", "add", "name", bridge, "type", "bridge")
            _ip("link", "set", "dev", bridge, "alias", _owner_alias())
            _ip("link", "set", "dev", bridge, "up")
        except NetnsError:
            _ip("link", "del", bridge, check=False)
            raise
        return bridge

    def join_overlay(self, n: int, slot: int) -> str:
        """Instance `slot` on overlay n: a veth from its namespace (eth1 there) to the
        overlay's bridge, with its address in the overlay's /24. The address."""
        a = self.addresses(slot)
        veth = f"{OVERLAY_VETH_PREFIX}{self.mock_id}{n:02x}{slot:02x}"
        address = self.overlay_address(n, slot)
        _ip("link", "del", veth, check=False)
        try:
            _ip("link", "add", veth, "type", "veth", "peer", "name", OVERLAY_IFNAME, "netns", a.namespace)
            _ip("link", "set", veth, "master", self.overlay_bridge(n), "up")
            _ip("-n", a.namespace, "addr", "add", f"{address}/24", "dev", OVERLAY_IFNAME)
            _ip("-n", a.namespace, "link", "set", OVERLAY_IFNAME, "up")
        except NetnsError:
            _ip("link", "del", veth, check=False)
            raise
        return address

    def remove_overlay(self, n: int) -> None:
        """Overlay n's bridge and every member's veth on it (no error if gone)."""
        for link in _links("veth"):
            if link.get("ifname", "").startswith(f"{OVERLAY_VETH_PREFIX}{self.mock_id}{n:02x}"):
                _ip("link", "del", link["ifname"], check=False)
        _ip("link", "del", self.overlay_bridge(n), check=False)

    def overlay_exists(self, n: int) -> bool:
        return any(link.get("ifname") == self.overlay_bridge(n) for link in _links("bridge"))

    def close(self) -> None:
        """Remove every namespace of this mock, then the bridge."""
        for ns in namespaces():
            if ns.startswith(self.bridge + "-"):
                kill_namespace_processes(ns)
                _ip("netns", "del", ns, check=False)
        if ETC_NETNS.is_dir():
            for d in ETC_NETNS.glob(f"{self.bridge}-*"):
                _remove_etc(d)
        for link in _links("veth"):
            if link.get("ifname", "").startswith((VETH_PREFIX + self.mock_id, OVERLAY_VETH_PREFIX + self.mock_id)):
                _ip("link", "del", link["ifname"], check=False)
        for link in _links("bridge"):
            if link.get("ifname", "").startswith(OVERLAY_PREFIX + self.mock_id):
                _ip("link", "del", link["ifname"], check=False)
        _ip("link", "del", self.bridge, check=False)
