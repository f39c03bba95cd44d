import pytest

from gpubench.providers.gpus import gpu_matches, normalize_gpu_name


@pytest.mark.parametrize("raw", ["gpu_1x_h100_pcie", "H100 PCIE", "NVIDIA H100 PCIe", "H100 PCIe",
                                 "H100 (80 GB PCIe)", "gpu_8x_h100_pcie"])
def test_h100_pcie_is_one_gpu(raw):
    assert normalize_gpu_name(raw) == "H100 PCIe"


@pytest.mark.parametrize("raw,canon", [
    ("gpu_8x_h100_sxm5", "H100 SXM"), ("H100 (80 GB SXM5)", "H100 SXM"), ("H100 SXM", "H100 SXM"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("A100 SXM4", "A100 SXM"), ("NVIDIA A100-SXM4-80GB", "A100 SXM"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe"), ("RTX 4090", "RTX 4090"), ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("gpu_1x_a6000", "RTX A6000"), ("NVIDIA RTX A6000", "RTX A6000"), ("Tesla V100", "V100"),
    ("gpu_1x_a10", "A10"), ("A10 (24 GB PCIe)", "A10 PCIe"), ("H100 NVL", "H100 NVL"),
])
def test_canonical_names(raw, canon):
    assert normalize_gpu_name(raw) == canon


def test_type_filter_without_form_factor_matches_all():
    assert gpu_matches("H100", "H100 SXM") and gpu_matches("h100", "H100 PCIe")
    assert gpu_matches("nvidia h100 pcie", "H100 PCIe")
    assert not gpu_matches("H100 SXM", "H100 PCIe")
    assert not gpu_matches("A100", "A10")
    assert gpu_matches("4090", "RTX 4090") and gpu_matches("rtx 4090", "NVIDIA GeForce RTX 4090")
    assert gpu_matches(None, "anything")
