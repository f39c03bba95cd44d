"""The sbatch script of one sweep point, as a person would write it: the
resources in #SBATCH lines, then one srun that starts every process.

Two launch styles, because clusters' users have both:

  torchrun  one task per node; each runs torchrun, which starts the node's
            processes and meets the other nodes through c10d rendezvous at the
            first node of the allocation (as pytorch/examples' Slurm scripts do)
  srun      one task per GPU; each task is one rank, its RANK, LOCAL_RANK and
            WORLD_SIZE taken from SLURM_PROCID, SLURM_LOCALID and SLURM_NTASKS,
            the first node as MASTER_ADDR (as PyTorch Lightning expects on Slurm)

Everything a job reads or writes sits in its own directory on the shared
filesystem: the script, Slurm's output and error files, the workload's record
and the exit code of srun (the end state where accounting is off), and on nodes
with GPUs the GPU sampler (gpu_sampling.py), which the first task of each node runs
beside its command: a line per GPU a second in the job's output, for the live view.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from gpubench.launch.gpu_sampling import feed_args
from gpubench.launch.slurm.options import GRES, SRUN, TORCHRUN, SlurmOptions

SCRIPT_NAME = "job.sbatch"
OUTPUT_NAME = "slurm-%j.out"  # %j: sbatch puts the job id in
ERROR_NAME = "slurm-%j.err"
RECORD_NAME = "record.json"
EXIT_NAME = "exit-code"
SAMPLER_NAME = "gpu_sampling.py"  # gpubench/launch/gpu_sampling.py, copied beside the script
RDZV_PORT_BASE = 29500  # + job id mod 1000: two jobs on one node do not share a port


def output_file(job_dir: str, job_id: str) -> str:
    return f"{job_dir}/{OUTPUT_NAME.replace('%j', job_id)}"


def error_file(job_dir: str, job_id: str) -> str:
    return f"{job_dir}/{ERROR_NAME.replace('%j', job_id)}"


@dataclass(frozen=True)
class JobSpec:
    """One job: a sweep point on the cluster. Paths are the cluster's, absolute."""

    name: str                  # what the user calls the workload (the job name follows from it)
    nodes: int
    procs_per_node: int        # one process per GPU
    job_dir: str               # this job's directory on the shared filesystem
    workdir: str               # where the processes start
    python: str                # the Python with torch on the compute nodes (may be a command)
    script: str                # the workload, relative to workdir or absolute
    script_args: list[str] = field(default_factory=list)
    gpus: bool = True          # False on a partition without GPUs: no GPU request, CPU processes
    env: dict = field(default_factory=dict)  # more variables the job exports (run --trace's)

    @property
    def script_path(self) -> str:
        return f"{self.job_dir}/{SCRIPT_NAME}"

    @property
    def record_path(self) -> str:
        return f"{self.job_dir}/{RECORD_NAME}"

    @property
    def exit_path(self) -> str:
        return f"{self.job_dir}/{EXIT_NAME}"

    @property
    def sampler_path(self) -> str:
        return f"{self.job_dir}/{SAMPLER_NAME}"


def job_name(workload: str) -> str:
    """'gpubench-mnist-ddp'; a user's script by its file's stem."""
    stem = workload.rsplit("/", 1)[-1].removesuffix(".py")
    return "gpubench-" + (re.sub(r"[^A-Za-z0-9_.-]", "_", stem) or "script")


def sbatch_lines(spec: JobSpec, options: SlurmOptions) -> list[str]:
    """The #SBATCH lines: resources, then where the job goes, then its files."""
    per_task_gpus = spec.procs_per_node if options.launch == TORCHRUN else 1
    tasks = 1 if options.launch == TORCHRUN else spec.procs_per_node
    lines = [f"--job-name={job_name(spec.name)}", f"--nodes={spec.nodes}",
             f"--ntasks-per-node={tasks}"]
    if spec.gpus:
        lines.append(f"--gres=gpu:{spec.procs_per_node}" if options.gpu_flag == GRES
                     else f"--gpus-per-node={spec.procs_per_node}")
    if options.cpus_per_gpu is not None:
        lines.append(f"--cpus-per-task={options.cpus_per_gpu * per_task_gpus}")
    for flag, value in (("mem", options.mem), ("time", options.time),
                        ("partition", options.partition), ("account", options.account),
                        ("reservation", options.reservation), ("qos", options.qos),
                        ("constraint", options.constraint)):
        if value is not None:
            lines.append(f"--{flag}={value}")
    lines += [f"--output={spec.job_dir}/{OUTPUT_NAME}", f"--error={spec.job_dir}/{ERROR_NAME}"]
    lines += list(options.sbatch_args)
    return lines


