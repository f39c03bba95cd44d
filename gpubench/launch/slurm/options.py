"""What a Slurm sweep asks of the cluster beyond the sweep itself: where the jobs
go (partition, account, reservation, QOS, constraint), how long they may take,
how each job starts its processes, and how long gpubench waits for them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

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
