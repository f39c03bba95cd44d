"""The reference table of GPU types: what the performance model knows about a GPU
before anyone has rented one.

Per GPU type (one row per model and memory size): memory and its bandwidth, dense
peak TFLOP/s per precision, whether its machines join GPUs over NVLink, the NCCL
all-reduce bus bandwidth a machine of several reaches, and the PCIe generation. Beside
them, published training throughput of ResNet-50 and GPT-2 124M (`PUBLISHED`), the
anchors for the suite's resnet-ddp and gpt-ddp.

Where the figures come from: shared/reference/gpu-figures.md gathers them with their
sources (NVIDIA datasheets and whitepapers as quoted by Lightning, torchtitan, llm.c and
stas00/ml-engineering; NVIDIA DeepLearningExamples and Lambda's benchmark CSVs; nccl-tests
results). Memory sizes and bandwidths are NVIDIA datasheet figures. Each row names its
source per group of figures; the peaks quoted from code (Lightning, pytorch/ao,
torchtitan, llm.c) were checked in those files. Check a figure at its source before
relying on it or changing it. "derived" marks arithmetic on quoted figures. A figure no
source gives is None, never a guess: the model must then say it cannot predict.

Names are canonical as gpubench.providers.gpus spells them ("H100 SXM", "RTX 4090",
"A100 PCIe"); `spec_for` reads any provider's or user's spelling through that module, and
`spec_named` takes what a user types for one card ("H100", "4090") the way that module's
`resolve_gpu` resolves it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpubench.errors import UsageError
from gpubench.providers.gpus import SAME_CARD, GpuChoice, resolve_gpu, wanted_gpu


@dataclass(frozen=True)
class GpuSpec:
    name: str                    # canonical (gpubench.providers.gpus.normalize_gpu_name)
    memory_gb: float | None
    memory_bw_gbs: float | None  # device memory bandwidth, GB/s
    fp32_tflops: float | None    # dense, non-tensor
    tf32_tflops: float | None    # dense tensor
    bf16_tflops: float | None    # dense tensor (FP32 accumulate on GeForce)
    fp16_tflops: float | None    # dense tensor, FP32 accumulate (what autocast runs)
    nvlink: bool                 # sold in machines whose GPUs talk over NVLink
    allreduce_busbw_gbs: float | None  # NCCL all-reduce busbw inside one machine of several
    pcie_gen: int | None
    peaks_source: str
    memory_source: str
    link_source: str
    memory_kind: str = "HBM"     # "GDDR": a graphics card's memory (GeForce, the L and A10/A40 parts, T4)


DATASHEET = "NVIDIA datasheet"
_ML_ENG = "stas00/ml-engineering:compute/accelerator/README.md (TFLOPS table)"
_ML_ENG_NET = "stas00/ml-engineering:network/README.md"
_TITAN = "pytorch/torchtitan:torchtitan/tools/utils.py get_peak_flops"
_LIGHTNING = "Lightning-AI/pytorch-lightning:src/lightning/fabric/utilities/throughput.py _CUDA_FLOPS"
_A100_PEAKS = f"{_ML_ENG} notes 3-4; {_LIGHTNING} 'a100' (SXM and PCIe have the same peaks)"
_A100_LINK = f"{_ML_ENG_NET}: 8x A100 NVLink3 234.9 GB/s (Azure ND_A100_v4: 231.6)"


def _pcie(gen: int) -> str:
    return f"{DATASHEET} (PCIe Gen{gen} x16); no published all-reduce figure"


# Where NVLink machines publish both, allreduce_busbw_gbs is the ring figure
# (NCCL_NVLS_ENABLE=0), not NVLS: rented VMs may lack NVLS, and the lower one promises less.
# V100 and T4 have no BF16 or TF32 tensor cores: None there means "does not have it".
SPECS: tuple[GpuSpec, ...] = (
    GpuSpec("H200 SXM", 141, 4800, 67, 494.5, 989, 989, True, 367.6, 5,
            f"{_ML_ENG} note 16; {_TITAN} 989e12 for H200", DATASHEET,
            f"{_ML_ENG_NET}: 8x H200 ring 367.6 GB/s, NVLS 482 (16 GiB)"),
    GpuSpec("H100 SXM", 80, 3350, 67, 494.5, 989, 989, True, 370, 5,
            f"{_ML_ENG}; {_LIGHTNING} 1.979e15/2; {_TITAN} 989e12", DATASHEET,
            f"NVIDIA/nccl-tests#212 and {_ML_ENG_NET}: 8x H100 ~370 GB/s ring, ~480 NVLS"),
    GpuSpec("H100 PCIe", 80, 2000, 51, 378, 756, 756, False, None, 5,
            f"{_ML_ENG}; {_LIGHTNING} 1.513e15/2; {_TITAN} 756e12", DATASHEET, _pcie(5)),
    # Sold in pairs joined by an NVLink bridge. A bridged pair reaches ~116 GB/s
    # (NVIDIA/nccl#1161, measured on H100 PCIe + bridge); a machine of more crosses PCIe.
    GpuSpec("H100 NVL", 94, 3900, 60, 417.5, 835, 835, True, None, 5,
            f"{_TITAN} 835e12; FP32 60 from NVIDIA's NVL table; TF32 417.5 derived (835 sparse / 2)",
            DATASHEET, "NVIDIA datasheet (NVLink bridge per pair, PCIe Gen5); "
            "NVIDIA/nccl#1161: ~116 GB/s for a bridged pair only"),
    # The Hopper GPU of H100 SXM on one board with a Grace CPU (NVLink-C2C to the CPU, not to GPUs).
    GpuSpec("GH200", 96, 4000, 67, 494.5, 989, 989, False, None, None,
            "NVIDIA GH200 datasheet (the H100 SXM peaks); "
            f"{_ML_ENG} MAMF table: 828.6 = 83.8% of 989",
            "NVIDIA GH200 datasheet (96 GB HBM3, 4 TB/s)",
            "one GPU per machine (Lambda gpu_1x_gh200); NVLink-C2C joins it to its CPU"),
    # B200 peaks are not in shared/reference/gpu-figures.md, and NVIDIA prints different ones
    # for HGX and DGX power levels: left unknown.
    GpuSpec("B200 SXM", 180, 8000, None, None, None, None, True, 682, None,
            "none sourced", "NVIDIA HGX B200 datasheet (1.44 TB and 64 TB/s for 8 GPUs)",
            f"{_ML_ENG_NET}: 8x B200 (AWS p6) 682 GB/s ring, 838 NVLS"),
    GpuSpec("A100 SXM", 80, 2039, 19.5, 156, 312, 312, True, 234.9, 4,
            _A100_PEAKS, DATASHEET, _A100_LINK),
    GpuSpec("A100 SXM", 40, 1555, 19.5, 156, 312, 312, True, 234.9, 4,
            _A100_PEAKS, DATASHEET, f"{_A100_LINK}; measured on 80 GB parts, same NVLink3"),
    GpuSpec("A100 PCIe", 80, 1935, 19.5, 156, 312, 312, False, None, 4,
            f"{_A100_PEAKS}; the 300 W TDP lowers sustained clocks", DATASHEET, _pcie(4)),
    GpuSpec("A100 PCIe", 40, 1555, 19.5, 156, 312, 312, False, None, 4,
            f"{_A100_PEAKS}; the 250 W TDP lowers sustained clocks", DATASHEET, _pcie(4)),
    GpuSpec("L40S", 48, 864, 91.6, 183, 362, 362, False, None, 4,
            f"{_ML_ENG} note 6; torchtitan 362e12", DATASHEET, _pcie(4), memory_kind="GDDR"),
    GpuSpec("L40", 48, 864, 90.5, 90.5, 181, 181, False, None, 4,
            "pytorch/ao:torchao/profiler/device_spec.py 'l40' (NVIDIA L40 datasheet)", DATASHEET, _pcie(4),
            memory_kind="GDDR"),
    GpuSpec("L4", 24, 300, 30.3, 60, 121, 121, False, None, 4,
            "winston-zhang-orz/gpu-specs:specs.md; kentjliu/acml-project1:README.md (242 sparse)",
            DATASHEET, _pcie(4), memory_kind="GDDR"),
    GpuSpec("A10", 24, 600, 31.2, 62.5, 125, 125, False, None, 4,
            f"{_LIGHTNING} 'a10g' (cites a10-datasheet.pdf); winston-zhang-orz/gpu-specs:specs.md",
            DATASHEET, _pcie(4), memory_kind="GDDR"),
    GpuSpec("A40", 48, 696, 37.4, 74.8, 149.7, 149.7, False, None, 4,
            "NVIDIA A40 datasheet (BF16 with FP32 accumulate 149.7 dense); "
            "pytorch/ao:torchao/profiler/device_spec.py 'a40' (FP32, TF32)", DATASHEET, _pcie(4), memory_kind="GDDR"),
    # Tensor peaks disagree at the sources: the datasheet's 309.7 sparse reads as 154.8
    # dense, llm.c:llmc/mfu.h scales the GeForce rate (77.4 BF16), pytorch/ao says 38.7.
    GpuSpec("RTX A6000", 48, 768, 38.7, None, None, None, False, None, 4,
            "NVIDIA RTX A6000 datasheet (FP32 38.7); tensor peaks conflict between sources",
            DATASHEET, _pcie(4), memory_kind="GDDR"),
    # NVIDIA prints only FP8 with sparsity (1,457); llm.c scales the GeForce rate instead.
    GpuSpec("RTX 6000 Ada", 48, 960, 91.1, None, None, None, False, None, 4,
            "NVIDIA RTX 6000 Ada datasheet (FP32 91.1); dense tensor peaks not printed",
            DATASHEET, _pcie(4), memory_kind="GDDR"),
    GpuSpec("RTX 5090", 32, 1792, 104.8, None, None, None, False, 28, 5,
            "NVIDIA RTX Blackwell whitepaper (FP32 104.8); tensor peaks with FP32 accumulate not sourced",
            DATASHEET, "NVIDIA/nccl#1639: 8x RTX 5090, PCIe Gen5, 28 GB/s (4 GPUs: 35)", memory_kind="GDDR"),
    # GeForce: FP16/BF16 with FP32 accumulate (autocast) run at half the FP16-accumulate rate.
    GpuSpec("RTX 4090", 24, 1008, 82.6, 82.6, 165.2, 165.2, False, None, 4,
            "karpathy/llm.c:llmc/mfu.h ADA (Ada whitepaper App. A Table 2)", DATASHEET, _pcie(4), memory_kind="GDDR"),
    GpuSpec("RTX 3090", 24, 936, 35.6, 35.6, 71, 71, False, None, 4,
            "GA102 whitepaper App. A; karpathy/llm.c:llmc/mfu.h AMPERE_CONSUMER scaled (derived)",
            DATASHEET, _pcie(4), memory_kind="GDDR"),
    GpuSpec("V100 SXM", 16, 900, 15.7, None, None, 125, True, None, 3,
            f"{_LIGHTNING} 'v100-sxm' (V100 datasheet)", DATASHEET,
            "NVIDIA datasheet (NVLink2 SXM2, PCIe Gen3); no published all-reduce figure"),
    GpuSpec("V100 SXM", 32, 900, 15.7, None, None, 125, True, None, 3,
            f"{_LIGHTNING} 'v100-sxm' (V100 datasheet)", DATASHEET,
            "NVIDIA datasheet (NVLink2 SXM2, PCIe Gen3); no published all-reduce figure"),
    GpuSpec("T4", 16, 320, 8.1, None, None, 65, False, None, 3,
            f"{_LIGHTNING} 't4' (t4-tensor-core-datasheet-951643.pdf)", DATASHEET, _pcie(3), memory_kind="GDDR"),
)

# Spellings that mean one row although they differ from its name (a bare H200 is the SXM
# part): kept beside the other spellings, in gpubench.providers.gpus.
ALIASES = SAME_CARD

# A model sold in two memory sizes, named without one: the size providers mean by it.
# A100 SXM: RunPod's only one, and the mock's (Lambda's 40 GB SXM4 says "40 GB").
# A100 PCIe: Lambda's and the mock's (RunPod's 80 GB one says "80GB" in its id).
# V100 SXM: 16 and 32 GB differ in nothing else; the smaller promises no batch that won't fit.
# A bare "A100" or "V100" stays unknown: the form factor decides NVLink.
DEFAULT_MEMORY_GB = {"A100 SXM": 80, "A100 PCIe": 40, "V100 SXM": 16}

# Rough all-reduce busbw over PCIe by generation, GB/s. ESTIMATES, not published figures:
# Gen4 is the x16 P2P rate (~25), Gen5 about twice (~54-56 measured P2P), Gen3 half of Gen4.
# Hosts of 4-8 GPUs measure less: 8x RTX 5090 Gen5 28 GB/s (NVIDIA/nccl#1639), 8x RTX PRO
# 6000 Gen5 22-41 (voipmonitor/rtx6kpro), bound by the host's CPU and memory.
PCIE_ALLREDUCE_GBS: dict[int, float] = {3: 12.5, 4: 25.0, 5: 50.0}
PCIE_SOURCE = ("estimate from PCIe x16 P2P rates (shared/reference/gpu-figures.md section 4; "
               "voipmonitor/rtx6kpro:hardware/pcie-bandwidth.md for Gen5); no published 2-GPU figure")


def spec_for(gpu_name: str, memory_gb: float | None = None) -> GpuSpec | None:
    """The row for any spelling ("gpu_1x_h100_sxm5", "NVIDIA H100 80GB HBM3", "RTX_4090",
    "A100-SXM4-80GB", "a100 pcie"), or None. The memory size picks between the sizes of
    one model: `memory_gb` (pass the offer's, e.g. offer_vram_gb) before a size in the
    name, else DEFAULT_MEMORY_GB. A size that no row of the model has within 10% (Vast
    reports 140 for the 141 GB H200) gives None, not the wrong card."""
    wanted = wanted_gpu(gpu_name or "")
    name = ALIASES.get(wanted.name, wanted.name)
    rows = [s for s in SPECS if s.name == name]
    if not rows:
        return None
    size = memory_gb or wanted.memory_gb
    if size is None:
        size = DEFAULT_MEMORY_GB.get(name, rows[0].memory_gb)
    best = min(rows, key=lambda s: abs(s.memory_gb - size))
    return best if abs(best.memory_gb - size) <= 0.1 * best.memory_gb else None


def spec_named(text: str, flag: str = "--gpu") -> tuple[GpuSpec, GpuChoice]:
    """The row for the card a user means by `text` ("H100" -> H100 SXM, "4090", "a100 40gb"),
    and how it was taken (its `note` says which card a family's name was taken as);
    UsageError of one line where the text means no row, or several."""
    choice = resolve_gpu(text, known_gpus(), flag)
    spec = spec_for(choice.name, choice.memory_gb)
    if spec is None:
        sizes = sorted({s.memory_gb for s in SPECS if s.name == choice.name})
        raise UsageError(f"{flag}: '{text}': gpubench knows the {choice.name} with "
                         f"{' or '.join(f'{g:g}' for g in sizes)} GB, not {choice.memory_gb} GB")
    return spec, choice


_PEAK_FIELDS = {"fp32": "fp32_tflops", "tf32": "tf32_tflops", "bf16": "bf16_tflops", "fp16": "fp16_tflops"}


def peak_tflops(spec: GpuSpec, precision: str) -> float | None:
    """Dense peak for 'fp32' (non-tensor), 'tf32', 'bf16' or 'fp16'; None if unknown.
    A workload in fp32 with TF32 allowed should ask for 'tf32'."""
    field = _PEAK_FIELDS.get(precision)
    return getattr(spec, field) if field else None


def known_gpus() -> list[str]:
    """Canonical names in the table, each once, in table order."""
    return list(dict.fromkeys(s.name for s in SPECS))


@dataclass(frozen=True)
class PublishedThroughput:
    workload: str        # the suite workload it stands for: "resnet-ddp" or "gpt-ddp"
    gpu_name: str        # canonical
    gpus: int            # GPUs in the measurement
    per_gpu: float       # throughput per GPU in `unit`
    unit: str            # "images/s", "tokens/s"
    precision: str       # "fp16"/"bf16" (AMP) or "tf32"/"fp32", as the source labels it
    batch_per_gpu: int | None
    source: str
    date: str            # as the source gives it
    note: str = ""       # what differs from gpubench's workload


_DLE = "NVIDIA/DeepLearningExamples:PyTorch/Classification/ConvNets/resnet50v1.5/README.md"
_LAMBDA_V1 = "lambdal/deeplearning-benchmark:pytorch/pytorch-train-throughput-{fp16,fp32}.csv"
_LAMBDA_V1_DATE = "2023 results (NGC 22.10); CSV last changed 2024-07-24"
_LAMBDA_V2 = "lambdal/deeplearning-benchmark@aa5addb:pytorch/pytorch-train-throughput-v2-fp16.csv"
_LAMBDA_FP32 = "Lambda's 'fp32' column, presumably TF32 math (NGC default; an inference)"
_LAMBDA = "Lambda's run of NVIDIA DLE ResNet-50"
_LAMBDA_V2_NOTE = f"{_LAMBDA}, synthetic data, NGC pytorch:24.10"
_LAMBDA_V2_DATE = "2024-08 to 2025-12"


def _resnet(gpu, gpus, total, precision, batch, source, date, note=""):
    """ResNet-50 rows: the sources give the total over `gpus` GPUs; per GPU is total / gpus."""
    return PublishedThroughput("resnet-ddp", gpu, gpus, total / gpus, "images/s", precision,
                               batch, source, date, note)


def _gpt(gpu, gpus, tokens_per_s_total, batch, source, date, note):
    """GPT-2 124M rows, bf16; every one derived from step time or wall time (see note)."""
    return PublishedThroughput("gpt-ddp", gpu, gpus, tokens_per_s_total / gpus, "tokens/s", "bf16",
                               batch, source, date, note)


PUBLISHED: tuple[PublishedThroughput, ...] = (
    # NVIDIA DeepLearningExamples, ResNet-50 v1.5 (DGX A100 80GB; DGX-1 V100 16/32 GB)
    _resnet("A100 SXM", 1, 938, "tf32", 256, _DLE, "NGC pytorch-21.03", "DGX A100, A100 80GB"),
    _resnet("A100 SXM", 8, 7248, "tf32", 256, _DLE, "NGC pytorch-21.03", "DGX A100, A100 80GB"),
    _resnet("A100 SXM", 1, 2470, "fp16", 256, _DLE, "NGC pytorch-21.03", "DGX A100, A100 80GB; AMP, NHWC"),
    _resnet("A100 SXM", 8, 16621, "fp16", 256, _DLE, "NGC pytorch-21.03", "DGX A100, A100 80GB; AMP, NHWC"),
    _resnet("V100 SXM", 1, 367, "fp32", 112, _DLE, "not stated", "DGX-1, V100 16GB"),
    _resnet("V100 SXM", 8, 2855, "fp32", 112, _DLE, "not stated", "DGX-1, V100 16GB"),
    _resnet("V100 SXM", 1, 1200, "fp16", 256, _DLE, "not stated", "DGX-1, V100 16GB; AMP"),
    _resnet("V100 SXM", 8, 8322, "fp16", 256, _DLE, "not stated", "DGX-1, V100 16GB; AMP"),
    _resnet("V100 SXM", 1, 356, "fp32", 112, _DLE, "not stated", "DGX-1, V100 32GB"),
    _resnet("V100 SXM", 8, 2766, "fp32", 112, _DLE, "not stated", "DGX-1, V100 32GB"),
    _resnet("V100 SXM", 1, 1156, "fp16", 256, _DLE, "not stated", "DGX-1, V100 32GB; AMP"),
    _resnet("V100 SXM", 8, 8056, "fp16", 256, _DLE, "not stated", "DGX-1, V100 32GB; AMP"),
    # Lambda v1 (batch = total / GPUs from pytorch-train-bs-*.csv; far above gpubench's 256)
    _resnet("A100 SXM", 1, 1582, "fp16", 1280, _LAMBDA_V1, _LAMBDA_V1_DATE, f"{_LAMBDA}; A100 80GB SXM4"),
    _resnet("A100 SXM", 8, 11439, "fp16", 1280, _LAMBDA_V1, _LAMBDA_V1_DATE, f"{_LAMBDA}; A100 80GB SXM4"),
    _resnet("A100 SXM", 1, 1066, "fp32", 640, _LAMBDA_V1, _LAMBDA_V1_DATE, f"{_LAMBDA_FP32}; A100 80GB SXM4"),
    _resnet("A100 SXM", 8, 7397, "fp32", 640, _LAMBDA_V1, _LAMBDA_V1_DATE, f"{_LAMBDA_FP32}; A100 80GB SXM4"),
    _resnet("H100 SXM", 1, 2616, "fp16", 1280, _LAMBDA_V1, _LAMBDA_V1_DATE, _LAMBDA),
    _resnet("H100 SXM", 8, 20728, "fp16", 1280, _LAMBDA_V1, _LAMBDA_V1_DATE, _LAMBDA),
    _resnet("H100 SXM", 8, 21847, "fp16", 1280, _LAMBDA_V1, _LAMBDA_V1_DATE, f"{_LAMBDA}; Lambda Cloud 8x"),
    _resnet("H100 SXM", 1, 1753, "fp32", 640, _LAMBDA_V1, _LAMBDA_V1_DATE, _LAMBDA_FP32),
    _resnet("H100 SXM", 8, 13856, "fp32", 640, _LAMBDA_V1, _LAMBDA_V1_DATE, _LAMBDA_FP32),
    _resnet("H100 SXM", 8, 14902, "fp32", 640, _LAMBDA_V1, _LAMBDA_V1_DATE,
            f"{_LAMBDA_FP32}; Lambda Cloud 8x"),
    _resnet("H100 PCIe", 1, 1866, "fp16", 1280, _LAMBDA_V1, _LAMBDA_V1_DATE, _LAMBDA),
    _resnet("H100 PCIe", 8, 14713, "fp16", 1280, _LAMBDA_V1, _LAMBDA_V1_DATE, _LAMBDA),
    _resnet("A100 PCIe", 1, 1527, "fp16", 1280, _LAMBDA_V1, _LAMBDA_V1_DATE, f"{_LAMBDA}; A100 80GB PCIe"),
    _resnet("A10", 1, 638, "fp16", 448, _LAMBDA_V1, _LAMBDA_V1_DATE, _LAMBDA),
    _resnet("RTX 3090", 1, 905, "fp16", 448, _LAMBDA_V1, _LAMBDA_V1_DATE, _LAMBDA),
    _resnet("RTX 4090", 1, 1301, "fp16", 448, _LAMBDA_V1, _LAMBDA_V1_DATE, _LAMBDA),
    # Lambda v2: newer container (NGC pytorch:24.10), medians over many runs [derived there]
    _resnet("H100 SXM", 1, 2790, "fp16", 1280, _LAMBDA_V2, _LAMBDA_V2_DATE,
            f"{_LAMBDA_V2_NOTE}; median of 39 runs"),
    _resnet("H100 SXM", 8, 22071, "fp16", 1280, _LAMBDA_V2, _LAMBDA_V2_DATE,
            f"{_LAMBDA_V2_NOTE}; median of 22 runs"),
    _resnet("H100 PCIe", 1, 1976, "fp16", 1280, _LAMBDA_V2, _LAMBDA_V2_DATE, _LAMBDA_V2_NOTE),
    _resnet("H200 SXM", 1, 3079, "fp16", 1280, _LAMBDA_V2, _LAMBDA_V2_DATE, _LAMBDA_V2_NOTE),
    _resnet("H200 SXM", 8, 24475, "fp16", 1280, _LAMBDA_V2, _LAMBDA_V2_DATE,
            f"{_LAMBDA_V2_NOTE}; Lambda bare metal (OEM 8x H200 hosts: 21,512-21,880)"),
    _resnet("B200 SXM", 1, 3076, "fp16", 1280, _LAMBDA_V2 + " (commit 200af3b7)", "2025-12-10",
            _LAMBDA_V2_NOTE),
    _resnet("B200 SXM", 8, 24461, "fp16", 1280, _LAMBDA_V2 + " (commit 200af3b7)", "2025-12-10",
            _LAMBDA_V2_NOTE),
    # GPT-2 124M. The sources give step or wall time; tokens/s is derived from them.
    _gpt("A100 SXM", 1, 20 * 5 * 1024 / 0.755, 20, "karpathy/nanoGPT:transformer_sizing.ipynb",
         "not stated", "nanoGPT, 755 ms/iter at 20 x 5 accumulation x 1024 tokens (37.14% MFU); "
         "the card is given only as 'A100' (nanoGPT's README trains on A100 40GB)"),
    _gpt("A100 SXM", 8, 300e9 / (4 * 86400), 12, "karpathy/nanoGPT:README.md; config/train_gpt2.py",
         "not stated", "nanoGPT, 300B tokens in ~4 days on 8x A100 40GB (form not stated), wall time "
         "with eval; 12 x 5 accumulation x 1024 tokens per GPU"),
    _gpt("A100 SXM", 8, 524288 / 0.300, None, "karpathy/llm.c:scripts/run_gpt2_124M.sh; discussion #481",
         "2024-05-28", "llm.c (CUDA, not PyTorch) on 8x A100 80GB SXM, ~300 ms per 524,288-token step"),
    _gpt("H100 SXM", 8, 524288 / 0.140, None,
         "KellerJordan/modded-nanogpt@f411b3d:records/track_1_short/2024-10-13_llmc/README.md",
         "2024-10-13", "llm.c, 140 ms per 524,288-token step; '8xH100', SXM taken from its 989 TF MFU"),
    _gpt("H100 SXM", 8, 524288 / 0.1418, None,
         "KellerJordan/modded-nanogpt@f411b3d:records/track_1_short/2024-10-18_PyTorch25/",
         "2024-10-18", "modded GPT-2 architecture, torch 2.5 + torch.compile, 141.8 ms per "
                       "524,288-token step; '8xH100', SXM as above"),
)

# fp16 and bf16 are one class (autocast; the same tensor peak on every card that has
# both), and so are fp32 and tf32: the published "fp32" runs use TF32 where the card has
# it (cuDNN allows it for convolutions by default, NGC for matmuls too). Each row keeps
# the label its source gave it.
_PRECISION_CLASS = {"fp16": "amp", "bf16": "amp", "fp32": "fp32", "tf32": "fp32"}


def published_for(workload: str, gpu_name: str, precision: str | None = None) -> list[PublishedThroughput]:
    """Published rows for a suite workload on a GPU type (any spelling; every memory size
    of the model, which the note names), single-GPU rows first; `precision` filters by
    class (fp16 = bf16, fp32 = tf32)."""
    spec = spec_for(gpu_name)
    if spec is None:
        return []
    want = _PRECISION_CLASS.get(precision, precision) if precision else None
    rows = [p for p in PUBLISHED if p.workload == workload and p.gpu_name == spec.name
            and (want is None or _PRECISION_CLASS.get(p.precision) == want)]
    return sorted(rows, key=lambda p: p.gpus)
