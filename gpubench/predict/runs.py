"""How long one run of a suite workload is predicted to take on an offer: what a bench
plans with and asks the budget for, instead of a fixed typical time.

A run is its warm-up and timed steps (--steps, else --epochs of the epoch, else the
workload's default step count) plus the start every run pays: interpreter, torch and
CUDA, the rendezvous, the data (RUN_START_S, assumed)."""

from __future__ import annotations

from dataclasses import dataclass

from gpubench.predict.advise import Config, Prediction, Subject, Work, predict
from gpubench.predict.subject import NoSubject, suite_subject
from gpubench.providers.common import Offer
from gpubench.workloads import flags

RUN_START_S = 60.0     # assumed: python and torch start, CUDA and NCCL set up, data made
DEFAULT_WARMUP = 5


@dataclass(frozen=True)
class RunForecast:
    seconds: float
    prediction: Prediction

    @property
    def basis(self) -> str:
        return self.prediction.basis


def run_work(subject: Subject, gpus: int) -> Work | None:
    """The units of work one run at `gpus` GPUs processes, warm-up included."""
    try:
        ns = flags.parse(subject.workload, list(subject.args), raising=True)
    except (flags.FlagError, KeyError):
        return None
    flags.size_for_device(subject.workload, ns, "cuda")
    per_step = subject.batch_per_gpu * gpus
    if ns.steps is not None:
        steps = ns.steps
    elif ns.epochs is not None and subject.profile and subject.profile.epoch_samples:
        steps = ns.epochs * max(1, subject.profile.epoch_samples // per_step)
    else:
        steps = flags.GPU_DEFAULT_STEPS.get(subject.workload)
        if steps is None:
            return None
    warmup = ns.warmup if ns.warmup is not None else DEFAULT_WARMUP
    return Work(float((steps + warmup) * per_step), f"{steps} steps and {warmup} of warm-up")


def forecast(workload: str, args: tuple, offer: Offer, gpus: int, nodes: int,
             records: list[dict]) -> RunForecast | None:
    """One run's predicted seconds on `nodes` machines of `offer`, or None without a basis."""
    try:
        subject = suite_subject(workload, args, records)
    except NoSubject:
        return None
    work = run_work(subject, gpus)
    if work is None:
        return None
    per_machine = max(gpus // nodes, 1)
    config = Config(offer, gpus, nodes, offer.price_per_gpu_hour * per_machine * nodes)
    p = predict(subject, config, records, work)
    if not p.has_figure:
        return None
    return RunForecast(RUN_START_S + p.seconds, p)
