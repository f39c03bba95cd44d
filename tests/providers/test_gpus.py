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


# -- what users type -----------------------------------------------------------

from gpubench.providers.common import Offer  # noqa: E402
from gpubench.providers.gpus import KNOWN_VRAM_GB, offer_vram_gb, wanted_gpu  # noqa: E402


@pytest.mark.parametrize("typed,name,memory", [
    ("rtx4090", "RTX 4090", None), ("4090", "4090", None), ("RTX-4090", "RTX 4090", None),
    ("rtx 4090", "RTX 4090", None), ("RTX_4090", "RTX 4090", None), ("h100 sxm", "H100 SXM", None),
    ("H100-SXM5-80GB", "H100 SXM", 80), ("h100sxm", "H100 SXM", None), ("a100 80gb", "A100", 80),
    ("A100-80GB", "A100", 80), ("a100 80 GB", "A100", 80), ("rtxa6000", "RTX A6000", None),
    ("a6000", "RTX A6000", None), ("3090ti", "3090 TI", None), ("nvidia geforce rtx 3090", "RTX 3090", None),
    ("h100 pcie", "H100 PCIe", None),
])
def test_user_spellings_read_like_provider_names(typed, name, memory):
    assert (wanted_gpu(typed).name, wanted_gpu(typed).memory_gb) == (name, memory)


def test_run_together_words_split_on_the_provider_side_too():
    assert normalize_gpu_name("RTX4090") == normalize_gpu_name("NVIDIA GeForce RTX 4090") == "RTX 4090"
    assert normalize_gpu_name("NVIDIA RTX 6000 Ada Generation") == normalize_gpu_name("RTX 6000 Ada") == "RTX 6000 Ada"


def test_a_memory_size_must_be_the_offers():
    assert gpu_matches("a100 80gb", "A100 SXM", 80) and not gpu_matches("a100 80gb", "A100 PCIe", 40)
    assert not gpu_matches("a100 80gb", "A100 SXM", None)     # unknown memory: not a match
    assert gpu_matches("a100", "A100 PCIe", 40) and gpu_matches("a100", "A100 SXM", None)
    assert gpu_matches("H100-SXM5-80GB", "H100 SXM", 80) and not gpu_matches("H100-SXM5-80GB", "H100 PCIe", 80)


def test_vram_comes_from_the_provider_then_the_table():
    vast = Offer("vast", "1", "A100 SXM", 1, 1.0, extra={"gpu_ram": 81920})   # Vast.ai: MB
    assert offer_vram_gb(vast) == 80
    assert offer_vram_gb(Offer("vast", "1", "A100 SXM", 1, 1.0, extra={"gpu_ram": 40})) == 40
    assert offer_vram_gb(Offer("runpod", "x", "A100 PCIe", 1, 1.0, extra={"memory_gb": 40})) == 40
    assert offer_vram_gb(Offer("lambda", "x", "H100 SXM", 1, 1.0, extra={"vram_gb": 80})) == 80
    assert offer_vram_gb(Offer("vast", "1", "RTX 4090", 1, 1.0)) == KNOWN_VRAM_GB["RTX 4090"] == 24
    assert offer_vram_gb(Offer("vast", "1", "H200 SXM", 1, 1.0)) == 141          # model without form factor
    assert offer_vram_gb(Offer("vast", "1", "A100 SXM", 1, 1.0)) is None         # 40 or 80: no guess


# Each user spelling against the mock's offers of each provider: the canonical GPU
# names it matches there.
MOCK_MATCHES = {
    "rtx4090": {"lambda": set(), "vast": {"RTX 4090"}, "runpod": {"RTX 4090"}},
    "4090": {"lambda": set(), "vast": {"RTX 4090"}, "runpod": {"RTX 4090"}},
    "RTX-4090": {"lambda": set(), "vast": {"RTX 4090"}, "runpod": {"RTX 4090"}},
    "rtx 4090": {"lambda": set(), "vast": {"RTX 4090"}, "runpod": {"RTX 4090"}},
    "h100 sxm": {"lambda": {"H100 SXM"}, "vast": {"H100 SXM"}, "runpod": {"H100 SXM"}},
    "H100-SXM5-80GB": {"lambda": {"H100 SXM"}, "vast": {"H100 SXM"}, "runpod": {"H100 SXM"}},
    "h100": {p: {"H100 SXM", "H100 PCIe"} for p in ("lambda", "vast", "runpod")},
    "a100": {p: {"A100 SXM", "A100 PCIe"} for p in ("lambda", "vast", "runpod")},
    # Vast.ai gives memory per GPU as gpu_ram; where an offer carries none, its A100 SXM
    # (sold as 40 or 80 GB) is not claimed to be 80 GB.
    "a100 80gb": {"lambda": {"A100 SXM"}, "vast": {"A100 SXM"}, "runpod": {"A100 SXM"}},
    "l40s": {"lambda": set(), "vast": {"L40S"}, "runpod": {"L40S"}},
}


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    from tests.helpers import mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch)


@pytest.mark.parametrize("provider", ["lambda", "vast", "runpod"])
def test_user_spellings_match_the_mocks_offers(cloud, provider):
    from gpubench.offers import matching_offers
    from gpubench.providers import registry

    offers = registry.get(provider).offers(gpus=1)
    for typed, expected in MOCK_MATCHES.items():
        found = {o.gpu_name for o in matching_offers(offers, gpu_type=typed, only_available=False)}
        if typed == "a100 80gb" and provider == "vast" and not any("gpu_ram" in o.extra for o in offers):
            assert found <= expected[provider], typed
        else:
            assert found == expected[provider], typed
    assert all(offer_vram_gb(o) == 80 for o in matching_offers(offers, gpu_type="a100 80gb"))
