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


# -- one card from what users type (resolve_gpu) ---------------------------------

from gpubench.errors import UsageError  # noqa: E402
from gpubench.providers.gpus import FAMILY_DEFAULT, SAME_CARD, resolve_gpu  # noqa: E402

# The cards of the predict table (gpubench/predict/gpu_specs.py), as predict --gpu resolves among them.
CARDS = ["H200 SXM", "H100 SXM", "H100 PCIe", "H100 NVL", "GH200", "B200 SXM", "A100 SXM", "A100 PCIe",
         "L40S", "L40", "L4", "A10", "A40", "RTX A6000", "RTX 6000 Ada", "RTX 5090", "RTX 4090", "RTX 3090",
         "V100 SXM", "T4"]


@pytest.mark.parametrize("typed,card,note", [
    ("H100", "H100 SXM", "H100 taken as H100 SXM; H100 PCIe and H100 NVL are the others"),
    ("h100", "H100 SXM", "H100 taken as H100 SXM; H100 PCIe and H100 NVL are the others"),
    ("h-100", "H100 SXM", "H100 taken as H100 SXM; H100 PCIe and H100 NVL are the others"),
    ("A100", "A100 SXM", "A100 taken as A100 SXM; A100 PCIe is the other"),
    ("a100 80gb", "A100 SXM", "A100 80 GB taken as A100 SXM; A100 PCIe is the other"),
    ("V100", "V100 SXM", "V100 taken as V100 SXM"),
    ("H100 80GB", "H100 SXM", "H100 80 GB taken as H100 SXM; H100 PCIe is the other"),   # not the 94 GB NVL
    ("h100 94gb", "H100 NVL", "H100 94 GB taken as H100 NVL"),
    ("4090", "RTX 4090", ""), ("rtx4090", "RTX 4090", ""), ("RTX 4090", "RTX 4090", ""),
    ("rtx_4090", "RTX 4090", ""), ("Rtx-4090", "RTX 4090", ""), ("GeForce RTX 4090", "RTX 4090", ""),
    ("h100 sxm", "H100 SXM", ""), ("H100_SXM", "H100 SXM", ""), ("h100-sxm5-80gb", "H100 SXM", ""),
    ("H100 pcie", "H100 PCIe", ""), ("H200", "H200 SXM", ""), ("b200", "B200 SXM", ""), ("a10 pcie", "A10", ""),
    ("a6000", "RTX A6000", ""), ("l40", "L40", ""), ("L40S", "L40S", ""),
])
def test_what_people_type_is_one_card_with_a_note_where_a_family_was_narrowed(typed, card, note):
    choice = resolve_gpu(typed, CARDS)
    assert (choice.name, choice.note) == (card, note)


@pytest.mark.parametrize("typed,line", [
    ("RTX", "--gpu: 'RTX' could be RTX A6000, RTX 6000 Ada, RTX 5090, RTX 4090 or RTX 3090: name one"),
    ("sxm", "--gpu: 'sxm' could be H200 SXM, H100 SXM, B200 SXM, A100 SXM or V100 SXM: name one"),
    # the Quadro RTX 6000 (Turing) and the RTX A6000 are other cards: not taken as the Ada one
    ("RTX 6000", "--gpu: 'RTX 6000' is not clearly the RTX 6000 Ada: name it so if it is"),
])
def test_a_name_that_means_no_one_card_lists_the_candidates_in_one_line(typed, line):
    with pytest.raises(UsageError) as e:
        resolve_gpu(typed, CARDS)
    assert str(e.value) == line and e.value.exit_code == 2


@pytest.mark.parametrize("typed,line", [
    ("H900", "--gpu-type: 'H900' is not a GPU type gpubench knows; known: H200 SXM, H100 SXM, "),
    ("H100 40GB", "--gpu-type: 'H100 40GB': gpubench knows no H100 of 40 GB (H100 SXM: 80 GB, H100 PCIe: 80 GB, "
                  "H100 NVL: 94 GB)"),
    ("", "--gpu-type '': name a GPU"),
])
def test_an_unknown_name_is_one_line_naming_what_is_known(typed, line):
    with pytest.raises(UsageError) as e:
        resolve_gpu(typed, CARDS, "--gpu-type")
    assert str(e.value).startswith(line) and "\n" not in str(e.value)


def test_every_family_default_and_same_card_is_a_card_of_the_predict_table():
    from gpubench.predict.gpu_specs import known_gpus

    assert set(FAMILY_DEFAULT.values()) | set(SAME_CARD.values()) <= set(known_gpus()) == set(CARDS)
    for family, card in FAMILY_DEFAULT.items():
        assert resolve_gpu(family, known_gpus()).name == card


def test_a_filter_matches_the_card_by_any_of_its_names():
    assert gpu_matches("H200 SXM", "H200") and gpu_matches("H200", "NVIDIA H200")   # Vast.ai, RunPod
    assert gpu_matches("A10 PCIe", "A10") and gpu_matches("a10", "A10 (24 GB PCIe)")
    assert gpu_matches("H200", "H200 NVL")                  # a family filter keeps its whole family
    assert not gpu_matches("H200 SXM", "H200 NVL") and not gpu_matches("H100 SXM", "H200")
