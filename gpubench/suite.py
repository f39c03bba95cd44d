"""The workload suite: what each standard workload is called, where its script
lives, and what it measures. A workload's identity is a `WorkloadRef` that
flows through the sweep, so a user's own script runs the same way.

A user's script is known by its resolved path (however it was called), by
the hash of its contents (and of its --workdir), and by the environment
variables set for it that change what it does (ACCELERATE_MIXED_PRECISION,
NCCL_*, ...): an edited script, or one run under other settings, is another
workload version, measured again. A suite workload's arguments are checked
here, without torch, before anything is launched or rented."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from gpubench import project
from gpubench.errors import UnknownWorkloadError, UsageError
from gpubench.onhost import workdir_guard
from gpubench.workloads import rank_trace
from gpubench.workloads.rank_trace import TraceAsk


@dataclass(frozen=True)
class SuiteEntry:
    name: str
    script: str  # file name inside workloads/
    measures: str
    defaults: str
    summary: str


SUITE: tuple[SuiteEntry, ...] = (
    SuiteEntry("mnist-ddp", "mnist_ddp.py", "images/s, epoch time",
               "batch 64/GPU, 60k images, 1 epoch",
               "the pytorch/examples MNIST CNN under DDP (synthetic or real IDX data)"),
    SuiteEntry("resnet-ddp", "resnet_ddp.py", "images/s, epoch time (ImageNet-1k)",
               "ResNet-50, batch 256/GPU, 224x224 synthetic, channels_last, 200 steps "
               "(on a CPU: batch 8, 10 steps); --depth/--width/--image-size",
               "ResNet-50 in plain PyTorch on synthetic ImageNet-shaped batches"),
    SuiteEntry("gpt-ddp", "gpt_ddp.py", "tokens/s, model TFLOP/s, MFU",
               "GPT-2 small (12 layers, 12 heads, 768 wide), 1024-token context, batch 8 "
               "sequences/GPU, 50 steps (on a CPU: 1 sequence of 256 tokens, 5 steps); "
               "--params/--n-layer/--n-head/--n-embd/--block-size/--vocab-size",
               "a GPT-2-small-shaped decoder LM (nanoGPT) on synthetic tokens"),
    SuiteEntry("gpt-fsdp", "gpt_fsdp.py", "tokens/s, model TFLOP/s, MFU, peak memory and "
               "parameter bytes per GPU",
               "gpt-ddp's model and sizes (125M: GPT-2 small, batch 8 sequences of 1024 tokens/GPU, "
               "50 steps; on a CPU 1 of 256, 5 steps), FSDP2 full shard per block + root, fp32 "
               "(--precision bf16: bf16 parameters and compute, fp32 reduce); "
               "--params 125M|350M|760M|1.3B|2.7B|6.7B, --activation-checkpointing",
               "the same GPT sharded with FSDP2 (fully_shard), to set its memory and speed "
               "against gpt-ddp's"),
    SuiteEntry("recsys-ddp", "recsys_ddp.py", "ratings/s, epoch time",
               "ml-1m shape (6,040 users, 3,706 movies, 1M ratings), batch 1024/GPU, 32-dim embeddings, "
               "1 epoch",
               "the MovieLens user/movie embedding model (synthetic, or ratings.csv/.dat via --data)"),
    SuiteEntry("allreduce", "allreduce.py", "all_reduce algbw and busbw per size (nccl-tests), peak",
               "float32, 1 KB to 1 GB doubling (capped by memory), 5 warm-up + 20 timed per size",
               "torch.distributed all_reduce bandwidth curve"),
)


@dataclass(frozen=True)
class ProjectPlan:
    """What a user's project needs on the machine beside its files (gpubench.project):
    its requirements, a setup command run once per machine, the outputs pulled back."""

    requirements: project.Requirements | None = None
    setup: str | None = None
    outputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkloadRef:
    """A suite workload or a user's script: its name in records and its file."""

    name: str
    script: Path
    in_suite: bool
    workdir: Path | None = None  # a user's project directory, sent whole to a remote machine
    untouched: tuple[Path, ...] = ()  # gpubench's own paths in the run's working directory (the
    #   results): a run's files are moved aside after it (workdir_guard), these never are
    max_steps: int | None = None  # a user's script: ended after this many training steps (run --max-steps)
    project: ProjectPlan | None = None  # None: not read yet (the launcher reads its requirements)
    trace: TraceAsk | None = None  # run --trace: steps every rank traces (the sweep sets where)


