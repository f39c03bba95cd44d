"""What a bench is asked to do (BenchRequest) and what it did (BenchResult)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gpubench.suite import WorkloadRef


@dataclass
class BenchRequest:
    provider: str
    gpus: int
    workloads: list[WorkloadRef]
    workload_args: list[str] = field(default_factory=list)
    counts: list[int] | None = None   # None: 1 and powers of two up to the machine's GPUs
    gpu_type: str | None = None
    max_price: float | None = None
    disk_gb: int = 100
    image: str | None = None
    name: str | None = None
    keep: bool = False
    force: bool = False
    timeout: float = 3600.0           # per run
    remote_python: str = "python3"
    remote_dir: str = "gpubench"
    attempts: int = 3                 # launches to try, as provision's --attempts
    boot_timeout: float = 900.0       # seconds to reach running, as provision's --boot-timeout
    ssh_timeout: float = 300.0        # seconds for SSH to answer, as provision's --ssh-timeout
    max_hours: float | None = None    # the machine's deadline [default: expected time + margin]
    budget: float | None = None       # dollars [default: [defaults] budget in config.toml, else none]
    preflight: bool = True            # check the host before the sweeps; replace one that fails
    repeat: int | None = None         # runs of each count; None: the sweep's default for the machine
    hosts: int = 1                    # machines of one GPU type, on distinct hosts, to sweep on
    parallel: bool = False            # sweep them at once rather than one after the other
    per_workload_args: dict[str, list[str]] = field(default_factory=dict)  # --args NAME="ARGS"
    any_gpu: bool = False             # --any-gpu: another GPU type may replace one that never boots
    results: Path | None = None       # the results directory: the records predictions read
    ask: Callable[[str], bool] | None = None  # a yes/no question mid-bench; None: --yes agreed to all
    public_network: bool = False      # --nodes: the public internet where no physical cluster fits
    pin: object | None = None         # --volume: gpubench.lifecycle.provision.Pin, made before any offer is read


@dataclass
class BenchResult:
    name: str = ""
    instance_id: str | None = None
    records: list[dict] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    cost: float | None = None         # the whole machine, from launch to terminate (or now),
    #                                   and the machines provisioning threw away for it
    billed: float | None = None       # what the provider billed for it, where it reports that
    machine_cost: float | None = None  # the machine the sweeps ran on alone, estimated
    host_id: str | None = None        # the provider's id for the machine's host, where it gives one
    terminated: bool = False
    kept: bool = False
    budget_stop: str | None = None    # why runs stopped before the plan's end (the budget)
    machines: list["BenchResult"] = field(default_factory=list)   # --hosts: each machine's

    @property
    def all_ok(self) -> bool:
        """No run of any sweep failed."""
        return all(r["status"] == "ok" for r in self.records)
