"""The step model's constants, fitted to the suite's runs on a real GPU, and how well it
predicts a configuration it was not fitted to (leave-one-out).

    python -m gpubench.predict.fit            # fit, print the leave-one-out table
    python -m gpubench.predict.fit --write    # and write gpubench/predict/step_constants.json

The measurements are the reference records (results/reference/<device>/): every ok
1-GPU record of a suite workload whose configuration has a step profile, the records
of one configuration taken together (their median). The fit minimises the squared
log-error of the throughput (the memory constants: of the peak memory), plus:
- the device's busy time where NVML sampled the run: its utilisation (the share of
  time a kernel ran) times the step. A step bound by the host says little about the
  device on its own; this is what keeps the two apart (an eager GPT-2 small on the
  H200 waits on its host, with the device busy 62% of each step);
- the card's measured matrix-product ceiling (device-ceilings.json: a bf16 product of
  8192^3), which the model's rate for that product must meet;
- a weak pull of each constant towards its physical starting value (ops.DEFAULT_CONSTANTS), so
that a figure the data barely touch (how much of the host's cost torch.compile
leaves, with few compiled runs) stays where the physics puts it instead of wandering
to fit one point. Nelder-Mead over the logarithms of the constants, bounded in
iterations: no numerical library needed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import sys
from dataclasses import dataclass, replace

from gpubench.predict import gpu_specs, ops, published
from gpubench.predict.basis import step_args
from gpubench.predict.verdict import interval
from gpubench.workloads.record_schema import REPLICATED

THROUGHPUT_CONSTANTS = ("e_flop", "e_bw", "host_per_kernel", "host_per_view", "host_per_step", "overlap_p",
                        "compile_bytes", "compile_host", "low_precision_bytes",
                        "device_per_kernel", "e_flop_fp32", "host_per_kernel_backward")
# FSDP's own cost is fitted to FSDP's runs alone, with the constants every run shares
# held where the DDP runs put them: it is not understood well enough yet (its two
# measured sizes disagree on what a sharded unit costs by a factor of three) to let it
# bend them; ops.FSDP_UNCERTAINTY says so in its intervals.
FSDP_CONSTANTS = ("fsdp_host_per_unit",)
MEMORY_CONSTANTS = ("compile_activations", "conv_workspace", "base_bytes")
PRIOR_WEIGHT = 0.02          # per constant, on its log-distance from the starting value
UPPER = {"low_precision_bytes": 2.0, "e_flop": 1.0, "e_flop_fp32": 1.0, "e_bw": 1.0, "compile_bytes": 1.0,
         "compile_host": 1.0, "compile_activations": 1.0}
LOWER = {"overlap_p": 1.0}
ITERATIONS = 3000
# NVML's utilisation is coarse (a sample covers about 1/6 s and counts any kernel running,
# not how much of the GPU it fills): the device time it gives weighs half a throughput.
BUSY_WEIGHT = 0.5
MIN_UTIL_SAMPLES = 3
# Below half the step the device's time is launches and kernels of a few microseconds
# (MNIST's, a recommender's): what bounds those is not the rates the device time fits.
MIN_UTIL_PCT = 50.0
RESTARTS = 3


@dataclass(frozen=True)
class Point:
    """A measured configuration, the model's view of it, and the GPU's rates."""

    config: ops.Config
    profile: ops.StepProfile
    rates: ops.Rates
    throughput: float            # per GPU, units/s
    memory_bytes: float | None
    label: str
    device_busy_s: float | None = None   # NVML's utilisation x the median step, where sampled


@dataclass(frozen=True)
class Ceiling:
    """A card's measured matrix-product rate (benchmarks/device_ceilings.py)."""

    rates: ops.Rates
    n: int
    math: str
    flop_per_s: float


