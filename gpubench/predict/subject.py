"""What is known of a workload before any GPU is chosen: a suite workload's counted
profile (its FLOPs and gradient bytes at its default size), or, at other arguments,
what its records say; and how much work "an epoch" or "--samples N" is."""

from __future__ import annotations

from gpubench.errors import UsageError
from gpubench.predict import gpt_size, ops
from gpubench.predict.advise import SHARDED_TWIN, Subject, Work
from gpubench.predict.memory import ModelShape
from gpubench.predict.model import MEASURED, Figure
from gpubench.predict.workload_profiles import profile_for

FSDP_WORKLOADS = {"gpt-fsdp"}
# What the suite's epoch goes through (workloads/profiles.json's epoch_samples counts it).
EPOCH_OF = {"mnist-ddp": "MNIST images", "resnet-ddp": "ImageNet images",
            "gpt-ddp": "OpenWebText tokens", "gpt-fsdp": "OpenWebText tokens",
            "recsys-ddp": "MovieLens ratings"}


class NoSubject(UsageError):
    """Nothing is known of the workload at these arguments: no profile, no record."""


def precision_of(args: tuple) -> str:
    for i, arg in enumerate(args):
        if arg == "--precision" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--precision="):
            return arg.split("=", 1)[1]
    return "fp32"


def suite_subject(workload: str, args: tuple, records: list[dict]) -> Subject:
    profile = profile_for(workload, list(args))
    precision = precision_of(args)
    size = gpt_size.gpt_size(workload, args)      # a GPT at any size: by arithmetic
    published_ok = profile is not None
    if profile is None and size is not None:
        profile = gpt_size.profile(workload, args, size)
    if profile is None:
        profile = ops.workload_profile(workload, args)      # another batch of a counted model
    if profile is not None:
        memory = (dict(shape=gpt_size.shape(size), activations=gpt_size.activations(size))
                  if size is not None else dict(shape=ModelShape(profile.params)))
        strategy = "FSDP" if workload in FSDP_WORKLOADS else "DDP"
        return Subject(workload, args, precision, profile.unit + "/s",
                       profile.work_per_gpu_step or profile.batch_per_gpu,
                       _traffic(profile, strategy, memory.get("shape")),
                       profile, published_ok=published_ok, memory_batch=profile.batch_per_gpu,
                       strategy=strategy, **memory)
    for r in records:     # another size: what a record of it says
        if (r.get("workload") == workload and tuple(r.get("workload_args") or ()) == args
                and isinstance(r.get("grad_bytes"), int) and isinstance(r.get("batch_per_gpu"), int)):
            return Subject(workload, args, precision, r.get("throughput_unit") or "samples/s",
                           r["batch_per_gpu"], Figure(float(r["grad_bytes"]), MEASURED,
                                                      "gradient bytes from a record of it"),
                           None, published_ok=False)
    shown = " ".join(args) or "its defaults"
    raise NoSubject(f"{workload} {shown}: no profile at these arguments and no record of them "
                    f"(run it once, e.g. `gpubench run {workload} --gpus 1 {shown}`)")


def _traffic(profile, strategy: str, shape: ModelShape | None) -> Figure:
    """What a step sends, as the gradient bytes of DDP's ring all-reduce (2 (N-1)/N of
    them). FSDP sends (N-1)/N of: the parameters gathered twice (forward, and backward
    again) at the compute precision, and the fp32 gradients reduce-scattered; in bf16
    that is as much as DDP (2 x 2 + 4 = 2 x 4 bytes a parameter), in fp32 half as much
    again (4 + 4 + 4)."""
    grads = float(profile.grad_bytes)
    source = f"{grads / 1e6:,.1f} MB of gradients, {profile.source}"
    if strategy != "FSDP" or shape is None:
        return Figure(grads, MEASURED, source)
    sent = (2 * shape.params * shape.compute_bytes + grads) / 2
    return Figure(sent, MEASURED, f"{source}; under FSDP as {sent / 1e6:,.1f} MB of DDP's all-reduce "
                                  f"(2 all-gathers of {shape.compute_bytes:g}-byte parameters, "
                                  f"1 reduce-scatter of fp32 gradients)")


def sharded_subject(subject: Subject, records: list[dict]) -> Subject | None:
    """The same model under FSDP, where the suite has it (gpt-ddp -> gpt-fsdp); else None."""
    twin = SHARDED_TWIN.get(subject.workload)
    if twin is None:
        return None
    try:
        return suite_subject(twin, subject.args, records)
    except NoSubject:
        return None


def check_work(epochs: float | None, samples: float | None) -> None:
    """--samples and --epochs, where given, are positive."""
    if samples is not None and samples <= 0:
        raise UsageError(f"--samples must be positive (got {samples:g})")
    if epochs is not None and epochs <= 0:
        raise UsageError(f"--epochs must be positive (got {epochs:g})")


def work_for(subject: Subject, epochs: float | None, samples: float | None) -> Work:
    """--samples N, else --epochs E (default 1) of the workload's epoch."""
    check_work(epochs, samples)
    word = subject.unit.split("/")[0]
    if samples is not None:
        return Work(float(samples), f"{samples:,.0f} {word}")
    epochs = 1.0 if epochs is None else epochs
    per_epoch = subject.profile.epoch_samples if subject.profile else None
    if not per_epoch:
        raise UsageError(f"{subject.workload}: the size of an epoch is not known; give --samples N")
    epoch = f"{say_count(per_epoch)} {EPOCH_OF.get(subject.workload, word)}"
    return Work(epochs * per_epoch, f"{epochs:g} epoch" + ("" if epochs == 1 else "s"),
                epoch if epochs == 1 else f"{epoch} an epoch")


def say_count(n: float) -> str:
    """9035582198 -> '9.04 billion', 1281167 -> '1.28 million', 60000 -> '60,000'."""
    for scale, word in ((1e9, "billion"), (1e6, "million")):
        if n >= scale:
            return f"{n / scale:.3g} {word}"
    return f"{n:,.0f}"
