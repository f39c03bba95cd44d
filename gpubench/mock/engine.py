"""The provider-neutral core: launching, booting, killing and terminating mock instances.

One background thread ("the ticker") moves instances through their life: it boots pending
instances whose boot delay has passed (starting their sshd), brings back the sshd of running
instances after a restart, stops instances that ran `shutdown` on themselves, kills
instances while a `dies` fault holds, and takes an instance's link down when its node-dies
time comes. It is the only thread that starts sshd (see sshhost.py on PDEATHSIG).

Network mode: "loopback" (every sshd on its own port of 127.0.0.1, the default) or "netns"
(every instance in a network namespace of its own on the mock's bridge, see netns.py). Asked
for and not possible here, namespace mode falls back to loopback and `mode_note` says why.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Callable

from gpubench.errors import UsageError
from gpubench.mock import catalog, netns
from gpubench.mock.faults import FaultBoard
from gpubench.mock.sshhost import InstanceHost, free_port, netns_slot
from gpubench.mock.state import DEAD, PENDING, RUNNING, STOPPED, MockInstance, Store

log = logging.getLogger("gpubench.mock")


class NodeDiesError(UsageError):
    """node-dies asked of a mock that is not in namespace mode."""
TICK_S = 0.05
LOOPBACK, NETNS = "loopback", "netns"


class Engine:
    def __init__(self, state_dir: Path, boot_delay: float, faults: FaultBoard,
                 netns_mode: bool = False) -> None:
        self.state_dir = state_dir
        self.boot_delay = max(0.0, float(boot_delay))
        self.faults = faults
        self.store = Store(state_dir / "mock.sqlite")
        self.host = InstanceHost(state_dir, self.store)
        self.lambda_types = catalog.lambda_types()
        self.vast_offers = catalog.vast_offers()
        self.runpod_gpus = catalog.runpod_gpus()
        self.lock = threading.RLock()     # one life transition at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.netns_wanted = netns_mode
        self.mode = LOOPBACK
        self.mode_note = ""          # why namespace mode was asked for and not given

    @property
    def network(self) -> netns.Network | None:
        return self.host.network

    def start(self) -> None:
        self.host.reap_stale()
        if self.netns_wanted:
            self._start_network()
        self._thread = threading.Thread(target=self._run, name="mock-ticker", daemon=True)
        self._thread.start()

    def _start_network(self) -> None:
        reason = netns.available()
        if reason is None:
            prefer = self.store.meta("netns_subnet")
            try:
                self.host.network = netns.Network.create(
                    self.store.mock_id, prefer=int(prefer) if prefer else None)
            except netns.NetnsError as e:
                reason = str(e)
        if reason is not None:
            self.mode_note = f"namespace mode unavailable ({reason}); instances listen on 127.0.0.1"
            log.warning("mock: %s", self.mode_note)
            return
        self.mode = NETNS
        self.faults.netns = True
        self.store.set_meta("netns_subnet", str(self.network.subnet))   # same addresses after a restart

    def describe_network(self) -> dict:
        """The mode and, in namespace mode, the bridge (for the health endpoint)."""
        out: dict = {"mode": self.mode}
        if self.network is not None:
            out.update({"bridge": self.network.bridge, "subnet": self.network.cidr,
                        "gateway": self.network.gateway})
        if self.mode_note:
            out["note"] = self.mode_note
        return out

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self.lock:
            self.host.stop_all()
            if self.network is not None:
                self.network.close()
            self.store.close()

    # ------------------------------------------------------------ addresses and ports

    def public_ports(self, names: list[str]) -> dict[str, int]:
        """A public port for each extra container port a create asks for ("29500/tcp" ->
        port; 22/tcp is the sshd's and left out): in namespace mode the instance's own
        address serves it, so public = container port; in loopback mode a free port of
        127.0.0.1 that the host forwards to the container port (forward.py; TCP only)."""
        out = {}
        for name in names:
            port, _, proto = str(name).partition("/")
            if int(port) != 22:
                out[f"{int(port)}/{proto or 'tcp'}"] = int(port) if self.network is not None else free_port()
        return out

    def address(self, inst: MockInstance) -> str:
        """The instance's public address: its own in namespace mode, 127.0.0.1 otherwise."""
        return self.host.address(inst)

    def private_address(self, inst: MockInstance) -> str:
        """Its second address on the same link in namespace mode (Lambda's private_ip)."""
        return self.host.private_address(inst)

    def mapped_ports(self, inst: MockInstance) -> dict[int, int]:
        """Container TCP port -> public port: 22 to its sshd, then the extra ports its
        create asked for (extra["port_map"], kept up to date by the host's forwarders)."""
        extra = {int(str(k).split("/")[0]): int(v) for k, v in (inst.extra.get("port_map") or {}).items()
                 if str(k).endswith("/tcp")}
        return {22: inst.ssh_port, **extra}

    def _free_slot(self) -> int | None:
        used = {netns_slot(i) for i in self.store.instances()}
        return next((k for k in range(1, netns.MAX_SLOTS + 1) if k not in used), None)

    # ------------------------------------------------------------ life transitions

    def launch(self, provider: str, *, iid: str, name: str, offer_key: str, units: int,
               gpu_name: str, gpu_count: int, price_per_hour: float, region: str,
               authorized_keys: list[str], interruptible: bool = False,
               extra: dict | None = None) -> MockInstance:
        now = time.time()
        inst = MockInstance(
            provider=provider, id=str(iid), name=name, offer_key=offer_key, units=units,
            gpu_name=gpu_name, gpu_count=gpu_count, price_per_hour=round(price_per_hour, 4),
            region=region, created_at=now, ready_at=now + self.boot_delay, phase=PENDING,
            ssh_port=22 if self.network is not None else free_port(),
            authorized_keys=list(authorized_keys), interruptible=interruptible,
            never_boots=self.faults.active(provider, "never-boots") is not None,
            ssh_refuses=self.faults.active(provider, "ssh-refuses") is not None,
            extra=dict(extra or {}))
        bad = self.faults.take_instance_fault(provider, "bad-host")
        if bad is not None:
            inst.extra["bad_host"] = bad.value    # the stand-in nvidia-smi reads it (sshhost.py)
        dies = self.faults.take_instance_fault(provider, "node-dies")
        if dies is not None:
            inst.extra["node_dies_after"] = float(dies.value or 0.0)
        with self.lock:
            if self.network is not None:
                inst.extra["netns_slot"] = self._free_slot()   # available() kept one free
            self.store.put(inst)
        return inst

    def node_dies(self, provider: str, iid: str, after: float = 0.0) -> MockInstance | None:
        """Take the instance's link down `after` seconds from now (namespace mode): its
        packets vanish and nobody is told; the API keeps answering it as running, as a
        provider does until it notices. None if there is no such instance."""
        if self.network is None:
            raise NodeDiesError("node-dies needs namespace mode (gpubench mock serve --netns)")
        at = time.time() + max(0.0, float(after))

        def change(inst: MockInstance) -> None:
            inst.extra["link_down_at"] = at
        return self.mutate(provider, str(iid), change)

    def terminate(self, inst: MockInstance) -> bool:
        """Stop and forget the instance; False if a terminate-lies fault kept it alive."""
        if self.faults.active(inst.provider, "terminate-lies"):
            return False
        with self.lock:
            self.host.stop(inst)
            self.store.delete(inst.provider, inst.id)
        return True

    def mutate(self, provider: str, iid: str,
               change: Callable[[MockInstance], bool | None]) -> MockInstance | None:
        """Read-modify-write one instance: under the lock, read it afresh, let `change` edit it
        in place and write it back. Returns the instance as written, or None if it is gone
        (terminated meanwhile): nothing is written then. `change` may return False, before it
        changes anything, to leave the instance as it was (a request it refuses). It runs under
        the lock, so it must be quick: it must not start sshd (the ticker does that, see
        mark_booting) and must not terminate the instance."""
        with self.lock:
            inst = self.store.get(provider, iid)
            if inst is None:
                return None
            if change(inst) is False:
                return inst
            return inst if self.store.update(inst) else None

    def mark_stopped(self, inst: MockInstance) -> None:
        """Inside `mutate`: stop the instance's sshd and everything it started."""
        self.host.stop(inst)
        for key in ("link_down_at", "link_down"):    # it comes back with its link up
            inst.extra.pop(key, None)
        inst.phase = STOPPED
        inst.running_since = None

    def mark_booting(self, inst: MockInstance) -> None:
        """Inside `mutate`: boot again; the ticker starts sshd once the boot delay has passed."""
        inst.phase = PENDING
        inst.running_since = None
        inst.ready_at = time.time() + self.boot_delay

    def mark_restarted(self, inst: MockInstance) -> None:
        self.mark_stopped(inst)
        self.mark_booting(inst)

    def available(self, provider: str, offer_key: str, capacity: int) -> int:
        if self.faults.active(provider, "no-capacity"):
            return 0
        free = max(0, capacity - self.store.used(provider, offer_key))
        if self.network is not None:      # every instance needs a place on the bridge
            free = min(free, netns.MAX_SLOTS - len(self.store.instances()))
        return free

    # ------------------------------------------------------------ the ticker

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:   # keep the mock alive; a test sees the instance stuck instead
                log.exception("mock ticker failed")
            self._stop.wait(TICK_S)

    def tick(self) -> None:
        now = time.time()
        for inst in self.store.instances():
            if self._stop.is_set():
                return
            with self.lock:
                current = self.store.get(inst.provider, inst.id)   # may be gone or changed
                if current is not None:
                    self._advance(current, now)

    def _advance(self, inst: MockInstance, now: float) -> None:
        if inst.phase == PENDING and not inst.never_boots and now >= inst.ready_at:
            booted = self.host.plug(inst) if inst.ssh_refuses else self.host.start(inst)
            if booted:
                inst.phase = RUNNING
                inst.running_since = time.time()
                if inst.extra.get("node_dies_after") is not None:
                    inst.extra["link_down_at"] = inst.running_since + inst.extra.pop("node_dies_after")
                self.store.update(inst)
        elif inst.phase == RUNNING:
            dies = self.faults.active(inst.provider, "dies")
            link_down_at = inst.extra.get("link_down_at")
            if link_down_at is not None and now >= link_down_at and not inst.extra.get("link_down"):
                inst.extra["link_down"] = self.host.cut(inst)   # node-dies: its link goes down
                self.store.update(inst)
            elif self.host.halted(inst):        # `shutdown` on the machine (a watchdog's halt)
                self.mark_stopped(inst)
                self.store.update(inst)
            elif dies is not None and now - (inst.running_since or now) >= (dies.value or 0.0):
                self.host.stop(inst)
                inst.phase = DEAD
                self.store.update(inst)
            elif not inst.ssh_refuses and not self.host.running(inst):
                if self.host.start(inst):     # after a restart of the mock
                    self.store.update(inst)   # the port may have changed
