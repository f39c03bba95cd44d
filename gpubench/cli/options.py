"""The options and arguments that more than one command takes, each defined once
(flag, short option, help text) as a typer `Annotated` alias. A command writes
`disk: DiskOpt = 100`; the default stays in the signature, where typer wants it,
and tests/cli/test_shared_options.py checks that commands sharing a flag agree
on its help and its default.

Where commands give one flag different meanings, each meaning has its own alias,
named for what it holds: `run --gpus 1,2,4` is GpuCountsOpt (the counts to sweep),
`provision --gpus 4` and `bench --gpus 4` are MachineGpusOpt (the machine's GPUs),
`offers --gpus 4` is MachineGpusFilterOpt (only machines with that many);
`run --timeout` and `bench --timeout` are RunTimeoutOpt, `down --timeout` is
GoneTimeoutOpt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from gpubench.cli.completion import provider_names
from gpubench.format import FORMATS, TableFit, spoken
from gpubench.providers import registry


# Which provider: derived from the registry, so a new provider appears in every help text.
PROVIDER_HELP = f"{registry.help_names()}."
PROVIDERS_HELP = f"Any of {registry.help_names()} [default: all]."

ProviderArg = Annotated[str, typer.Argument(help=PROVIDER_HELP, autocompletion=provider_names)]
ProvidersArg = Annotated[Optional[List[str]], typer.Argument(metavar="[PROVIDER]...", help=PROVIDERS_HELP,
                                                             autocompletion=provider_names)]

# The machine to rent (provision, bench) or to look for (offers).
MACHINE_GPUS_HELP = "GPUs on the machine."
GPU_TYPE_HELP = "GPU type, e.g. H100, A100, 'RTX 4090'."
MAX_PRICE_HELP = "Highest $/h for the machine."
DISK_HELP = "Disk in GB (fixed at creation on Vast.ai)."
IMAGE_HELP = "Container image (Vast.ai, RunPod)."
NAME_HELP = "Instance name [default: PROVIDER-xxxxxx]."

MachineGpusOpt = Annotated[int, typer.Option("--gpus", help=MACHINE_GPUS_HELP)]
MachineGpusFilterOpt = Annotated[Optional[int], typer.Option("--gpus", help=MACHINE_GPUS_HELP)]
TotalGpusOpt = Annotated[int, typer.Option("--gpus", min=1, help="GPUs in all, over every machine.")]
GpuTypeOpt = Annotated[Optional[str], typer.Option("--gpu-type", help=GPU_TYPE_HELP)]
OffersGpuOpt = Annotated[Optional[str], typer.Option("--gpu", help=GPU_TYPE_HELP)]  # offers spells it --gpu
MaxPriceOpt = Annotated[Optional[float], typer.Option("--max-price", help=MAX_PRICE_HELP)]
DiskOpt = Annotated[int, typer.Option("--disk", help=DISK_HELP)]
ImageOpt = Annotated[Optional[str], typer.Option("--image", help=IMAGE_HELP)]
NameOpt = Annotated[Optional[str], typer.Option("--name", help=NAME_HELP)]
REGION_HELP = "Region or data center."
RegionOpt = Annotated[Optional[str], typer.Option("--region", help=REGION_HELP)]
# Consent to a machine other than the one confirmed, should that one never boot.
ANY_GPU_HELP = ("If the machine confirmed never boots, rent another GPU type without asking "
                "(without it, gpubench asks, or under --yes stops; --max-price likewise allows "
                "a higher price up to it).")
AnyGpuOpt = Annotated[bool, typer.Option("--any-gpu", help=ANY_GPU_HELP)]

# How hard provisioning tries (provision, bench).
AttemptsOpt = Annotated[int, typer.Option("--attempts", help="Launches to try before giving up.")]
BootTimeoutOpt = Annotated[float, typer.Option("--boot-timeout", help="Seconds to reach running.")]
SshTimeoutOpt = Annotated[float, typer.Option("--ssh-timeout", help="Seconds for SSH to answer.")]

# Machines that stop themselves (provision, bench) and a ceiling on spending (bench).
MAX_HOURS_HELP = ("Hours after which the machine stops itself unless a gpubench run is active "
                  "on it (a watchdog on the machine; provision: none by default; bench: the "
                  "plan's expected time plus a margin).")
BUDGET_HELP = ("Most dollars to spend: a plan expected to cost more is refused, and the bench "
               "stops and tears down before it would pass [default: [defaults] budget in "
               "config.toml, else none].")
MaxHoursOpt = Annotated[Optional[float], typer.Option("--max-hours", help=MAX_HOURS_HELP)]
BudgetOpt = Annotated[Optional[float], typer.Option("--budget", help=BUDGET_HELP)]

# What a prediction considers (advise): machine sizes, and the most the work may cost.
MACHINE_SIZES_HELP = ("GPUs per machine to consider, e.g. 1,2,4,8 [default: every size offered; "
                      "1, 2, 4 and 8 where any count can be rented].")
WORK_BUDGET_HELP = "The most the work may cost, in dollars: dearer configurations are left out."
MachineSizesOpt = Annotated[Optional[str], typer.Option("--gpus", help=MACHINE_SIZES_HELP)]
WorkBudgetOpt = Annotated[Optional[float], typer.Option("--budget", help=WORK_BUDGET_HELP)]

# The preflight gate on the machine (nvidia-smi, a short load test): bench runs it unless
# told not to; provision and run --on run it when asked.
NO_PREFLIGHT_HELP = ("Skip the check of the machine that bench makes before any benchmark "
                     "time (nvidia-smi: GPUs, ECC, throttling, PCIe link; driver, /dev/shm, disk; "
                     "a short load test), which replaces a machine that fails it.")
PREFLIGHT_HELP = ("Check the machine first (nvidia-smi: GPUs, ECC, throttling, PCIe link; "
                  "driver, /dev/shm, disk; a short load test); provision replaces one that "
                  "fails, within --attempts; run --on asks before using it.")
NoPreflightOpt = Annotated[bool, typer.Option("--no-preflight", help=NO_PREFLIGHT_HELP)]
PreflightOpt = Annotated[bool, typer.Option("--preflight", help=PREFLIGHT_HELP)]
# run --on: use a machine that failed the preflight check without asking.
PROCEED_HELP = ("Use a machine that fails --preflight without asking; after a run that hit "
                "--timeout, skip the larger counts without asking.")
ProceedOpt = Annotated[bool, typer.Option("--yes", "-y", help=PROCEED_HELP)]

# An instance gpubench already has (down, ssh); required where no default is given.
INSTANCE_NAME_HELP = "Instance name (see 'gpubench ls')."
InstanceNameArg = Annotated[Optional[str], typer.Argument(help=INSTANCE_NAME_HELP)]

YES_HELP = "Do not ask before renting or terminating."
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help=YES_HELP)]

# Sweeps (run, bench).
GPU_COUNTS_HELP = "GPU counts to sweep, e.g. 1,2,4 [default: 1 and powers of two up to the GPUs present]."
WORKLOAD_ARGS_HELP = "Arguments after -- go to every workload."
FORCE_HELP = "Run counts that already have an ok record again."
REMOTE_PYTHON_HELP = "The Python with torch on the remote machine."
WORKDIR_HELP = ("The project directory of your own script(s): sent whole to a remote machine "
                "(less what its .gitignore names), and runs start in it.")
RUN_TIMEOUT_HELP = "Seconds allowed for each run."
REPEAT_HELP = ("Runs of each GPU count; the report gives their median and spread "
               "[default: 1 on a GPU machine, 3 on a CPU].")
MAX_STEPS_HELP = ("Your own script(s): end each after this many training steps (its optimizer "
                  "steps), its arguments untouched; the first max(2, a tenth) are its warm-up "
                  "[default: it ends itself].")

GpuCountsOpt = Annotated[Optional[str], typer.Option("--gpus", help=GPU_COUNTS_HELP)]
WorkloadArgsArg = Annotated[Optional[List[str]],
                            typer.Argument(metavar="[-- WORKLOAD_ARGS]", help=WORKLOAD_ARGS_HELP)]
ForceOpt = Annotated[bool, typer.Option("--force", help=FORCE_HELP)]
RemotePythonOpt = Annotated[str, typer.Option("--remote-python", help=REMOTE_PYTHON_HELP)]
WorkdirOpt = Annotated[Optional[Path], typer.Option("--workdir", help=WORKDIR_HELP)]
RunTimeoutOpt = Annotated[float, typer.Option("--timeout", min=1, help=RUN_TIMEOUT_HELP)]
RepeatOpt = Annotated[Optional[int], typer.Option("--repeat", min=1, help=REPEAT_HELP)]
MaxStepsOpt = Annotated[Optional[int], typer.Option("--max-steps", min=3, help=MAX_STEPS_HELP)]
TRACE_HELP = ("Trace a few steps of every rank with torch.profiler in the first run of each count, "
              "outside its timed figures: one gzipped Chrome trace per rank in "
              "RESULTS/<run id>/traces/<count>/ (open it in ui.perfetto.dev or chrome://tracing), "
              "summarised after the run.")
TRACE_STEPS_HELP = "Steps each rank traces, 1 to 20 (implies --trace) [default: 3]."
TraceOpt = Annotated[bool, typer.Option("--trace", help=TRACE_HELP)]
TraceStepsOpt = Annotated[Optional[int], typer.Option("--trace-steps", metavar="N", help=TRACE_STEPS_HELP)]

# A user's project on the machine (run, bench): its pyproject.toml's [tool.gpubench] gives
# the same settings; a flag wins.
OUTPUTS_HELP = ("Your script's outputs, relative to its project (globs allowed), e.g. "
                "checkpoints/,runs/*.pt: pulled into <results>/<run id>/outputs/<count>/ after "
                "each count, and every few minutes while it runs.")
SETUP_HELP = ("A command run once per machine in the synced project before the first count "
              "(after the requirements), e.g. \"python prepare_data.py\".")
INSTALL_PROJECT_HELP = "Install the project itself (pip install .) with its requirements."
VOLUME_HELP = ("A volume of the ledger ('gpubench volume ls'): offers only where it is, mounted on the "
               "machine at /data/gpubench, and every run gets its path as $GPUBENCH_DATA.")
VolumeOpt = Annotated[Optional[str], typer.Option("--volume", help=VOLUME_HELP)]
OutputsOpt = Annotated[Optional[str], typer.Option("--outputs", help=OUTPUTS_HELP)]
SetupOpt = Annotated[Optional[str], typer.Option("--setup", help=SETUP_HELP)]
InstallProjectOpt = Annotated[bool, typer.Option("--install-project", help=INSTALL_PROJECT_HELP)]

# Terminating (down): a different --timeout from a run's.
GONE_TIMEOUT_HELP = "Seconds to wait for each instance to be gone."
GoneTimeoutOpt = Annotated[float, typer.Option("--timeout", help=GONE_TIMEOUT_HELP)]

# Results and output.
RESULTS_HELP = "Results directory [default: [defaults] results in config.toml, else ./results]."
FORMAT_HELP = f"{spoken(FORMATS)}."

ResultsOpt = Annotated[Optional[Path], typer.Option("--results", help=RESULTS_HELP)]

# How a table for people meets the terminal (offers, ls, report): every column at full
# width, or only the columns named; a number is never cut either way.
WIDE_HELP = "Every column at full width, however wide the terminal."
COLUMNS_HELP = ("Only these columns, in this order: column names or headings, e.g. gpu,gpus "
                "(csv and json too).")
WIDTH_HINT = "--wide shows every column, --columns a,b,c the ones named"
WideOpt = Annotated[bool, typer.Option("--wide", help=WIDE_HELP)]
# Rows of a long listing (offers, advise) shown to people.
ROWS_SHOWN = 20
ROWS_HELP = (f"Rows to show; 0 for all [default: {ROWS_SHOWN} in a table or markdown, all in "
             f"json and csv].")
RowsOpt = Annotated[Optional[int], typer.Option("--limit", min=0, help=ROWS_HELP)]
ColumnsOpt = Annotated[Optional[str], typer.Option("--columns", metavar="A,B,C", help=COLUMNS_HELP)]


def table_fit(wide: bool, columns: str | None, hint: str = WIDTH_HINT) -> TableFit:
    """--wide and --columns as the TableFit a table is rendered with; `hint` ends the
    line naming the columns a table left out."""
    from gpubench.errors import UsageError

    names = tuple(n.strip() for n in (columns or "").split(",") if n.strip())
    if columns is not None and not names:
        raise UsageError("--columns: name at least one column (e.g. --columns gpu,gpus)")
    return TableFit(wide=wide, columns=names, hint=hint)

FormatOpt = Annotated[str, typer.Option("--format", help=FORMAT_HELP)]
# A command whose data is one document (what was rented, taken down, run): words, or
# one JSON document on stdout with the progress on stderr.
DOCUMENT_FORMAT_HELP = "table (words for people) or json (one document on stdout; progress on stderr)."
DocumentFormatOpt = Annotated[str, typer.Option("--format", help=DOCUMENT_FORMAT_HELP)]

# Live progress (cli/progress.py).
QUIET_HELP = "Plain lines instead of the live progress display, and no step lines."
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)]
PublicNetworkOpt = Annotated[bool, typer.Option(
    "--public-network", help="With --nodes: where no physical cluster holds the machines (Vast.ai "
                             "overlay networks), join separate machines over the public internet.")]
