"""The GPU reference table: every provider's spelling reaches the same row, unknowns stay
None, and the published anchors name GPUs the table knows."""

from __future__ import annotations

import dataclasses

import pytest

from gpubench.errors import UsageError
from gpubench.mock import catalog
from gpubench.predict import gpu_specs as gs
from gpubench.predict.gpu_specs import peak_tflops, published_for, spec_for

# (spellings, canonical name, memory GB). Spellings from shared/real_responses (Lambda's
# live and documented instance types, Vast bundles, RunPod gpu types), shared/provider-apis.md
# (RunPod ids), the mock catalog, torch device names and what users type.
SPELLINGS = [
    (["gpu_8x_h100_sxm5", "H100 (80 GB SXM5)", "NVIDIA H100 80GB HBM3",
      "H100 SXM", "h100-sxm5-80gb", "h100sxm"], "H100 SXM", 80),
    (["gpu_1x_h100_pcie", "H100 (80 GB PCIe)", "H100 PCIE", "NVIDIA H100 PCIe"], "H100 PCIe", 80),
    (["NVIDIA H100 NVL", "h100 nvl"], "H100 NVL", 94),
    (["NVIDIA H200", "H200", "gpu_8x_h200_sxm5", "H200 SXM"], "H200 SXM", 141),
    (["gpu_1x_gh200", "GH200 (96 GB)"], "GH200", 96),
    (["NVIDIA B200", "gpu_8x_b200_sxm6"], "B200 SXM", 180),
    (["gpu_8x_a100_80gb_sxm4", "A100 (80 GB SXM4)", "NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB",
      "A100 SXM4", "A100 SXM"], "A100 SXM", 80),
    (["gpu_1x_a100_sxm4 40gb", "A100 (40 GB SXM4)", "NVIDIA A100-SXM4-40GB"],
     "A100 SXM", 40),
    (["NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB", "a100 pcie 80gb"], "A100 PCIe", 80),
    (["A100 (40 GB PCIe)", "A100 PCIE", "NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB", "a100 pcie"],
     "A100 PCIe", 40),
    (["NVIDIA L40S", "L40S"], "L40S", 48),
    (["NVIDIA L40", "L40"], "L40", 48),
    (["NVIDIA L4", "L4"], "L4", 24),
    (["gpu_1x_a10", "A10 (24 GB PCIe)", "NVIDIA A10", "A10"], "A10", 24),
    (["NVIDIA A40", "A40"], "A40", 48),
    (["gpu_4x_a6000", "NVIDIA RTX A6000", "RTX A6000", "a6000"], "RTX A6000", 48),
    (["NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"], "RTX 6000 Ada", 48),
    (["NVIDIA GeForce RTX 5090", "RTX 5090", "rtx5090"], "RTX 5090", 32),
    (["NVIDIA GeForce RTX 4090", "RTX 4090", "RTX_4090", "rtx-4090", "NVIDIA RTX 4090"], "RTX 4090", 24),
    (["NVIDIA GeForce RTX 3090", "RTX 3090", "rtx3090"], "RTX 3090", 24),
    (["Tesla V100-SXM2-16GB", "V100 SXM2"], "V100 SXM", 16),
    (["Tesla V100-SXM2-32GB"], "V100 SXM", 32),
    (["Tesla T4", "T4"], "T4", 16),
]


@pytest.mark.parametrize("spellings,name,memory", SPELLINGS)
def test_every_spelling_reaches_one_row(spellings, name, memory):
    rows = {spec_for(s) for s in spellings}
    assert len(rows) == 1, spellings
    row = rows.pop()
    assert row is not None and (row.name, row.memory_gb) == (name, memory)


def test_mock_catalog_names_resolve_to_the_catalogs_card():
    for g in catalog.GPUS:
        names = [g.lambda_desc, g.vast_name, g.runpod_id, g.runpod_name]
        names += [f"gpu_{n}x_{g.lambda_type}" for n in g.lambda_counts] if g.lambda_type else []
        for name in filter(None, names):
            # Lambda's bare "gpu_1x_a100" names no form factor: NVLink or not is unknown,
            # so it resolves only beside its description ("A100 (40 GB PCIe)", checked here too).
            if name.startswith("gpu_") and g.lambda_type == "a100":
                assert spec_for(name, g.memory_gb) is None
                continue
            row = spec_for(name, g.memory_gb)
            assert row is not None and row.memory_gb == g.memory_gb, (g.key, name)
            assert spec_for(name) is not None, (g.key, name)     # the size unstated: the default


def test_memory_size_picks_the_row_and_a_wrong_size_gives_none():
    assert spec_for("A100 SXM", 40).memory_bw_gbs == 1555
    assert spec_for("A100 SXM").memory_bw_gbs == 2039            # unstated: 80 GB (DEFAULT_MEMORY_GB)
    assert spec_for("A100 PCIe").memory_gb == 40
    assert spec_for("A100 PCIe", 80).memory_bw_gbs == 1935
    assert spec_for("A100 (40 GB PCIe)", 40) is spec_for("NVIDIA A100-PCIE-40GB")
    assert spec_for("H200", 140).name == "H200 SXM"               # Vast's 143,771 MB
    assert spec_for("RTX 4090", 48) is None
    assert spec_for("NVIDIA A100 24GB") is None


def test_every_model_sold_in_several_sizes_has_a_default():
    sizes: dict[str, set] = {}
    for s in gs.SPECS:
        sizes.setdefault(s.name, set()).add(s.memory_gb)
    several = {name for name, mem in sizes.items() if len(mem) > 1}
    assert several == set(gs.DEFAULT_MEMORY_GB)
    assert all(gs.DEFAULT_MEMORY_GB[n] in sizes[n] for n in several)
    assert all(a in gs.known_gpus() for a in gs.ALIASES.values())