def with_workdir(ref: WorkloadRef, workdir: Path) -> WorkloadRef:
    """The user's script together with the project directory it lives in (its
    modules, configs), which remote runs send along and run in."""
    if ref.in_suite:
        raise UsageError(f"--workdir is for your own scripts; {ref.name} is a suite workload")
    directory = workdir.expanduser().resolve()
    if not directory.is_dir():
        raise UsageError(f"--workdir: no such directory: {workdir}")
    if not ref.script.is_relative_to(directory):
        raise UsageError(f"--workdir: {ref.script} is not inside {directory}")
    return dataclasses.replace(ref, workdir=directory)


def project_dir(ref: WorkloadRef) -> Path:
    """The directory a user's script's outputs and settings are relative to: its
    --workdir, else the script's own directory."""
    return ref.workdir if ref.workdir is not None else ref.script.parent


def with_project(ref: WorkloadRef, outputs: str | None = None, setup: str | None = None,
                 install_project: bool = False) -> WorkloadRef:
    """The script with what its project asks for: the flags, then its pyproject.toml's
    [tool.gpubench] (flags win); its requirements from its own files. A suite workload
    takes only the requirements its script names; --outputs and --setup are for a
    user's script. ProjectFileError (one line) for a file or value that cannot be read."""
    if ref.in_suite:
        if outputs or setup:
            raise UsageError(f"--{'outputs' if outputs else 'setup'} is for your own scripts; "
                             f"{ref.name} is a suite workload")
        return dataclasses.replace(ref, project=ProjectPlan(project.find_requirements(ref.script, None)))
    settings = project.read_settings(ref.workdir)
    chosen = project.split_outputs(outputs) if outputs is not None else settings.outputs
    plan = ProjectPlan(project.find_requirements(ref.script, ref.workdir,
                                                 install_project or settings.install_project),
                       setup if setup is not None else settings.setup,
                       project.check_outputs(chosen, project_dir(ref)))
    max_steps = ref.max_steps if ref.max_steps is not None else settings.max_steps
    return dataclasses.replace(ref, project=plan, max_steps=max_steps)


def with_project_for_scripts(refs: list[WorkloadRef], outputs: str | None = None,
                             setup: str | None = None, install_project: bool = False) -> list[WorkloadRef]:
    """bench --workload A,B: each of the user's scripts among them with its project's
    plan (with_project), each suite workload with its own requirements; --outputs or
    --setup with suite workloads alone is told they are for scripts."""
    if (outputs or setup) and all(ref.in_suite for ref in refs):
        raise UsageError(f"--{'outputs' if outputs else 'setup'} is for your own scripts; "
                         "--workload names only suite workloads")
    return [with_project(ref) if ref.in_suite else with_project(ref, outputs, setup, install_project)
            for ref in refs]


def with_max_steps(ref: WorkloadRef, max_steps: int | None) -> WorkloadRef:
    """The user's script, to be ended after `max_steps` training steps (the probe ends it,
    its record said so); a suite workload counts its own steps."""
    if max_steps is None:
        return ref
    if ref.in_suite:
        raise UsageError(f"--max-steps is for your own scripts; {ref.name} takes its own: -- --steps N")
    return dataclasses.replace(ref, max_steps=max_steps)


def with_max_steps_for_scripts(refs: list[WorkloadRef], max_steps: int | None) -> list[WorkloadRef]:
    """bench --workload A,B --max-steps N: each of the user's scripts among them ended after
    N training steps, the suite workloads left to their own steps; a list of suite workloads
    alone is told where their steps are set."""
    if max_steps is None:
        return refs
    if all(ref.in_suite for ref in refs):
        raise UsageError("--max-steps is for your own scripts; --workload names only suite workloads "
                         "(each takes its own: --args NAME=\"--steps N\")")
    return [ref if ref.in_suite else with_max_steps(ref, max_steps) for ref in refs]


def trace_steps(trace: bool, steps: int | None) -> int | None:
    """The steps --trace and --trace-steps ask for (--trace-steps alone implies --trace);
    None: no trace."""
    if steps is not None:
        return steps
    return rank_trace.DEFAULT_STEPS if trace else None


