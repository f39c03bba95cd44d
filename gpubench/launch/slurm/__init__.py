"""Slurm: each sweep point is one sbatch job, on this machine's cluster
(`--on slurm`, sbatch on PATH) or through a login node over SSH
(`--on slurm:[user@]LOGIN[:port]`).

    options.py   SlurmOptions: partition, account, time, launch style, deadlines, price
    script.py    the sbatch script of one point (torchrun or srun launch)
    commands.py  sbatch, squeue, sacct, scancel, sinfo through one small shell, here or over SSH
    states.py    their machine-readable output read into JobState and Partition
    follow.py    one job followed to its end: display, deadlines, Ctrl-C -> scancel
    launcher.py  SlurmLauncher, the Launcher the sweep drives; records with the job's fields
    login.py     [user@]LOGIN[:port] (or an ssh_config Host) to an SSH target
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpubench.launch.slurm.options import SlurmOptions

if TYPE_CHECKING:
    from gpubench.launch.factory import LaunchOptions
    from gpubench.launch.slurm.launcher import SlurmLauncher

__all__ = ["SlurmOptions", "open_launcher"]


def open_launcher(spec: str, options: "LaunchOptions") -> "SlurmLauncher":
    """The factory's entry: '' for this machine's Slurm, else the login node."""
    from gpubench import paths
    from gpubench.launch.slurm import launcher

    slurm = options.scheme_options if options.scheme_options is not None else SlurmOptions()
    if not isinstance(slurm, SlurmOptions):
        raise TypeError(f"LaunchOptions.scheme_options for slurm is a SlurmOptions, not {slurm!r}")
    if not spec:
        return launcher.open_local(options.remote_python, options.remote_dir, slurm, options.echo,
                                   options.dry_run)
    return launcher.open_ssh(spec, options.key, options.known_hosts or paths.known_hosts_path(),
                             options.remote_python, options.remote_dir, options.connect_wait,
                             slurm, options.echo, options.dry_run)