def _gpu_watch(spec: JobSpec, python: str) -> str:
    """What each task runs its command ("$@") under on nodes with GPUs: the node's first
    task starts the GPU sampler beside it (where the sampler and nvidia-smi are there),
    then stops it and waits for it once the command ends, exiting with the command's code."""
    q = shlex.quote
    sampler = q(spec.sampler_path)
    return (f'sampler=; if [ "${{SLURM_LOCALID:-0}}" = 0 ] && [ -f {sampler} ] && '
            "command -v nvidia-smi > /dev/null 2>&1; then "
            f"{python} {sampler} {shlex.join(feed_args(procs=spec.procs_per_node))} "
            '--node "node${SLURM_NODEID:-0}" < /dev/null 2> /dev/null & sampler=$!; fi; '
            '"$@"; code=$?; if [ -n "${sampler:-}" ]; then kill "$sampler" 2> /dev/null; '
            'wait "$sampler" 2> /dev/null; fi; exit "$code"')


def _launch(spec: JobSpec, options: SlurmOptions) -> list[str]:
    q = shlex.quote
    python = " ".join(q(p) for p in shlex.split(spec.python))
    workload = " ".join(q(a) for a in [spec.script, *spec.script_args])
    watch = []
    if spec.gpus:
        watch = ["# each node's GPUs sampled beside its first task: a line per GPU a second in",
                 "# this output, for gpubench's live view (none where nvidia-smi is missing)",
                 f"gpu_watch={q(_gpu_watch(spec, python))}"]
    if options.launch == SRUN:
        ranks = ("export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS "
                 "LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE; ")
        task = q(ranks) + '"$gpu_watch"' if spec.gpus else q(ranks + 'exec "$@"')
        return ['export MASTER_ADDR="$head" MASTER_PORT="$port"', *watch,
                "# one task per GPU, each one rank; its place in the world comes from Slurm",
                f"srun --kill-on-bad-exit=1 bash -c {task} rank \\",
                f"    {python} {workload}"]
    start = (['srun --kill-on-bad-exit=1 bash -c "$gpu_watch" node \\',
              f"    {python} -m torch.distributed.run \\"] if spec.gpus
             else [f"srun --kill-on-bad-exit=1 {python} -m torch.distributed.run \\"])
    return [*watch, "# one task per node: torchrun starts the node's processes and meets the other",
            "# nodes at the first one (c10d rendezvous)", *start,
            f'    --nnodes="$SLURM_NNODES" --nproc_per_node={spec.procs_per_node} \\',
            '    --rdzv_id="$SLURM_JOB_ID" --rdzv_backend=c10d --rdzv_endpoint="$head:$port" \\',
            f"    {workload}"]


def render(spec: JobSpec, options: SlurmOptions) -> str:
    """The whole script. It runs as it is with `sbatch job.sbatch` too."""
    q = shlex.quote
    n = spec.procs_per_node
    style = ("one torchrun per node" if options.launch == TORCHRUN else "one srun task per GPU")
    gpus = f"{n} gpu{'s' if n > 1 else ''}"
    body = [
        "#!/bin/bash",
        f"# gpubench: {spec.name} on {spec.nodes} node{'s' if spec.nodes > 1 else ''} x {gpus}, "
        f"{style}",
        f"# submit it by hand: sbatch {spec.script_path}",
        *[f"#SBATCH {line}" for line in sbatch_lines(spec, options)],
        "",
        "# srun no longer takes --cpus-per-task from the job (Slurm 22.05 on): pass it on",
        'if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"; fi',
        "# the node's CPUs shared out between its processes, so no process assumes it has them all",
        f"threads=$(( ${{SLURM_CPUS_ON_NODE:-1}} / {n} ))",
        'export OMP_NUM_THREADS=$(( threads > 0 ? threads : 1 ))',
        f"export GPUBENCH_RECORD_FILE={q(spec.record_path)}",
        *[f"export {name}={q(value)}" for name, value in spec.env.items()],
        "export PYTHONUNBUFFERED=1",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
        f"port=$(( {RDZV_PORT_BASE} + SLURM_JOB_ID % 1000 ))",
        f"cd {q(spec.workdir)} || exit 1",
        *_launch(spec, options),
        "code=$?",
        f'echo "$code" > {q(spec.exit_path)}',
        'exit "$code"',
    ]
    return "\n".join(body) + "\n"