def with_trace(ref: WorkloadRef, steps: int | None) -> WorkloadRef:
    """The workload with `steps` steps of every rank traced (run --trace); None: untraced.
    A user's script ended by --max-steps must take enough steps to trace and still time
    some (rank_trace.least_script_steps)."""
    if steps is None:
        return ref
    problem = rank_trace.steps_problem(steps)
    if problem:
        raise UsageError(problem)
    least = rank_trace.least_script_steps(steps)
    if not ref.in_suite and ref.max_steps is not None and ref.max_steps < least:
        raise UsageError(f"--max-steps {ref.max_steps} is too few to trace {steps} step(s) and time "
                         f"others: the script needs at least {least} (or fewer --trace-steps)")
    return dataclasses.replace(ref, trace=TraceAsk(steps))


def workloads_dir() -> Path:
    import gpubench.workloads  # an empty package: cheap to import

    return Path(gpubench.workloads.__file__).resolve().parent


def suite_names() -> list[str]:
    return [e.name for e in SUITE]


def resolve(name_or_path: str, workdir: Path | None = None) -> WorkloadRef:
    """A suite workload by name, or a user's .py script by path; with `workdir`
    (a script only), the project directory the script is sent and run in."""
    ref = _resolve_one(name_or_path)
    return with_workdir(ref, workdir) if workdir is not None else ref


def resolve_list(names: str, workdir: Path | None = None) -> list[WorkloadRef]:
    """`--workload mnist-ddp,train.py`: each name or script in turn. `workdir` goes
    with the user's scripts among them; with none among them it is a usage error."""
    refs = [_resolve_one(name.strip()) for name in names.split(",") if name.strip()]
    if not refs:
        raise UsageError("--workload: name at least one workload (see 'gpubench workloads')")
    if workdir is None:
        return refs
    if all(ref.in_suite for ref in refs):
        raise UsageError("--workdir is for your own scripts; --workload names only suite workloads")
    return [ref if ref.in_suite else with_workdir(ref, workdir) for ref in refs]


def _resolve_one(name_or_path: str) -> WorkloadRef:
    for entry in SUITE:
        if entry.name == name_or_path:
            return WorkloadRef(entry.name, workloads_dir() / entry.script, True)
    path = Path(name_or_path).expanduser()
    if path.suffix == ".py" and path.is_file():
        return WorkloadRef(script_name(path), path.resolve(), False)
    if path.suffix == ".py":
        raise UnknownWorkloadError(f"no such script: {name_or_path}")
    raise UnknownWorkloadError(
        f"unknown workload '{name_or_path}'; known workloads: {', '.join(suite_names())}"
        " (or give the path of a .py script)")


def script_name(path: Path) -> str:
    """The name a user's script goes by in records and reports, the same however it
    was called (./train.py, train.py, ../proj/train.py): its resolved path, with ~
    for the home directory."""
    resolved = Path(path).expanduser().resolve()
    home = Path.home().resolve()
    if resolved.is_relative_to(home) and resolved != home:
        return "~/" + resolved.relative_to(home).as_posix()
    return str(resolved)


def canonical_name(name: str) -> str:
    """A --workload value as the records name it: a suite name as it is, an existing
    script by script_name."""
    path = Path(name).expanduser()
    if name not in suite_names() and path.suffix == ".py" and path.is_file():
        return script_name(path)
    return name


def check_args(ref: WorkloadRef, workload_args: list[str]) -> None:
    """A UsageError (one line) when a suite workload would refuse its arguments:
    checked here with the workload's own parser, which needs no torch, so a typo
    costs nothing. A user's script checks its own arguments when it runs."""
    if not ref.in_suite:
        return
    from gpubench.workloads import flags

    problem = flags.problem(ref.name, list(workload_args))
    if problem:
        raise UsageError(f"{ref.name}: {problem}; nothing was run (its flags: "
                         f"python -m gpubench.workloads.flags {ref.name} --help)")


# --------------------------------------------------------------------------- identity
SKIPPED_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules",
                ".gpubench-left-behind"}
