"""What a Slurm sweep asks of the cluster beyond the sweep itself: where the jobs
go (partition, account, reservation, QOS, constraint), how long they may take,
how each job starts its processes, and how long gpubench waits for them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpubench.launch.schemes import LauncherFlag
from gpubench.launch.slurm.errors import SlurmUsageError

TORCHRUN = "torchrun"  # one task per node: srun torchrun --nnodes ... --rdzv_backend c10d
SRUN = "srun"          # one task per GPU: srun python script.py, ranks from SLURM_PROCID
LAUNCH_STYLES = (TORCHRUN, SRUN)

GRES = "gres"                    # #SBATCH --gres=gpu:N (what most clusters take)
GPUS_PER_NODE = "gpus-per-node"  # #SBATCH --gpus-per-node=N (clusters that count GPUs as TRES)
GPU_FLAGS = (GRES, GPUS_PER_NODE)

DEFAULT_PENDING_TIMEOUT_S = 3600.0

# sbatch's time formats: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_TIME = re.compile(r"^(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2})$")
# Set by gpubench from the sweep point and the job's directory: a --sbatch-arg may not override them.
_OWN_FLAGS = ("--nodes", "-N", "--ntasks", "-n", "--ntasks-per-node", "--gres", "--gpus",
              "--gpus-per-node", "--output", "-o", "--error", "-e", "--chdir", "-D",
              "--job-name", "-J", "--parsable", "--wait", "-W")


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None     # [default: the cluster's default partition]
    account: str | None = None
    reservation: str | None = None
    qos: str | None = None
    time: str | None = None          # sbatch --time [default: the partition's]
    constraint: str | None = None
    sbatch_args: tuple[str, ...] = ()  # more #SBATCH lines, each one option: --exclusive, --mem=0
    launch: str = TORCHRUN
    gpu_flag: str = GRES
    cpus_per_gpu: int | None = None  # --cpus-per-task follows from it [default: the cluster's]
    mem: str | None = None           # sbatch --mem, per node [default: the cluster's]
    price_per_gpu_hour: float | None = None  # None: cost in GPU-hours and core-hours only
    pending_timeout: float = DEFAULT_PENDING_TIMEOUT_S
    poll_seconds: float = 1.0        # between squeue calls while a job is pending or running
    keep_dir: Path | None = None     # a local copy of each job's script and output files

    def __post_init__(self) -> None:
        check(self)


# `gpubench run`'s Slurm flags (launch/schemes.py): one per field a user sets.
FLAGS = (
    LauncherFlag("partition", "--partition", str, None, "Slurm partition [default: the cluster's]."),
    LauncherFlag("account", "--account", str, None, "Slurm account the jobs are charged to."),
    LauncherFlag("reservation", "--reservation", str, None, "Slurm reservation."),
    LauncherFlag("qos", "--qos", str, None, "Slurm quality of service."),
    LauncherFlag("time", "--time", str, None, "Each job's time limit, HH:MM:SS [default: the partition's]."),
    LauncherFlag("constraint", "--constraint", str, None, "Slurm node features, e.g. a100."),
    LauncherFlag("sbatch_args", "--sbatch-arg", list, None,
                 "One more #SBATCH option, e.g. --sbatch-arg=--exclusive (repeatable)."),
    LauncherFlag("gpu_flag", "--gpu-flag", str, GRES,
                 "How jobs ask for GPUs: gres (--gres=gpu:N) or gpus-per-node (--gpus-per-node=N), "
                 "whichever the cluster takes."),
    LauncherFlag("cpus_per_gpu", "--cpus-per-gpu", int, None,
                 "CPU cores per GPU (sets --cpus-per-task) [default: the cluster's]."),
    LauncherFlag("mem", "--mem", str, None,
                 "Memory per node, as sbatch takes it: 64G, 0 for all [default: the cluster's]."),
    LauncherFlag("launch", "--launch", str, TORCHRUN,
                 "torchrun (one task per node running torchrun) or srun (one task per GPU, ranks from Slurm)."),
    LauncherFlag("price_per_gpu_hour", "--price-per-gpu-hour", float, None,
                 "$ per GPU-hour, to show cost in money [default: cost in GPU-hours and core-hours only]."),
    LauncherFlag("pending_timeout", "--pending-timeout", float, DEFAULT_PENDING_TIMEOUT_S,
                 "Seconds a job may wait in the queue before it is cancelled.", min=1),
)


def options_from(given: dict, price: float | None, results_dir: Path | None) -> SlurmOptions:
    """The options of a Slurm sweep from the flags the user gave; each job's script
    and output are kept under the results directory (none on a dry run)."""
    if price is not None:
        raise SlurmUsageError("--price is a machine's $/h; on Slurm give --price-per-gpu-hour")
    values = dict(given)
    values["sbatch_args"] = tuple(values.get("sbatch_args") or ())
    return SlurmOptions(**values, keep_dir=results_dir / "slurm" if results_dir else None)


def check(options: SlurmOptions) -> None:
    """One line for the first option that cannot be right; nothing is submitted."""
    if options.launch not in LAUNCH_STYLES:
        raise SlurmUsageError(f"--launch: '{options.launch}' is not one of {', '.join(LAUNCH_STYLES)}")
    if options.gpu_flag not in GPU_FLAGS:
        raise SlurmUsageError(f"--gpu-flag: '{options.gpu_flag}' is not one of {', '.join(GPU_FLAGS)}")
    if options.time is not None and not _TIME.match(options.time):
        raise SlurmUsageError(f"--time: '{options.time}' is not a Slurm time limit "
                              "(HH:MM:SS, MM, or D-HH:MM:SS)")
    if options.price_per_gpu_hour is not None and options.price_per_gpu_hour < 0:
        raise SlurmUsageError(f"--price-per-gpu-hour: {options.price_per_gpu_hour} is negative")
    if options.pending_timeout <= 0:
        raise SlurmUsageError("--pending-timeout: give a number of seconds above 0")
    if options.cpus_per_gpu is not None and options.cpus_per_gpu < 1:
        raise SlurmUsageError("--cpus-per-gpu: give a whole number of 1 or more")
    for name in ("partition", "account", "reservation", "qos", "constraint", "mem"):
        value = getattr(options, name)
        if value is not None and (not value.strip() or any(c in value for c in "\n\r")):
            raise SlurmUsageError(f"--{name}: '{value}' is not a value sbatch takes")
    for arg in options.sbatch_args:
        if not arg.startswith("-") or any(c in arg for c in "\n\r"):
            raise SlurmUsageError(f"--sbatch-arg: '{arg}' is not one sbatch option "
                                  "(example: --sbatch-arg=--exclusive)")
        flag = arg.split("=", 1)[0]
        if flag in _OWN_FLAGS or (len(flag) > 2 and not flag.startswith("--")
                                  and flag[:2] in _OWN_FLAGS):
            raise SlurmUsageError(f"--sbatch-arg: gpubench sets {flag} itself from the sweep "
                                  "(use --nodes and --gpus-per-node)")
