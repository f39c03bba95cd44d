"""The figures a workload reports, as small pure functions: bus bandwidth
(nccl-tests), model FLOPs per token (nanoGPT / PaLM) and MFU against a table
of peak dense throughput per GPU and precision.

No torch here: these are checked by hand-computed values without a GPU.
"""

from __future__ import annotations

import re

GB = 1e9  # nccl-tests reports GB/s with GB = 10^9 bytes
TERA = 1e12


# --------------------------------------------------------------------------- bandwidth
# nccl-tests doc/PERFORMANCE.md: busbw = algbw * factor, where the factor makes
# the figure comparable with the hardware's link bandwidth whatever the rank count.
BUSBW_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,      # bytes: the whole gathered array
    "reduce_scatter": lambda n: (n - 1) / n,  # bytes: the whole input array
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def busbw_factor(collective: str, ranks: int) -> float:
    if ranks < 1:
        raise ValueError("ranks must be at least 1")
    return BUSBW_FACTORS[collective](ranks)


def algbw(size_bytes: float, seconds: float) -> float:
    """Algorithm bandwidth in GB/s: the message size over the time of one operation."""
    return size_bytes / GB / seconds


def busbw(size_bytes: float, seconds: float, ranks: int, collective: str = "all_reduce") -> float:
    """Bus bandwidth in GB/s: algbw times the collective's factor (all_reduce: 2(n-1)/n)."""
    return algbw(size_bytes, seconds) * busbw_factor(collective, ranks)


# --------------------------------------------------------------------------- FLOPs
def gpt_flops_per_token(n_params: int, n_layer: int, n_head: int, head_dim: int,
                        seq_len: int) -> int:
    """Training FLOPs per token of a decoder LM: forward + backward.

    The PaLM paper's appendix B formula, as nanoGPT's estimate_mfu writes it:
        6 * N + 12 * L * H * Q * T
    N: parameters without the position embedding (the token embedding stays: it
    is the tied output projection); 6N: 2 FLOPs per multiply-add, times 3 for
    forward and backward. 12*L*H*Q*T: the attention scores and the weighted
    sum, QK^T and AV, each 2*T*Q per head per token, times 3, over the full
    T x T matrix (the causal mask is not subtracted, as in PaLM and nanoGPT).
    """
    return 6 * n_params + 12 * n_layer * n_head * head_dim * seq_len


def mfu(flops_per_token: float, tokens_per_s_per_gpu: float, peak_tflops: float | None) -> float | None:
    """Model FLOPs utilisation: achieved model FLOP/s of one GPU over its peak."""
    if not peak_tflops:
        return None
    return flops_per_token * tokens_per_s_per_gpu / (peak_tflops * TERA)