HASHED_BYTES = 16 * 2**20  # larger files (data sets) count by size and modification time
# The environment variables that change what a script does (its precision, its
# launcher's settings, its collectives, its threads, the GPUs it sees): the
# launchers pass gpubench's own environment on to the script's processes.
SCRIPT_ENV_PREFIXES = ("ACCELERATE_", "LIGHTNING_", "PL_", "NCCL_", "TORCH_")
SCRIPT_ENV_NAMES = ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def script_identity(ref: WorkloadRef) -> dict:
    """What a user's script is, as the records keep it and reruns are matched on:
    its resolved path, the SHA-256 of its contents (and of --workdir's files, less
    gpubench's own output), the settings of script_env, and the --max-steps it is
    ended after (None: it ends itself, as a record from before this field reads).
    Empty for a suite workload, which is known by its name."""
    if ref.in_suite:
        return {}
    identity = {"script_path": str(ref.script), "script_sha256": file_sha256(ref.script),
                "script_env": script_env(), "max_steps": ref.max_steps}
    if ref.workdir is not None:
        identity["workdir_sha256"] = tree_sha256(ref.workdir, ref.untouched,
                                                 set(workdir_guard.own_output()))
    return identity


def script_env(environ: dict[str, str] | None = None) -> dict[str, str] | None:
    """{name: value} of the variables of SCRIPT_ENV_PREFIXES and SCRIPT_ENV_NAMES that
    the user set (gpubench's own environment, `environ`: os.environ; what a launcher
    sets for the workers, one thread per process or the GPUs of a count, is not in
    it), sorted by name; None when there are none, as a record from before this
    field reads, so that those records still match a sweep run without any."""
    environ = os.environ if environ is None else environ
    found = {name: value for name, value in environ.items()
             if name.startswith(SCRIPT_ENV_PREFIXES) or name in SCRIPT_ENV_NAMES}
    return dict(sorted(found.items())) or None


def file_sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def tree_sha256(root: Path, skip: tuple[Path, ...] = (), own: set = frozenset()) -> str:
    """One SHA-256 over every file under root: relative path and contents (size and
    modification time for a file above HASHED_BYTES); version control, virtual
    environments, caches, `skip` and the files `own` names by (st_dev, st_ino)
    (gpubench's own output, workdir_guard.own_output) left out."""
    digest = hashlib.sha256()
    skipped = {os.path.abspath(p) for p in skip}
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS
                         and os.path.join(top, d) not in skipped)
        for name in sorted(files):
            path = os.path.join(top, name)
            if name.endswith(".pyc") or path in skipped:
                continue
            try:
                st = os.stat(path)
            except OSError:
                st = None  # a dangling link: its name counts
            if st is not None and (st.st_dev, st.st_ino) in own:
                continue
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            if st is None:
                continue
            if st.st_size > HASHED_BYTES:
                digest.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
            else:
                digest.update((file_sha256(Path(path)) or "").encode())
    return digest.hexdigest()


# --------------------------------------------------------------------------- arguments
def parse_per_workload_args(specs: list[str], refs: list[WorkloadRef]) -> dict[str, list[str]]:
    """`--args gpt-ddp="--n-layer 2"` (repeatable) as {workload name: its arguments}:
    NAME=ARGS, ARGS split as a shell would. NAME is one of the workloads being run
    (a script as it was given, however it is spelled); a second --args for the same
    workload adds to the first. Anything else is one UsageError line."""
    import shlex

    names = [ref.name for ref in refs]
    chosen: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--args: '{spec}' is not NAME=ARGS (e.g. --args gpt-ddp=\"--n-layer 2\")")
        name = canonical_name(name.strip())
        if name not in names:
            raise UsageError(f"--args: '{name}' is not a workload of this run "
                             f"(--workload names {', '.join(names)})")
        try:
            chosen.setdefault(name, []).extend(shlex.split(text))
        except ValueError as e:   # an unclosed quote
            raise UsageError(f"--args {name}: cannot split '{text}': {e}") from None
    return chosen


def args_for(ref: WorkloadRef, common: list[str], per_workload: dict[str, list[str]]) -> list[str]:
    """A workload's arguments: those after -- (every workload's), then its own from
    --args (a flag given twice: its own, later, is the one argparse keeps)."""
    return [*common, *per_workload.get(ref.name, [])]
