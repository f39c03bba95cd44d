"""Errors of Slurm runs. Each message is one line fit for the terminal; where
Slurm said why, its own words are quoted."""

from gpubench.errors import GpubenchError, UsageError


class SlurmUsageError(UsageError):
    """A Slurm option that cannot be right: a malformed --time, an unknown --launch,
    more nodes than the partition has, no sbatch and no login host."""


class SlurmError(GpubenchError):
    """A Slurm command failed or answered in a way gpubench cannot read."""


class SlurmRefusedError(SlurmError):
    """sbatch refused the job (an unknown partition or account, a limit): Slurm's words."""


class PendingTimeoutError(SlurmError):
    """A job stayed pending past --pending-timeout; it has been cancelled."""