def points(records: list[dict]) -> list[Point]:
    """Every measured 1-GPU configuration a step profile covers, on a GPU type the
    datasheet table knows."""
    grouped: dict[tuple, list[dict]] = {}
    for r in records:
        if (r.get("status", "ok") != "ok" or r.get("device") != "cuda" or r.get("gpu_count") != 1
                or (r.get("nodes") or 1) != 1 or not isinstance(r.get("throughput"), (int, float))):
            continue
        spec = gpu_specs.spec_for(str(r.get("gpu_name") or ""))
        config = ops.config_for(str(r.get("workload")), list(r.get("workload_args") or []))
        if spec is None or config is None:
            continue
        if r.get("sharding") == REPLICATED:  # at one GPU: made before harness.replicate
            config = replace(config, ddp_at_one=True)
        key = (spec, config, step_args(r.get("workload_args") or []))
        grouped.setdefault(key, []).append(r)
    out = []
    for (spec, config, args), rows in grouped.items():
        profile = ops.profile_for(config)
        if profile is None:
            continue
        mem = [r["peak_memory_bytes"] for r in rows if r.get("peak_memory_kind") == "cuda allocated"
               and isinstance(r.get("peak_memory_bytes"), (int, float))]
        label = " ".join([config.workload, *args]) + f" on {spec.name}"
        busy = [r["gpu_util_pct_mean"] / 100.0 * r["median_step_s"] for r in rows
                if (r.get("gpu_samples") or 0) >= MIN_UTIL_SAMPLES
                and isinstance(r.get("gpu_util_pct_mean"), (int, float)) and r["gpu_util_pct_mean"] >= MIN_UTIL_PCT
                and isinstance(r.get("median_step_s"), (int, float))]
        out.append(Point(config, profile, ops.Rates.of(spec), statistics.median(r["throughput"] for r in rows),
                         statistics.median(mem) if mem else None, label,
                         statistics.median(busy) if busy else None))
    return sorted(out, key=lambda p: p.label)


def ceilings(documents: list[dict]) -> list[Ceiling]:
    """The measured matrix-product ceilings of the cards the datasheet table knows."""
    out = []
    for d in documents:
        spec = gpu_specs.spec_for(str(d.get("device_name") or ""))
        n, rate, math_ = d.get("matmul_n"), d.get("matmul_tflops"), d.get("matmul_dtype")
        if spec is None or not isinstance(n, int) or not isinstance(rate, (int, float)) or rate <= 0:
            continue
        rates = ops.Rates.of(spec)
        if rates.peak(str(math_)) is None or rates.bandwidth is None:
            continue
        out.append(Ceiling(rates, n, str(math_), rate * 1e12))
    return out


def ceiling_rate(k: Ceiling, c: ops.Constants) -> float:
    """The model's FLOP/s for an n^3 product in 16-bit (fp32: 4-byte) operands."""
    flops = 2.0 * k.n ** 3
    nbytes = 3.0 * k.n * k.n * (4 if k.math in ("fp32", "tf32") else 2)
    share = c.e_flop_fp32 if k.math == "fp32" else c.e_flop
    return flops / ops.compute_seconds(flops, nbytes, k.rates.peak(k.math), c.e_bw * k.rates.bandwidth, share)


def predicted(point: Point, c: ops.Constants) -> ops.StepEstimate | None:
    return ops.estimate(point.config, point.profile, point.rates, c)


def _loss(c: ops.Constants, pts: list[Point], names: tuple[str, ...], memory: bool,
          anchors: tuple[Ceiling, ...] = ()) -> float:
    total = 0.0
    for p in pts:
        e = predicted(p, c)
        if e is None:
            continue
        if memory:
            if p.memory_bytes:
                total += math.log(e.memory_bytes / p.memory_bytes) ** 2
        else:
            total += math.log(e.throughput / p.throughput) ** 2
            if p.device_busy_s:
                total += BUSY_WEIGHT * math.log(e.device_s / p.device_busy_s) ** 2
    if not memory:
        for k in anchors:
            total += math.log(ceiling_rate(k, c) / k.flop_per_s) ** 2
    for name in names:
        start = getattr(ops.DEFAULT_CONSTANTS, name)
        if start > 0:
            total += PRIOR_WEIGHT * math.log(getattr(c, name) / start) ** 2
    return total


def _with(c: ops.Constants, names: tuple[str, ...], logs: list[float]) -> ops.Constants:
    values = {}
    for name, x in zip(names, logs):
        v = math.exp(x)
        v = min(v, UPPER.get(name, v))
        values[name] = max(v, LOWER.get(name, v))
    return replace(c, **values)


