"""An in-memory provider for lifecycle tests."""

from __future__ import annotations

from gpubench.providers.common import (Account, Instance, InstanceState, NotFoundError, Offer,
                                       provider_name)

#: The account every Cloud is connected to unless told otherwise.
MEM_ACCOUNT = Account("mem", "mem://cloud", "0123456789ab")


class Cloud:
    """In memory. `launch_error` / `get_error` (once) / `terminate_errors` script failures;
    an instance is listed only after `unlisted_polls` calls to list()."""

    name = "mem"
    account = MEM_ACCOUNT

    def lookup_account_id(self):
        return self.account.account_id

    def __init__(self, launch_error=None, get_error=None, terminate_errors=(), unlisted_polls=0):
        self.launch_error = launch_error
        self.get_error = get_error
        self.terminate_errors = list(terminate_errors)
        self.unlisted_polls = unlisted_polls
        self.instances: dict[str, Instance] = {}
        self.terminate_calls = 0
        self.list_calls = 0

    def offers(self, gpus=None, gpu_type=None, interruptible=False):
        return [Offer("mem", "o1", "H100", 1, 2.0, available=1)]

    def ensure_ssh_key(self, public_key, name):
        return "k"

    def add(self, name: str) -> Instance:
        inst = Instance("mem", f"i{len(self.instances) + 1}", provider_name(name), InstanceState.PENDING,
                        raw_status="pending")
        self.instances[inst.instance_id] = inst
        return inst

    def launch(self, offer, spec):
        if self.launch_error is not None:
            raise self.launch_error
        return self.add(spec.name)

    def get(self, iid):
        if self.get_error is not None:
            error, self.get_error = self.get_error, None   # once
            raise error
        if iid not in self.instances:
            raise NotFoundError("mem", f"GET /i/{iid}", "gone")
        return self.instances[iid]

    def list(self):
        self.list_calls += 1
        return [] if self.list_calls <= self.unlisted_polls else list(self.instances.values())

    def terminate(self, iid):
        self.terminate_calls += 1
        if self.terminate_errors:
            error = self.terminate_errors.pop(0)
            if error is not None:
                raise error
        self.instances.pop(iid, None)