@pytest.mark.parametrize("name", [
    "", "Example GPU (40 GB SXM4)", "RTX A5000", "RTX A4000", "NVIDIA GeForce RTX 3070", "MI300X",
    "H100", "A100", "gpu_1x_a100", "V100", "NVIDIA H200 NVL", "A10G",
    "gpu_1x_rtx6000", "Quadro RTX 6000",   # Turing, not the RTX 6000 Ada
])
def test_unknown_or_ambiguous_names_give_none(name):
    assert spec_for(name) is None


def test_unknown_peaks_are_none():
    assert spec_for("B200").bf16_tflops is None
    assert spec_for("RTX 5090").bf16_tflops is None and spec_for("RTX 5090").fp32_tflops == 104.8
    assert spec_for("RTX A6000").tf32_tflops is None
    t4 = spec_for("T4")
    assert t4.bf16_tflops is None and t4.tf32_tflops is None and t4.fp16_tflops == 65


def test_peak_tflops_by_precision():
    h100 = spec_for("H100 SXM")
    assert [peak_tflops(h100, p) for p in ("fp32", "tf32", "bf16", "fp16")] == [67, 494.5, 989, 989]
    assert peak_tflops(spec_for("RTX 4090"), "bf16") == 165.2     # FP32 accumulate, as autocast
    assert peak_tflops(h100, "fp8") is None
    assert peak_tflops(spec_for("V100 SXM"), "bf16") is None


def test_rows_carry_sources_and_sane_figures():
    assert len(set(gs.SPECS)) == len(gs.SPECS)
    for s in gs.SPECS:
        assert s.peaks_source and s.memory_source and s.link_source, s.name
        assert s.memory_gb and s.memory_bw_gbs, s.name              # datasheet: known for every row
        peaks = [p for p in (s.fp32_tflops, s.tf32_tflops, s.bf16_tflops, s.fp16_tflops) if p is not None]
        assert all(p > 0 for p in peaks), s.name
        if s.bf16_tflops and s.fp32_tflops:
            assert s.bf16_tflops >= s.fp32_tflops, s.name
        if s.allreduce_busbw_gbs is not None:
            assert s.link_source.count("GB/s"), s.name
    assert gs.known_gpus()[0] == "H200 SXM" and len(gs.known_gpus()) == len(set(gs.known_gpus()))
    assert sorted(gs.PCIE_ALLREDUCE_GBS) == [3, 4, 5] and gs.PCIE_SOURCE
    assert all(s.pcie_gen in gs.PCIE_ALLREDUCE_GBS for s in gs.SPECS if s.pcie_gen is not None)


def test_nvlink_and_links():
    assert spec_for("H100 SXM").nvlink and spec_for("H100 NVL").nvlink and spec_for("A100 SXM").nvlink
    assert not spec_for("H100 PCIe").nvlink and not spec_for("RTX 4090").nvlink
    assert spec_for("A100 SXM").allreduce_busbw_gbs > 200
    assert spec_for("A100 PCIe").allreduce_busbw_gbs is None       # no published figure: the PCIe estimate
    assert spec_for("RTX 5090").allreduce_busbw_gbs == 28


def test_published_rows_resolve_and_carry_sources():
    for p in gs.PUBLISHED:
        spec = spec_for(p.gpu_name)
        assert spec is not None and spec.name == p.gpu_name, p
        assert p.workload in {"resnet-ddp", "gpt-ddp"} and p.unit in {"images/s", "tokens/s"}
        assert p.precision in {"fp16", "bf16", "fp32", "tf32"} and p.gpus >= 1 and p.per_gpu > 0
        assert p.source and p.date


def test_published_for_filters_and_orders():
    rows = published_for("resnet-ddp", "NVIDIA H100 80GB HBM3")
    assert rows and all(r.gpu_name == "H100 SXM" and r.workload == "resnet-ddp" for r in rows)
    assert [r.gpus for r in rows] == sorted(r.gpus for r in rows) and rows[0].gpus == 1
    amp = published_for("resnet-ddp", "h100 sxm", "bf16")         # bf16 asks the AMP class
    assert amp and {r.precision for r in amp} == {"fp16"}
    assert {r.precision for r in published_for("resnet-ddp", "H100 SXM", "tf32")} == {"fp32"}
    assert published_for("resnet-ddp", "gpu_1x_h100_pcie")[0].per_gpu == 1866
    assert published_for("gpt-ddp", "H100 SXM") and not published_for("gpt-ddp", "RTX 4090")
    assert published_for("resnet-ddp", "Example GPU") == []
    assert published_for("resnet-ddp", "H100 SXM", "int8") == []
    # per GPU is the total over the GPUs: DLE's 8x A100 AMP 16,621 img/s
    eight = [r for r in published_for("resnet-ddp", "A100 SXM", "fp16") if r.gpus == 8 and "DGX" in r.note]
    assert eight[0].per_gpu == pytest.approx(16621 / 8)


def test_rows_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec_for("T4").memory_gb = 32


def test_a_typed_name_is_one_row_or_one_line_saying_why_not():
    spec, taken = gs.spec_named("H100")
    assert (spec.name, taken.note) == ("H100 SXM", "H100 taken as H100 SXM; H100 PCIe and H100 NVL are the others")
    spec, taken = gs.spec_named("a100 40gb")
    assert (spec.name, spec.memory_gb) == ("A100 SXM", 40)
    with pytest.raises(UsageError, match=r"^--gpu: 'A100 SXM 24GB': gpubench knows the A100 SXM with 40 or 80 GB, "
                                         r"not 24 GB$"):
        gs.spec_named("A100 SXM 24GB")
