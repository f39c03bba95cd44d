"""The provider-neutral core: launching, booting, killing and terminating mock instances.

One background thread ("the ticker") moves instances through their life: it boots pending
instances whose boot delay has passed (starting their sshd), brings back the sshd of running
instances after a restart, stops instances that ran `shutdown` on themselves, and kills
instances while a `dies` fault holds. It is the only
thread that starts sshd (see sshhost.py on PDEATHSIG).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Callable

from gpubench.mock import catalog
from gpubench.mock.faults import FaultBoard
from gpubench.mock.sshhost import InstanceHost, free_port
from gpubench.mock.state import DEAD, PENDING, RUNNING, STOPPED, MockInstance, Store

log = logging.getLogger("gpubench.mock")
TICK_S = 0.05


class Engine:
    def __init__(self, state_dir: Path, boot_delay: float, faults: FaultBoard) -> None:
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

    def start(self) -> None:
        self.host.reap_stale()
        self._thread = threading.Thread(target=self._run, name="mock-ticker", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self.lock:
            self.host.stop_all()
            self.store.close()

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
            ssh_port=free_port(), authorized_keys=list(authorized_keys), interruptible=interruptible,
            never_boots=self.faults.active(provider, "never-boots") is not None,
            ssh_refuses=self.faults.active(provider, "ssh-refuses") is not None,
            extra=dict(extra or {}))
        bad = self.faults.take_instance_fault(provider, "bad-host")
        if bad is not None:
            inst.extra["bad_host"] = bad.value    # the stand-in nvidia-smi reads it (sshhost.py)
        with self.lock:
            self.store.put(inst)
        return inst

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
        return max(0, capacity - self.store.used(provider, offer_key))

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
            if inst.ssh_refuses or self.host.start(inst):
                inst.phase = RUNNING
                inst.running_since = time.time()
                self.store.update(inst)
        elif inst.phase == RUNNING:
            dies = self.faults.active(inst.provider, "dies")
            if self.host.halted(inst):        # `shutdown` on the machine (a watchdog's halt)
                self.mark_stopped(inst)
                self.store.update(inst)
            elif dies is not None and now - (inst.running_since or now) >= (dies.value or 0.0):
                self.host.stop(inst)
                inst.phase = DEAD
                self.store.update(inst)
            elif not inst.ssh_refuses and not self.host.running(inst):
                if self.host.start(inst):     # after a restart of the mock
                    self.store.update(inst)   # the port may have changed