def _nelder_mead(f, x0: list[float], step: float = 0.3, iterations: int = ITERATIONS) -> list[float]:
    n = len(x0)
    simplex = [list(x0)] + [[x + (step if i == j else 0.0) for j, x in enumerate(x0)] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(n + 1), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if abs(values[-1] - values[0]) < 1e-12:
            break
        centroid = [sum(x[j] for x in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]
        reflected = [c + (c - w) for c, w in zip(centroid, worst)]
        fr = f(reflected)
        if fr < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centroid, worst)]
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centroid, worst)]
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (x - b) for b, x in zip(best, s)] for s in simplex[1:]]
                values = [values[0]] + [f(s) for s in simplex[1:]]
    return simplex[min(range(n + 1), key=values.__getitem__)]


def _minimise(f, x0: list[float]) -> list[float]:
    """Nelder-Mead, restarted from its best point with a fresh simplex until a restart
    gains nothing (at most RESTARTS times): a simplex in fifteen dimensions can shrink
    onto a slope before it reaches the valley, most often along a constant only one
    configuration moves."""
    best, value = x0, f(x0)
    for _ in range(RESTARTS + 1):
        found = _nelder_mead(f, best)
        gained = value - f(found)
        best, value = (found, value - gained) if gained > 0 else (best, value)
        if gained < 1e-9:
            break
    return best


def fit(pts: list[Point], start: ops.Constants = ops.DEFAULT_CONSTANTS,
        anchors: tuple[Ceiling, ...] = ()) -> ops.Constants:
    """The constants that best predict `pts` (throughput and device time, then memory)
    and the cards' measured ceilings `anchors`."""
    c = start
    ddp = [p for p in pts if not p.config.fsdp]
    fsdp = [p for p in pts if p.config.fsdp]
    for names, memory, these, marks in ((THROUGHPUT_CONSTANTS, False, ddp, anchors),
                                        (FSDP_CONSTANTS, False, fsdp, ()),
                                        (MEMORY_CONSTANTS, True, pts, ())):
        if not these:
            continue
        x0 = [math.log(getattr(c, n)) for n in names]
        best = _minimise(lambda x, names=names, memory=memory, these=these, marks=marks:
                         _loss(_with(c, names, x), these, names, memory, marks), x0)
        c = _with(c, names, best)
    return c


@dataclass(frozen=True)
class Check:
    """One configuration predicted with itself left out of the fit."""

    label: str
    measured: float
    predicted: float
    low: float
    high: float
    measured_memory: float | None
    predicted_memory: float
    bound_by: str
    fsdp: bool
    family: str = ""

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0

    @property
    def inside(self) -> bool:
        slack = 1e-9 * self.measured     # the configuration whose error sets the width lies on its edge
        return self.low - slack <= self.measured <= self.high + slack

    @property
    def memory_error(self) -> float | None:
        return None if not self.measured_memory else self.predicted_memory / self.measured_memory - 1.0


def leave_one_out(pts: list[Point], start: ops.Constants = ops.DEFAULT_CONSTANTS,
                  anchors: tuple[Ceiling, ...] = ()) -> list[Check]:
    """Each configuration predicted by the constants fitted to all the others, with the
    interval the shipped rule gives (ops.Constants.uncertainty) from that fit alone."""
    found = []
    for i, p in enumerate(pts):
        c = fit(pts[:i] + pts[i + 1:], start, anchors)
        e = predicted(p, c)
        if e is not None:
            found.append((p, e, c))
    # the interval's width is what the leave-one-out errors themselves were (the idea of
    # jackknife+, Barber et al. 2021), the largest of the configuration's family
    largest = largest_ddp_error([(p.throughput, e.throughput, p.config.fsdp) for p, e, _ in found])
    families = family_errors([(ops.family_of(p.config), p.throughput, e.throughput) for p, e, _ in found])
    checks = []
    for p, e, c in found:
        widths = replace(c, loo_max_error=largest, family_error=tuple(families.items()))
        low, high = interval(e.throughput, widths.uncertainty(p.config))
        checks.append(Check(p.label, p.throughput, e.throughput, low, high, p.memory_bytes, e.memory_bytes,
                            e.bound_by, p.config.fsdp, ops.family_of(p.config)))
    return checks


def largest_ddp_error(figures: list[tuple[float, float, bool]]) -> float | None:
    """The largest error, as a factor less one (under or over alike), of the (measured,
    predicted, under FSDP) figures run under DDP; None without one."""
    errors = [max(m / p, p / m) - 1.0 for m, p, fsdp in figures if not fsdp]
    return max(errors) if errors else None


