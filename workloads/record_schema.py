"""The result record: every common field, its type, unit and meaning, who fills
it, and how the report reads and shows it.

One JSON object per run. The workload's harness writes its half on the machine
(workloads/harness.py build_record); gpubench completes it when the run is over
(gpubench/sweep/records.py); the report reads the fields marked `read_as` from
every record and shows the fields marked `column`, some computed from the
others (filled_by REPORT, one formula each in gpubench/report/compute.py).
Adding a report column is one entry here (plus its formula when the report
computes it): the frame the report reads, its csv/json rows, its tables for
people and its cache all follow this table.

A workload may add fields of its own (a model's parameter count, a bandwidth
curve); they travel in the record untouched and are described in the workload.

Imports only the standard library: it is copied to GPU machines beside the
workloads (which import it as `record_schema`) and installed in gpubench as
`gpubench.workloads.record_schema`.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 1  # records before version 1 may use older names: Field.old_names

# `sharding` values the harness writes (harness.sharding_of) and gpubench reads back
REPLICATED = "DDP (replicated)"  # one whole replica per process, DDP's all-reduce
ONE_PROCESS = "none (a world of one: the model alone, no DDP)"  # harness.replicate at world 1

# Who fills a field.
WORKLOAD = "workload"  # the workload's harness, on the machine
GPUBENCH = "gpubench"  # gpubench, when the run is over
BOTH = "both"  # the workload; gpubench for a run that wrote none (a failure, a user's
#                script) or to correct it (the name the user knows, the machine's GPU, nodes)
REPORT = "report"  # the report, from the fields above; never stored in a record
LAUNCHER = "launcher"  # the launcher that ran it, for what only it knows (a Slurm job's
#                        id, end state and allocation); absent from other launchers' records
HOST_CHECK = "host check"  # gpubench's preflight check of a rented machine, in every record of
#                            a bench on it; absent where no check ran
BILLING = "billing"  # gpubench once a bench's machine is confirmed gone: what the machine cost,
#                     added to the records of the runs made on it (gpubench/store/billing.py)

# How the report reads a field out of records (the type of its column).
LABEL = "label"  # text with few distinct values (names, ids): kept as category codes
NUMBER = "number"  # a float; null becomes NaN
TEXT = "text"  # free text (an error message): kept as it is

# Which rows of the report's csv/json output carry a column.
EVERY_ROW = "every row"
FAILED_ROWS = "failed rows"  # only the failed runs listed after the figures

# When a table for people shows a column.
ALWAYS = "always"
VARIES = "varies"  # only when its rows do not all have the same value
ABOVE_ONE = "above one"  # only when a row's value is above 1
SOME_ROW = "some row"  # only when a row has a value (not null, not empty)
MULTI_NODE = "multi-node"  # only when a row spans more than one node

# Which tables for people show a column: those of work per second (training
# workloads, scripts), those of a bandwidth test (allreduce), or both (None).
WORK_TABLES = "work"
BANDWIDTH_TABLES = "bandwidth"


@dataclass(frozen=True)
class Heading:
    """How a report column is headed in the tables for people (terminal, markdown, HTML)."""

    text: str  # "{unit}" stands for the unit of work: images, tokens, samples
    when: str = ALWAYS
    per_run: str | None = None  # the heading where one whole run is the unit of work
    #                              (a user's script timed as a whole), when it differs
    per_run_shown: bool = True  # False: such tables leave the column out
    tables: str | None = None  # WORK_TABLES or BANDWIDTH_TABLES: only those show it


@dataclass(frozen=True)
class Field:
    name: str
    type: type  # of its value; any field may be null where it is unknown
    unit: str  # "" when it has none
    meaning: str
    filled_by: str  # WORKLOAD, GPUBENCH, BOTH or REPORT
    read_as: str | None = None  # LABEL, NUMBER or TEXT: the report reads it from records
    default: object = None  # what a record without it reads as (an older record)
    old_names: tuple[str, ...] = ()  # its names in records before version 1, first found wins
    column: str | None = None  # EVERY_ROW or FAILED_ROWS: a column of the report's rows
    heading: Heading | None = None  # shown in the tables for people


F = Field
FIELDS: tuple[Field, ...] = (
    # ---- the report's columns, in the order its rows show them
    F("workload", str, "", "the workload: a suite name (mnist-ddp) or the path of the user's script",
      BOTH, LABEL, "", column=EVERY_ROW),
    F("workload_args", list, "", "the arguments given to the workload; reruns are matched on them",
      GPUBENCH, LABEL, "", column=EVERY_ROW, heading=Heading("args", when=VARIES)),
    F("script_sha256", str, "", "SHA-256 of a user's script as it ran; an edited script is "
      "another configuration, measured again", GPUBENCH, LABEL, "", column=EVERY_ROW,
      heading=Heading("script", when=VARIES)),
    F("script_env", dict, "", "a user's script: the variables among ACCELERATE_*, LIGHTNING_*, "
      "PL_*, NCCL_*, TORCH_*, OMP_NUM_THREADS and CUDA_VISIBLE_DEVICES that were set for the sweep "
      "(name: value; null when none was); another value is another configuration, measured again "
      "and shown in a row of its own (as 'NAME=value ...')", GPUBENCH, LABEL, "", column=EVERY_ROW,
      heading=Heading("env", when=VARIES)),
    F("max_steps", int, "steps", "a user's script: the --max-steps it was run with, ended by "
      "gpubench after that many training steps (null: it ended itself); another value is another "
      "configuration, measured again and shown in a row of its own", GPUBENCH, LABEL, "",
      column=EVERY_ROW, heading=Heading("max steps", when=VARIES)),
    F("provider", str, "", "where it ran: lambda, vast, runpod, local, ssh, slurm or mock",
      GPUBENCH, LABEL, "", ("cloud",), EVERY_ROW, Heading("provider")),
    F("instance_type", str, "", "the provider's name for the machine type",
      GPUBENCH, LABEL, "", column=EVERY_ROW),
    F("gpu_name", str, "", "the GPU model (cpu for a CPU run); the workload's own name for the "
      "device is kept in device_name", BOTH, LABEL, "", ("gpu", "gpu_type"), EVERY_ROW,
      Heading("gpu")),
    F("precision", str, "", "fp32, or bf16/fp16 under autocast; '-' for a user's script",
      BOTH, LABEL, "fp32", ("dtype",), EVERY_ROW, Heading("precision")),
    F("gpu_count", int, "GPUs", "GPUs the run used, over all its nodes",
      GPUBENCH, NUMBER, None, ("gpus", "num_gpus", "n_gpus", "world_size"), EVERY_ROW,
      Heading("gpus")),
    F("nodes", int, "machines", "machines the run spanned",
      BOTH, NUMBER, 1, column=EVERY_ROW, heading=Heading("nodes", when=ABOVE_ONE)),
    F("status", str, "", "ok or failed (a record without one succeeded if it measured something)",
      BOTH, LABEL, "", column=EVERY_ROW),
    F("repeats", int, "runs", "the ok runs of the configuration that its figures are the median of",
      REPORT, column=EVERY_ROW, heading=Heading("runs", when=ABOVE_ONE)),
    F("throughput", float, "throughput_unit", "work per second over the timed window, all ranks "
      "together (a row: the median of its runs)", BOTH, NUMBER, None,
      ("samples_per_s", "samples_per_sec", "samples_per_second", "images_per_s"), EVERY_ROW,
      Heading("{unit}/s", tables=WORK_TABLES)),
    F("throughput_min", float, "throughput_unit", "the lowest throughput of the row's runs",
      REPORT, column=EVERY_ROW),
    F("throughput_max", float, "throughput_unit", "the highest throughput of the row's runs",
      REPORT, column=EVERY_ROW),
    F("spread", float, "", "the runs' throughput range over their median, (max - min) / median; "
      "cost per unit of work spreads by about the same share; null for a single run",
      REPORT, column=EVERY_ROW, heading=Heading("spread", when=SOME_ROW)),
    F("throughput_unit", str, "", "samples/s, images/s, tokens/s, GB/s, or runs/s for a script "
      "timed as a whole", BOTH, LABEL, "samples/s", ("unit",), EVERY_ROW),
    F("work_unit", str, "", "what the costs count: the throughput unit without /s",
      REPORT, column=EVERY_ROW),
    F("speedup", float, "x", "median throughput over the baseline's median throughput; none "
      "for a bandwidth test", REPORT, column=EVERY_ROW, heading=Heading("speedup", tables=WORK_TABLES)),
    F("speedup_min", float, "x", "the lowest speedup the runs allow: this row's slowest run "
      "against the baseline's fastest", REPORT, column=EVERY_ROW),
    F("speedup_max", float, "x", "the highest: this row's fastest run against the baseline's slowest",
      REPORT, column=EVERY_ROW),
    F("efficiency", float, "", "speedup per GPU added: speedup / (gpus / the baseline's gpus)",
      REPORT, column=EVERY_ROW, heading=Heading("efficiency", tables=WORK_TABLES)),
    F("node_speedup", float, "x", "throughput over that of the 1-node record with the same GPUs "
      "per node", REPORT, column=EVERY_ROW, heading=Heading("node speedup", when=MULTI_NODE, tables=WORK_TABLES)),
    F("node_efficiency", float, "", "node speedup per node added: node_speedup / nodes",
      REPORT, column=EVERY_ROW, heading=Heading("node eff", when=MULTI_NODE, tables=WORK_TABLES)),
    F("baseline", str, "", "what speedup is relative to, in words",
      REPORT, column=EVERY_ROW),
    # a bandwidth test (allreduce): nccl-tests' figures, per rank count
    F("peak_busbw", float, "GB/s", "the highest bus bandwidth over the message sizes",
      WORKLOAD, NUMBER, None, column=EVERY_ROW,
      heading=Heading("peak busbw GB/s", tables=BANDWIDTH_TABLES)),
    F("peak_busbw_size", int, "bytes", "the message size of the peak bus bandwidth",
      WORKLOAD, NUMBER, None, column=EVERY_ROW, heading=Heading("at bytes", tables=BANDWIDTH_TABLES)),
    F("peak_algbw", float, "GB/s", "the highest algorithm bandwidth over the message sizes",
      WORKLOAD, NUMBER, None, column=EVERY_ROW,
      heading=Heading("peak algbw GB/s", tables=BANDWIDTH_TABLES)),
    F("max_bytes", int, "bytes", "the largest message size measured (capped by memory)",
      WORKLOAD, NUMBER, None, column=EVERY_ROW, heading=Heading("largest bytes", tables=BANDWIDTH_TABLES)),
    F("largest_size_busbw", float, "GB/s", "the bus bandwidth at the largest message size",
      WORKLOAD, NUMBER, None, column=EVERY_ROW,
      heading=Heading("busbw there GB/s", tables=BANDWIDTH_TABLES)),
    F("largest_size_algbw", float, "GB/s", "the algorithm bandwidth at the largest message size",
      WORKLOAD, NUMBER, None, column=EVERY_ROW,
      heading=Heading("algbw there GB/s", tables=BANDWIDTH_TABLES)),
    F("predicted_throughput", float, "throughput_unit", "the throughput the performance model "
      "predicted for the configuration before the run, from the records written before it "
      "(gpubench/predict); null where it had no basis", GPUBENCH, NUMBER, None, column=EVERY_ROW,
      heading=Heading("predicted", when=SOME_ROW, tables=WORK_TABLES)),
    F("prediction_error", float, "", "measured over predicted throughput, less one: +0.10 ran 10% "
      "faster than predicted", REPORT, column=EVERY_ROW,
      heading=Heading("vs pred.", when=SOME_ROW, tables=WORK_TABLES)),
    F("predicted_basis", str, "", "the least certain input the prediction rests on: measured, "
      "published, scaled, datasheet, assumed, or no basis", GPUBENCH, LABEL, "", column=EVERY_ROW,
      heading=Heading("basis", when=SOME_ROW, tables=WORK_TABLES)),
    F("predicted_low", float, "throughput_unit", "the low end of the prediction's interval", GPUBENCH),
    F("predicted_high", float, "throughput_unit", "the high end of the prediction's interval", GPUBENCH),
    F("predicted_bound_by", str, "", "what the prediction found the step bound by: compute, "
      "communication or input", GPUBENCH),
    F("predicted_step_shares", dict, "", "above one GPU, the step in parts as the prediction "
      "expected it, shares adding up to 1 (gpubench/sweep/predicted.py): exposed_comm what the "
      "count adds to the predicted one-GPU step (the model keeps each GPU's compute, so that is "
      "its all-reduce not hidden behind the backward), the rest under the part the one-GPU "
      "prediction was bound by (input: data; its step floor: other; else compute)",
      GPUBENCH, TEXT, None),
    F("price_per_hour", float, "$/h", "the price of the GPUs the run used (a share of the "
      "machine); null when unknown, 0 on a free machine",
      GPUBENCH, NUMBER, None, ("price", "usd_per_hour", "dollars_per_hour", "hourly_price"),
      EVERY_ROW, Heading("$/h")),
    F("epoch_seconds", float, "s", "one epoch (or one run) at this throughput",
      REPORT, column=EVERY_ROW, heading=Heading("epoch s", per_run="s/run", tables=WORK_TABLES)),
    F("cost_per_epoch", float, "$", "one epoch (or one run) at this price and throughput",
      REPORT, column=EVERY_ROW, heading=Heading("$/epoch", per_run="$/run", tables=WORK_TABLES)),
    F("cost_per_million_samples", float, "$", "a million units of work at this price and throughput",
      REPORT, column=EVERY_ROW,
      heading=Heading("$/M {unit}", per_run_shown=False, tables=WORK_TABLES)),
    F("cost_per_million_samples_min", float, "$", "the same at the row's fastest run",
      REPORT, column=EVERY_ROW),
    F("cost_per_million_samples_max", float, "$", "the same at the row's slowest run",
      REPORT, column=EVERY_ROW),
    F("samples_per_dollar", float, "work/$", "units of work one dollar buys (inf on a free machine)",
      REPORT, column=EVERY_ROW, heading=Heading("{unit}/$", tables=WORK_TABLES)),
    F("gpu_hours_per_epoch", float, "GPU-h", "one epoch (or one run) in GPU-hours at this "
      "throughput, where the allocation is counted in GPU-hours (Slurm)",
      REPORT, column=EVERY_ROW, heading=Heading("GPU-h/epoch", per_run="GPU-h/run", when=SOME_ROW)),
    F("gpu_hours", float, "GPU-h", "the job's allocation: GPUs x Slurm's elapsed time",
      LAUNCHER, NUMBER, None, column=EVERY_ROW, heading=Heading("GPU-h", when=SOME_ROW)),
    F("core_hours", float, "core-h", "the job's allocation: CPU cores x Slurm's elapsed time",
      LAUNCHER, NUMBER, None, column=EVERY_ROW, heading=Heading("core-h", when=SOME_ROW)),
    F("queue_wait_s", float, "s", "submission to start: the time the job waited in Slurm's queue",
      LAUNCHER, NUMBER, None, column=EVERY_ROW, heading=Heading("queue s", when=SOME_ROW)),
    F("slurm_elapsed_s", float, "s", "the job's run time as Slurm counts it (start to end)",
      LAUNCHER, NUMBER, None, column=EVERY_ROW, heading=Heading("run s", when=SOME_ROW)),
    F("cheapest", bool, "", "the least money for the same work of its workload's paid "
      "configurations (a free machine is not cheapest)",
      REPORT, column=EVERY_ROW),
    F("fastest", bool, "", "the highest throughput of its workload",
      REPORT, column=EVERY_ROW),
    F("pareto", bool, "", "no configuration of its workload beats it on both time and cost",
      REPORT, column=EVERY_ROW),
    F("noisy", bool, "", "the runs' spread is wider than the report's noise limit (10%)",
      REPORT, column=EVERY_ROW),
    F("suspect", str, "", "why the speedup is not to be trusted (more than 5% above the process "
      "count) and its likely cause; null when nothing is suspect", REPORT, column=EVERY_ROW),
    F("busy", str, "", "the machine was busy with other work during a run of the row: how busy",
      REPORT, column=EVERY_ROW),
    F("median_step_s", float, "s", "the median time of one timed step (a user's script: "
      "the slowest process's median)",
      BOTH, NUMBER, None, ("step_time_s", "median_step_time"), EVERY_ROW),
    F("run_id", str, "", "the sweep that made the record (its results file is <run_id>.jsonl)",
      GPUBENCH, LABEL, "", ("run",), EVERY_ROW),
    F("time", str, "UTC", "when the run ended, ISO 8601: 2026-01-31T12:00:00Z",
      BOTH, LABEL, "", ("timestamp", "date", "started_at"), EVERY_ROW),
    F("error", str, "", "why a failed run failed (its last line of output); null when ok",
      BOTH, TEXT, None, column=EVERY_ROW),
    F("failures", int, "", "how many records of a failed configuration failed",
      REPORT, column=FAILED_ROWS),
    F("breakdown", dict, "", "the step in parts as shares of it, adding up to 1 (the row's "
      "latest record's step_shares): data, compute, exposed_comm, other", REPORT, column=EVERY_ROW),
    F("points_lost", dict, "points", "where the efficiency lost against the 1-GPU row of the same "
      "workload and machine went, per part of the step: 100 x (this row's share - efficiency x "
      "the 1-GPU row's share), adding up to 100 x (1 - efficiency); null at 1 GPU or without "
      "both rows' parts", REPORT, column=EVERY_ROW),
    F("predicted_breakdown", dict, "", "the step in parts as the performance model expected it "
      "at this count (the latest record's predicted_step_shares), shares adding up to 1; null "
      "at 1 GPU or without a prediction at this count and at one GPU", REPORT, column=EVERY_ROW),
    F("slow_rank", dict, "", "the rank whose own work before each all-reduce (its median data "
      "wait and compute a step) was the longest by more than a tenth, while the others waited "
      "for it in the all-reduce: rank, node, own_s, others_s (the median of the others' own "
      "work), wait_s (how much longer the others' exposed all-reduce and the rest of their step "
      "were than its own); null where no rank stood out (the latest record's "
      "step_parts_by_rank)", REPORT,
      column=EVERY_ROW),

    # ---- read by the report, not shown
    F("schema_version", int, "", "the version of this table the record was written under",
      BOTH, NUMBER, 0),
    F("epoch_samples", int, "samples", "samples in one epoch of the data (a user's script: the "
      "dataset its DataLoader iterated, in tokens where the throughput is); 1 for a script timed "
      "as a whole (one run is the unit of work)", BOTH, NUMBER, None),
    F("wall_seconds", float, "s", "the timed window on the slowest rank (a user's script: "
      "the whole process, start-up included, whatever its timing)", BOTH, NUMBER, None),
    F("cost", float, "$", "what the run cost: price_per_hour x wall_seconds",
      GPUBENCH, NUMBER, None),
    F("device", str, "", "where the work ran: cuda or cpu (a CPU can stand in for the GPUs a "
      "machine advertises: the mock cloud, a GPU machine whose torch sees no CUDA)",
      BOTH, LABEL, ""),
    F("mock_instance", bool, "", "the machine was an instance of gpubench's mock cloud",
      GPUBENCH, NUMBER, None),
    F("repeat_count", int, "runs", "the runs of each configuration the sweep asked for (--repeat)",
      GPUBENCH, NUMBER, 1),
    F("threads_per_process", int, "threads", "torch's intra-op threads in each process (a user's "
      "script: the OMP_NUM_THREADS it was given)", BOTH, NUMBER, None),
    F("machine_busy", str, "", "why the machine counted as busy with other work around the run "
      "(see busy_before, other_cpu_share); null when it did not", GPUBENCH, TEXT, None),
    # the step in parts (workloads/step_parts.py): the suite's harness, a script's probe
    F("step_parts", dict, "s", "the median timed step in parts, seconds adding up to "
      "median_step_s (rank 0's; a user's script: the slowest process's): data (waiting for the "
      "next batch: the suite, step start to the model's forward; a script, its DataLoader's "
      "__next__), compute (the model's first forward to the optimizer step's end, less the "
      "exposed communication and the data waited for inside it: on a GPU CUDA events over that "
      "span, idle gaps in it included; on a CPU the host's clock), exposed_comm (DDP's own timing "
      "of the backward's all-reduce that did not overlap its compute; 0 without DDP) and other "
      "(what the step leaves: host work around the model, synchronisation, idle); each measured "
      "part is its median over the timed steps, other the median step less them", BOTH),
    F("step_shares", dict, "", "step_parts over the median step: shares adding up to 1",
      BOTH, TEXT, None),
    F("step_parts_by_rank", list, "", "every process's step_parts, with its rank", BOTH, TEXT, None),
    F("step_parts_note", str, "", "how the step's parts were measured: the clock, how often DDP "
      "timed its communication, what is not seen", BOTH),

    # ---- the rest of the workload's half
    F("host", str, "", "the host name of rank 0", WORKLOAD, LABEL, ""),
    F("world_size", int, "processes", "processes in the process group", BOTH),
    F("backend", str, "", "the torch.distributed backend: nccl or gloo", WORKLOAD),
    F("compiled", bool, "", "the model ran under torch.compile", WORKLOAD),
    F("batch_per_gpu", int, "samples", "batch size of one process", WORKLOAD),
    F("params", int, "parameters", "the model's parameters, each once (a tied weight is one); "
      "null for a bandwidth test", WORKLOAD),
    F("grad_bytes", int, "bytes", "the gradient DDP all-reduces each step: the bytes of the "
      "parameters that require grad (fp32 under autocast too); null for a bandwidth test", WORKLOAD),
    F("global_batch", int, "samples", "batch size of one step over all processes (a user's "
      "script: the samples of its steps' forward calls, every micro-batch)", BOTH),
    F("warmup_steps", int, "steps", "untimed steps before the timed window", BOTH),
    F("steps", int, "steps", "timed steps (a user's script: of the process that timed fewest)",
      BOTH),
    F("samples", int, "samples", "samples in the timed window, all ranks together", BOTH),
    F("p90_step_s", float, "s", "the 90th percentile of one timed step (a user's script: on "
      "the process with the slowest median)", BOTH),
    F("size", str, "", "which default size of a heavy workload ran: full (the published shape), "
      "cpu (smaller defaults that fit a CPU machine's memory) or given (the flags named every "
      "size)", WORKLOAD),
    F("workload_argv", list, "", "the workload's own command-line arguments", WORKLOAD),
    F("cudnn_benchmark", bool, "", "cuDNN chose its convolution algorithms during the warm-up",
      WORKLOAD),
    F("host_malloc", str, "", "what the C library's malloc does with the memory a step frees: "
      "'kept' (a CPU run of the suite: glibc with mmap off and its heap never trimmed, so the "
      "next step reuses it; workloads/host_malloc.py) or 'default' (a GPU run, "
      "GPUBENCH_MALLOC=default, not glibc)", WORKLOAD),
    F("peak_memory_bytes", int, "bytes", "the most GPU memory torch allocated, any rank "
      "(GPU runs only)", WORKLOAD),
    F("peak_reserved_bytes", int, "bytes", "the most GPU memory torch's caching allocator "
      "reserved from the driver, any rank (GPU runs; null on a CPU)", WORKLOAD),
    F("process_peak_rss_bytes", int, "bytes", "the most resident memory one workload process "
      "held (getrusage's ru_maxrss: Python, torch and its libraries besides the tensors), the "
      "largest over the ranks; peak_rss_bytes is all the run's processes together, sampled",
      WORKLOAD),
    F("peak_memory_kind", str, "", "which figure is the peak memory of one process to compare "
      "runs by: 'cuda allocated' (peak_memory_bytes) or 'process peak RSS (CPU)' "
      "(process_peak_rss_bytes)", WORKLOAD),
    F("sharding", str, "", "how the model's parameters are spread over the processes: "
      "'DDP (replicated)', 'none (a world of one: the model alone, no DDP)' at one process, "
      "'FSDP2 full shard per block + root'; null without a model",
      WORKLOAD),
    F("param_bytes_per_process", int, "bytes", "bytes of parameters one process holds (its "
      "FSDP shards; a DDP replica whole), the largest over the ranks; null without a model",
      WORKLOAD),
    F("train_state_bytes_per_process", int, "bytes", "bytes one process keeps from step to "
      "step after the measured steps: parameters, gradients and optimizer states (its FSDP "
      "shards), the largest over the ranks; the static part of the memory model", WORKLOAD),
    F("gpu_sampling", str, "", "how the GPU was sampled (nvml, nvidia-smi) or 'off: why'", BOTH),
    F("gpu_samples", int, "samples", "GPU samples taken, on the rank that took fewest", BOTH),
    F("gpu_util_pct_mean", float, "%", "GPU utilisation, mean over samples and GPUs", BOTH),
    F("gpu_util_pct_peak", float, "%", "GPU utilisation, highest sample", BOTH),
    F("gpu_mem_used_bytes_mean", float, "bytes", "GPU memory in use, mean", BOTH),
    F("gpu_mem_used_bytes_peak", float, "bytes", "GPU memory in use, highest sample", BOTH),
    F("gpu_power_w_mean", float, "W", "GPU power draw, mean", BOTH),
    F("gpu_power_w_peak", float, "W", "GPU power draw, highest sample", BOTH),
    F("profile_dir", str, "", "where --profile wrote its TensorBoard traces", WORKLOAD),
    F("traced_steps", int, "steps", "steps each rank ran under torch.profiler for run --trace "
      "(rank_trace.py), none of them in the timed figures: the suite traces after its timed "
      "window, a user's script has them (and the step that wrote the file) left out of its "
      "timed steps", BOTH),
    F("torch_version", str, "", "torch.__version__ on the machine (a failed run: the preflight "
      "check's)", BOTH),
    F("cuda_version", str, "", "the CUDA torch was built with; null for a CPU build", BOTH),
    F("python_version", str, "", "the machine's Python", WORKLOAD),
    F("driver_version", str, "", "the NVIDIA driver, from nvidia-smi", BOTH),

    # ---- the rest of gpubench's half
    F("device_name", str, "", "the device name the workload reported (gpu_name is the machine's)",
      GPUBENCH),
    F("instance_price_per_hour", float, "$/h", "the price of the whole machine (one node); "
      "above price_per_hour when a run used part of it", GPUBENCH, NUMBER, None, column=EVERY_ROW),
    F("launch_command", str, "", "the launch command as run (torchrun ...)", GPUBENCH),
    F("invocation", str, "", "the gpubench command line that made the sweep", GPUBENCH),
    F("process_seconds", float, "s", "the launch command's wall time, start-up included", GPUBENCH),
    F("controller_host", str, "", "the host gpubench ran on", GPUBENCH),
    F("timing", str, "", "how a user's script was timed: 'training steps' (its steps as the "
      "probe timed them, workloads/script_probe.py), 'script' (its own throughput, written to "
      "$GPUBENCH_RECORD_FILE) or 'whole process' (no step the probe could time: runs/s)",
      GPUBENCH, LABEL, "", column=EVERY_ROW, heading=Heading("timing", when=VARIES)),
    F("timing_note", str, "", "a user's script timed as a whole process: why its steps were not "
      "timed", GPUBENCH, TEXT, None),
    F("step_kind", str, "", "a user's script: what ended each of its timed steps, 'optimizer "
      "step' or 'backward' (a backward pass through a wrapped model, where no optimizer stepped)",
      GPUBENCH),
    F("step_throughput", float, "throughput_unit", "a user's script that reports its own "
      "throughput: the probe's figure from its steps, beside it", GPUBENCH),
    F("p10_step_s", float, "s", "the 10th percentile of one timed step (a user's script: on the "
      "process with the slowest median)", BOTH),
    F("tokens_per_step", float, "tokens", "tokens of one step over all processes, where the "
      "model's inputs are integer (batch, length) token ids", BOTH),
    F("startup_s", float, "s", "a user's script: seconds from its start to its first training "
      "step (imports, set-up, data), the slowest process", GPUBENCH),
    F("step_processes", int, "processes", "a user's script: the processes whose steps were "
      "timed and summed", GPUBENCH),
    F("process_wall_s", float, "s", "a user's script: rank 0's process from the probe's start "
      "to its exit", GPUBENCH),
    F("ended_after_steps", int, "steps", "a user's script run with --max-steps: ended by gpubench "
      "after this many training steps, not by itself", GPUBENCH),
    F("repeat", int, "", "which run of its configuration this was, 1 to repeat_count", GPUBENCH),
    F("script_path", str, "", "a user's script, resolved: what a rerun is matched on", GPUBENCH),
    F("workdir_sha256", str, "", "SHA-256 over the files of --workdir (paths and contents) before "
      "the sweep", GPUBENCH),
    F("log_file", str, "", "the run's whole output, relative to the results directory "
      "(gpubench logs RUN COUNT)", GPUBENCH),
    F("trace_dir", str, "", "run --trace: the folder of its per-rank Chrome traces, relative to "
      "the results directory (<run id>/traces/<count>); null where none came back", GPUBENCH),
    F("trace_files", int, "files", "run --trace: how many per-rank trace files came back into "
      "trace_dir (one per rank when all went well)", GPUBENCH),
    F("left_behind", list, "", "files the run created in its working directory, moved aside so "
      "that the next run starts from the same files", GPUBENCH),
    F("process_group", str, "", "a user's script: the process group its processes formed, as "
      "'gloo x 2', or 'none' (workloads/script_probe.py); a run whose processes did not form one "
      "group of its size is failed", GPUBENCH),
    F("wrapped_in", str, "", "a user's script: what its model was wrapped in (DDP, FSDP, FSDP2), "
      "or 'none'", GPUBENCH),
    F("frameworks", str, "", "a user's script: the training frameworks it imported (lightning, "
      "accelerate, ...)", GPUBENCH),
    F("failure_kind", str, "", "what kind of failure: usage, import, missing file, no gpu, alone, "
      "no step, devices, signal, out of memory, timeout, no exit status or failed", GPUBENCH),
    F("exit_signal", str, "", "the signal that ended a worker or the run (SIGKILL, SIGSEGV, ...)",
      GPUBENCH),
    # the machine around the run (gpubench/onhost/machine_load.py)
    F("cpu_cores", int, "cores", "CPU cores the run could use on its machine (one node)", GPUBENCH),
    F("cpu_pinning", str, "", "whether each process was held to cores of its own: none, or "
      "'distinct cores'", GPUBENCH),
    F("load_before", float, "", "the machine's 1-minute load average over its cores as the run "
      "started (it includes the previous run's last minute)", GPUBENCH),
    F("busy_before", float, "", "the share of the cores busy with other work in the half second "
      "before the run started", GPUBENCH),
    F("other_cpu_share", float, "", "the share of the cores' time that other processes took "
      "while the run ran", GPUBENCH),
    F("run_cpu_seconds", float, "s", "CPU time the run's processes got, all together", GPUBENCH),
    F("run_cores_used", float, "cores", "run_cpu_seconds over the run's wall time: the cores' "
      "worth of CPU the workers got", GPUBENCH),
    F("peak_rss_bytes", float, "bytes", "the most memory the run's processes held together (RSS, "
      "sampled)", GPUBENCH),
    F("memory_total_bytes", float, "bytes", "the machine's memory", GPUBENCH),
    F("memory_available_min_bytes", float, "bytes", "the least memory available on the machine "
      "while the run ran", GPUBENCH),
    # what NCCL said of the network on a GPU run (gpubench/launch/nccl_log.py: NCCL_DEBUG=INFO,
    # NCCL_DEBUG_SUBSYS=INIT,NET into a file per host); null on a CPU run (gloo) and where the
    # user set NCCL_DEBUG themselves
    F("nccl_transport", str, "", "the transports NCCL's channels took, every node together, "
      "joined with '+': P2P (NVLink or PCIe), NVLS, SHM, CollNet, NET/IB (InfiniBand or RoCE), "
      "NET/AWS Libfabric (EFA), NET/Socket (TCP)", GPUBENCH, TEXT, None, column=EVERY_ROW),
    F("nccl_net", str, "", "the network devices NCCL's channels crossed between nodes: "
      "'mlx5_0:1/IB, mlx5_1:1/IB', 'efa (4 NICs)', 'eth0' for TCP sockets; null where no channel "
      "left its node", GPUBENCH),
    F("nccl_fallback", str, "", "why nodes fell back to TCP sockets where a faster fabric could "
      "have served, in one line ('NET/IB : No device found; the all-reduce ran over eth0'); null "
      "where none did", GPUBENCH, TEXT, None, column=EVERY_ROW),
    F("nccl_fallback_nodes", int, "machines", "how many nodes fell back to TCP sockets (see "
      "nccl_fallback)", GPUBENCH, NUMBER, None),
    F("nccl_hosts", list, "", "per host, what NCCL said: host, transport, network (the one it "
      "chose: IB, Socket, AWS Libfabric), net (its devices), plugin, fallback", GPUBENCH),
    F("nccl_version", str, "", "the NCCL the run used, as its log says it (2.21.5+cuda12.4); "
      "where it said nothing, the preflight check's (the NCCL in the machine's torch)", GPUBENCH),

    F("slurm_job_id", str, "", "the Slurm job that ran it", LAUNCHER, LABEL, "", column=EVERY_ROW),
    F("slurm_partition", str, "", "the partition the job ran in", LAUNCHER),
    F("slurm_account", str, "", "the account the job was charged to; null when the default",
      LAUNCHER),
    F("slurm_nodelist", str, "", "the nodes the job ran on, as Slurm writes them: gpu[01-04]",
      LAUNCHER),
    F("slurm_state", str, "", "Slurm's end state: COMPLETED, FAILED, TIMEOUT, CANCELLED, "
      "PREEMPTED, NODE_FAIL, OUT_OF_MEMORY", LAUNCHER),
    F("slurm_exit_code", str, "", "the job's exit code and signal as sacct writes them: 3:0",
      LAUNCHER),
    F("slurm_state_source", str, "", "where the end state came from: sacct, sacct -c (job "
      "completion log), or squeue + output files", LAUNCHER),
    F("slurm_launch", str, "", "how the job started its processes: torchrun (one task per node) "
      "or srun (one task per GPU)", LAUNCHER),
    F("slurm_script", str, "", "the sbatch script, kept beside the records", LAUNCHER),
    F("slurm_job_dir", str, "", "the job's directory on the cluster: script, output, record",
      LAUNCHER),
    F("slurm_error_tail", list, "", "the last lines of the job's error file", LAUNCHER),
    F("allocation_cost", float, "$", "gpu_hours x --price-per-gpu-hour; null without a price",
      LAUNCHER),

    # a cluster of rented machines (gpubench/launch/cluster.py): torchrun's c10d rendezvous
    F("node_addresses", list, "", "each node's address as the others reached it, the head (the "
      "rendezvous) first", LAUNCHER, TEXT, None),
    F("node_network", str, "", "the network that joined the nodes: private (the provider's), "
      "public (the internet, through port mappings where mapped) or loopback", LAUNCHER),
    F("rendezvous", dict, "", "torchrun's rendezvous: backend, endpoint, id and its join, read, "
      "last-call and close timeouts in seconds", LAUNCHER),
    F("collective_timeout_s", float, "s", "how long a collective waits for a rank before it "
      "fails (GPUBENCH_PG_TIMEOUT_S, the suite's init_process_group timeout)", LAUNCHER),
    F("comm_settings", list, "", "per node: the NCCL_*/GLOO_* variables in force, its address, "
      "and what chose the interface (the route to the head's address, or the machine's own "
      "environment)", LAUNCHER),
    F("socket_ifname", str, "", "the interface NCCL (else gloo) binds to on the nodes, as in "
      "force: one name where they agree (ens1 on a RunPod Instant Cluster), else each node's",
      LAUNCHER),
    F("interconnect", list, "", "per node: nvidia-smi topo -m and ibstat as the machine prints "
      "them, 'absent' where it has no such tool", LAUNCHER),
    F("rank0_node", int, "", "the node rank 0 ran on (torch's rendezvous gives the ranks out), "
      "whose record this is", LAUNCHER, NUMBER, None),
    F("lost_nodes", list, "", "nodes lost during the run (their SSH link dropped and they did "
      "not answer again): 'node 1 (203.0.113.7)'", LAUNCHER),

    # ---- the preflight check of the rented machine (gpubench/lifecycle/preflight.py)
    F("host_id", str, "", "the provider's id for the physical machine (Vast.ai's machine_id); "
      "null where the provider names none", HOST_CHECK, LABEL, ""),
    F("instance_id", str, "", "the provider's id for the rented instance", HOST_CHECK, LABEL, ""),
    F("gpu_names", list, "", "each GPU's name as nvidia-smi gives it", HOST_CHECK),
    F("gpu_uuids", list, "", "each GPU's UUID, from nvidia-smi", HOST_CHECK),
    F("gpu_topology", str, "", "nvidia-smi topo -m: how the GPUs are connected", HOST_CHECK),
    F("driver_cuda_version", str, "", "the newest CUDA the driver supports (nvidia-smi's header)",
      HOST_CHECK),
    F("preflight", str, "", "the check's verdict in words: 'preflight passed N checks in S s'",
      HOST_CHECK),
    F("preflight_checks", dict, "", "each check's result: name -> 'ok: measured (floor: ...)'",
      HOST_CHECK),

    # ---- what the machine cost, once it is gone (a bench's rented machines)
    F("estimated_cost", float, "$", "the whole machine the run was on, from its price and the time "
      "from its creation to its confirmed termination", BILLING, NUMBER, None),
    F("billed_cost", float, "$", "what the provider billed for that machine (RunPod, Vast.ai), "
      "read after teardown; null where the provider reports none", BILLING, NUMBER, None),
)
del F


class UndeclaredFieldError(ValueError):
    """A record carries a common field this table does not list for its side."""


# The helpers below read FIELDS when called, never at import, so that everything
# derived from the table follows it (and a test can extend it).

def field(name: str) -> Field:
    for f in FIELDS:
        if f.name == name:
            return f
    raise KeyError(f"no field '{name}' in the record schema")


def names(*filled_by: str) -> tuple[str, ...]:
    """The fields that these sides fill, in table order."""
    return tuple(f.name for f in FIELDS if f.filled_by in filled_by)


def read_fields() -> tuple[Field, ...]:
    """The fields the report reads from every record, in table order."""
    return tuple(f for f in FIELDS if f.read_as is not None)


def report_columns(rows: str = EVERY_ROW) -> tuple[str, ...]:
    """The columns of the report's rows: EVERY_ROW, or FAILED_ROWS for those only failures carry."""
    return tuple(f.name for f in FIELDS if f.column == rows)


def shown_fields() -> tuple[Field, ...]:
    """The report columns in the tables for people, in table order."""
    return tuple(f for f in FIELDS if f.column is not None and f.heading is not None)


def require_declared(record: dict, side: str) -> None:
    """Raise UndeclaredFieldError for a field of `record` that `side` may not fill:
    a field added to a record must be added to this table first."""
    allowed = set(names(side, BOTH))
    unknown = sorted(set(record) - allowed)
    if unknown:
        raise UndeclaredFieldError(f"record field(s) {', '.join(unknown)} are not listed for "
                                   f"the {side} in record_schema.FIELDS")


def type_problems(record: dict) -> list[str]:
    """What in `record` does not have its field's type (null is always allowed;
    a whole number is a float too)."""
    problems = []
    for f in FIELDS:
        value = record.get(f.name)
        if value is None or f.filled_by == REPORT:
            continue
        wanted = (int, float) if f.type is float else f.type
        if isinstance(value, bool) and f.type is not bool or not isinstance(value, wanted):
            problems.append(f"{f.name}: {type(value).__name__} {value!r}, expected {f.type.__name__}")
    return problems