# --------------------------------------------------------------------------- peaks
# Peak dense (non-sparse) throughput in TFLOP/s per GPU, from the vendors'
# datasheets. Datasheets quote tensor-core figures "with sparsity"; the dense
# figure is half of that. "fp32" is the plain FP32 (CUDA core) rate, "tf32"
# the TF32 tensor-core rate; bf16/fp16 are tensor-core rates with FP32
# accumulate, which is what PyTorch's matmuls use. None: no such unit.
#
#   T4:        NVIDIA T4 Tensor Core GPU datasheet (FP32 8.1, mixed FP16/FP32 65)
#   A10:       NVIDIA A10 Tensor Core GPU datasheet (FP32 31.2, TF32 62.5, BF16/FP16 125)
#   L4:        NVIDIA L4 Tensor Core GPU datasheet (FP32 30.3, TF32 120*, BF16/FP16 242*)
#   L40S:      NVIDIA L40S GPU datasheet (FP32 91.6, TF32 183, BF16/FP16 362.05)
#   A100:      NVIDIA A100 Tensor Core GPU datasheet (FP32 19.5, TF32 156, BF16/FP16 312), SXM and PCIe
#   H100:      NVIDIA H100 Tensor Core GPU datasheet: SXM (FP32 67, TF32 989*, BF16/FP16 1,979*),
#              PCIe (51, 756*, 1,513*), NVL (60, 835*, 1,671*)
#   H200:      NVIDIA H200 Tensor Core GPU datasheet: SXM (67, 989*, 1,979*), NVL (60, 835*, 1,671*)
#   RTX 3090:  NVIDIA Ampere GA102 GPU architecture whitepaper, appendix A
#              (FP32 35.6, TF32 35.6, FP16/BF16 with FP32 accumulate 71)
#   RTX 4090:  NVIDIA Ada GPU architecture whitepaper, appendix A
#              (FP32 82.6, TF32 82.6, FP16/BF16 with FP32 accumulate 165.2)
#   (* = datasheet figure with sparsity; the table holds half of it)
PEAK_TFLOPS: tuple[tuple[str, dict[str, float | None]], ...] = (
    # pattern on the upper-cased device name, most specific first
    (r"H100.*PCIE", {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5}),
    (r"H100.*NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    (r"H100", {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}),
    (r"H200.*NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    (r"H200", {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}),
    (r"A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    (r"\bA10\b", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),
    (r"L40S", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05}),
    (r"\bL4\b", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}),
    (r"\bT4\b", {"fp32": 8.1, "tf32": None, "bf16": None, "fp16": 65.0}),
    (r"RTX 3090", {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0}),
    (r"RTX 4090", {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2}),
)


def peak_tflops(device_name: str, precision: str, tf32: bool = False) -> float | None:
    """The peak dense TFLOP/s of one GPU at a precision; None when unknown.

    `precision` is fp32, bf16 or fp16; fp32 with `tf32` (TF32 matmuls allowed)
    is compared with the TF32 tensor-core peak.
    """
    key = "tf32" if precision == "fp32" and tf32 else precision
    name = device_name.upper()
    for pattern, peaks in PEAK_TFLOPS:
        if re.search(pattern, name):
            return peaks.get(key)
    return None


# --------------------------------------------------------------------------- progress line
# Rank 0 prints one machine-readable line now and then while a workload runs, for
# gpubench to show as live progress (and to leave out of the run's log):
#   GPUBENCH_PROGRESS phase=measure step=20 total=50 rate=812.4 unit=samples/s elapsed=2.31
# phase is warmup or measure; rate is samples/s over the steps since the previous
# line; elapsed is seconds since the phase began; gpu_util (%) and gpu_mem (bytes)
# follow when the GPU is sampled. Values never hold a space.
PROGRESS_TAG = "GPUBENCH_PROGRESS"
PROGRESS_INTS = ("step", "total")
PROGRESS_FLOATS = ("rate", "elapsed", "gpu_util", "gpu_mem")


def progress_line(phase: str, step: int, total: int, elapsed: float, rate: float | None = None,
                  unit: str = "samples/s", gpu_util: float | None = None,
                  gpu_mem: float | None = None) -> str:
    fields = [f"phase={phase}", f"step={step}", f"total={total}"]
    if rate is not None:
        fields += [f"rate={rate:.1f}", f"unit={unit.replace(' ', '_')}"]
    fields.append(f"elapsed={elapsed:.2f}")
    if gpu_util is not None:
        fields.append(f"gpu_util={gpu_util:.0f}")
    if gpu_mem is not None:
        fields.append(f"gpu_mem={gpu_mem:.0f}")
    return " ".join([PROGRESS_TAG, *fields])


def parse_progress(line: str) -> dict | None:
    """The fields of a progress line, typed; None for any other line (or a garbled one)."""
    parts = line.strip().split()
    if not parts or parts[0] != PROGRESS_TAG:
        return None
    fields: dict = {}
    try:
        for part in parts[1:]:
            key, _, value = part.partition("=")
            if key in PROGRESS_INTS:
                fields[key] = int(value)
            elif key in PROGRESS_FLOATS:
                fields[key] = float(value)
            elif key in ("phase", "unit"):
                fields[key] = value
    except ValueError:
        return None
    if "step" not in fields or "total" not in fields:
        return None
    fields.setdefault("phase", "measure")
    return fields