def family_errors(figures: list[tuple[str, float, float]]) -> dict[str, float]:
    """The largest error, as a factor less one, of each family's (family, measured,
    predicted) figures."""
    out: dict[str, float] = {}
    for family, m, p in figures:
        out[family] = max(out.get(family, 0.0), max(m / p, p / m) - 1.0)
    return dict(sorted(out.items()))


def summary(checks: list[Check]) -> dict:
    errors = [abs(c.error) for c in checks]
    memory = [abs(c.memory_error) for c in checks if c.memory_error is not None]
    return {"median_error": statistics.median(errors) if errors else None,
            "max_error": max(errors) if errors else None,
            "inside": sum(c.inside for c in checks), "of": len(checks),
            "memory_median_error": statistics.median(memory) if memory else None,
            "memory_max_error": max(memory) if memory else None}


def table(checks: list[Check]) -> str:
    lines = ["| configuration (1 GPU) | measured | predicted (left out) | error | interval | inside | "
             "memory measured | predicted | error | bound by |",
             "|---|---:|---:|---:|---|---|---:|---:|---:|---|"]
    for c in checks:
        mem = f"{c.measured_memory / 2**30:.2f} GiB" if c.measured_memory else "-"
        merr = f"{c.memory_error:+.0%}" if c.memory_error is not None else "-"
        lines.append(f"| {c.label} | {c.measured:,.0f} | {c.predicted:,.0f} | {c.error:+.0%} | "
                     f"{c.low:,.0f}-{c.high:,.0f} | {'yes' if c.inside else 'no'} | {mem} | "
                     f"{c.predicted_memory / 2**30:.2f} GiB | {merr} | {c.bound_by} |")
    s = summary(checks)
    lines.append("")
    lines.append(f"median |error| {s['median_error']:.1%}, largest {s['max_error']:.1%}; inside the interval "
                 f"{s['inside']} of {s['of']}; memory median |error| {s['memory_median_error']:.1%}, "
                 f"largest {s['memory_max_error']:.1%}")
    return "\n".join(lines)


def reference_records() -> list[dict]:
    from gpubench.predict.basis import reference_dirs
    from gpubench.store.results import ResultsStore

    out: list[dict] = []
    for d in reference_dirs():
        out += ResultsStore(d).load().records
    return out


def reference_ceilings() -> tuple[Ceiling, ...]:
    from gpubench.predict.basis import reference_dirs

    docs = []
    for d in reference_dirs():
        try:
            docs.append(json.loads((d / "device-ceilings.json").read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return tuple(ceilings([d for d in docs if isinstance(d, dict)]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {ops.CONSTANTS_FILE.name}")
    opts = parser.parse_args(argv)
    pts = points(reference_records())
    if not pts:
        print("no reference measurement to fit", file=sys.stderr)
        return 1
    anchors = reference_ceilings()
    c = fit(pts, anchors=anchors)
    checks = leave_one_out(pts, anchors=anchors)
    s = summary(checks)
    for name in ops.FITTED:
        print(f"{name:22} {getattr(c, name):.6g}")
    print(table(checks))
    cards = published.card_checks(c)
    print()
    print(published.table(cards))
    if opts.write:
        doc = {"generated_by": "python -m gpubench.predict.fit --write",
               "date": datetime.date.today().isoformat(),
               "source": (f"fitted to {len(pts)} configurations measured on "
                          f"{', '.join(sorted({p.rates.name for p in pts}))} (results/reference/)"),
               "fitted_on": [p.label for p in pts],
               "constants": {n: getattr(c, n) for n in ops.FITTED},
               "loo_median_error": s["median_error"],
               "loo_max_error": largest_ddp_error([(k.measured, k.predicted, k.fsdp) for k in checks]),
               "family_error": family_errors([(k.family, k.measured, k.predicted) for k in checks]),
               "other_card_error": published.largest_by_kind(cards),
               "card_checks": [{"series": k.series, "gpu": k.gpu, "memory": k.memory_kind,
                                "published_ratio": round(k.published_ratio, 4),
                                "predicted_ratio": round(k.predicted_ratio, 4), "error": round(k.signed, 4)}
                               for k in cards],
               "leave_one_out": [{"configuration": k.label, "measured": k.measured, "predicted": k.predicted,
                                  "error": round(k.error, 4), "inside": k.inside,
                                  "memory_error": None if k.memory_error is None else round(k.memory_error, 4)}
                                 for k in checks]}
        ops.CONSTANTS_FILE.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {ops.CONSTANTS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
