"""One spelling per GPU across providers, and the same reading of what users type.

Lambda says "gpu_1x_h100_pcie" or "H100 (80 GB PCIe)", Vast.ai "H100 PCIE", RunPod
"NVIDIA H100 PCIe" (id) or "H100 PCIe" (name): all become "H100 PCIe". The canonical
form is MODEL plus, where the provider says it, the form factor (SXM, PCIe, NVL).
Memory size is dropped from the name: no provider spells it consistently enough to
compare on; an offer's memory per GPU comes from the provider's own figure
(`offer_vram_gb`), else from KNOWN_VRAM_GB.

Users type "rtx4090", "4090", "RTX-4090", "h100 sxm", "H100-SXM5-80GB" or "a100 80gb":
`wanted_gpu` reads these with the same tokenizer, keeping the memory size as a
separate requirement, and `gpu_matches` compares the two sides: a name without a form
factor ("H100") matches the whole family (H100 SXM, PCIe and NVL offers alike).
`resolve_gpu` is the one place a typed name becomes one card, where one card is needed
(`predict --gpu`): the family's card the clouds rent most (FAMILY_DEFAULT), with a note
saying so, or one line listing the candidates where no card is clearly meant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from gpubench.errors import UsageError
from gpubench.format import spoken

_VENDOR_WORDS = {"nvidia", "geforce", "tesla", "amd", "instinct", "gpu", "quadro", "generation"}
_FORM_FACTORS = {"sxm": "SXM", "pcie": "PCIe", "nvl": "NVL"}
# RTX A-series workstation cards: Lambda writes "a6000", others "RTX A6000".
_RTX_A_SERIES = re.compile(r"^a[2-6]000$")
# Words run together as users type them: "rtx4090" -> "rtx 4090", "3080ti" -> "3080 ti",
# "h100sxm5" -> "h100 sxm5", "a100-80gb" is already two words.
_JOINED_PREFIX = re.compile(r"^(rtx|gtx)(a?\d.*)$")
_JOINED_SUFFIX = re.compile(r"^(.*\d)(ti|sxm\d*|pcie\d*|nvl|ada)$")
_MEMORY = re.compile(r"^(\d+)(gb|g|gib)?$")

# Memory per GPU in GB where the model name alone decides it. Models sold with more
# than one size (A100 40/80 GB, V100 16/32 GB) are left out: an unknown beats a guess.
KNOWN_VRAM_GB: dict[str, int] = {
    "H100 SXM": 80, "H100 PCIe": 80, "H100 NVL": 94, "H200": 141, "H200 SXM": 141,
    "H200 NVL": 141, "GH200": 96, "B200": 180, "B200 SXM": 180, "A10": 24, "A10 PCIe": 24,
    "A10G": 24, "A40": 48, "L40S": 48, "L40": 48, "L4": 24, "T4": 16, "A16": 16,
    "RTX 5090": 32, "RTX 4090": 24, "RTX 4080": 16, "RTX 3090": 24, "RTX 3090 TI": 24,
    "RTX A6000": 48, "RTX 6000 Ada": 48, "RTX A5000": 24, "RTX A4000": 16, "RTX 4000 Ada": 20,
    "MI300X": 192,
}


# Spellings that mean one card although they differ from its name: the part comes in one
# form only (a bare H200 is the SXM part; the PCIe one is always called H200 NVL).
SAME_CARD = {"H200": "H200 SXM", "B200": "B200 SXM", "A10 PCIe": "A10"}

# The card a family's bare name means where one card is needed (`predict --gpu H100`): the
# one the offers rent most. Nothing gpubench holds counts rentals (no provider publishes
# how often each card is rented), so this is a table kept by hand, SXM before PCIe: the
# clouds' 8-GPU H100 and A100 80 GB machines are SXM boards (NVLink, what DDP over several
# GPUs is rented for), and the mock's catalog, which mirrors the providers' lists, offers
# the SXM parts most widely (gpubench/mock/catalog.py: H100 SXM at 1 to 8 GPUs on all
# three providers, Lambda's H100 PCIe at 1 only; A100 SXM is the 80 GB part). A bare H200
# or B200 is the SXM part anyway (SAME_CARD); the V100s gpubench knows are SXM2 (DGX-1,
# where NVIDIA's published V100 figures were measured).
FAMILY_DEFAULT = {"H100": "H100 SXM", "H200": "H200 SXM", "B200": "B200 SXM", "A100": "A100 SXM",
                  "V100": "V100 SXM"}
# Words a card's name may add to what was typed and still be the same chip: the brand
# ("4090" is the RTX 4090) and the form factor ("H100" is an H100 SXM, PCIe or NVL). Any
# other word is another card ("RTX 6000" is not clearly the RTX 6000 Ada).
_SAME_CHIP = {"rtx", "gtx", *(f.lower() for f in _FORM_FACTORS.values())}


def _tokens(raw: str) -> list[str]:
    """Lower-case words of a GPU name, with run-together words split."""
    text = (raw or "").strip().lower()
    text = re.sub(r"^gpu_\d+x_", "", text)              # Lambda instance-type prefix
    text = re.sub(r"[_\-(),/]+", " ", text)
    text = re.sub(r"\b([a-z]) (\d)", r"\1\2", text)    # "h-100", "a 100": one word, as "h100"
    out: list[str] = []
    for tok in text.split():
        m = _JOINED_PREFIX.match(tok)
        if m:
            out.append(m.group(1))
            tok = m.group(2)
        m = _JOINED_SUFFIX.match(tok)
        if m and m.group(1) not in {"", "rtx", "gtx"}:
            out += [m.group(1), m.group(2)]
        else:
            out.append(tok)
    return [t for t in out if t not in _VENDOR_WORDS]


def _read(raw: str) -> tuple[str, int | None]:
    """(canonical name, memory in GB where the text states one)."""
    tokens = _tokens(raw)
    form = ""
    model: list[str] = []
    memory: int | None = None
    hbm = False
    for tok in tokens:
        base = re.sub(r"\d+$", "", tok)                  # sxm5 -> sxm, pcie4 -> pcie
        size = _MEMORY.match(tok)
        if base in _FORM_FACTORS and not form:
            form = _FORM_FACTORS[base]
        elif size and model and model[-1] not in {"rtx", "gtx"}:
            memory = int(size.group(1))                  # "80", "80gb" after the model
        elif tok in {"gb", "gib"}:
            continue
        elif tok.startswith("hbm"):
            hbm = True
        else:
            model.append(tok)
    if not model:
        return raw.strip(), memory
    if _RTX_A_SERIES.match(model[0]):
        model.insert(0, "rtx")
    # RunPod's SXM H100 is "NVIDIA H100 80GB HBM3": HBM without a form factor means SXM.
    if hbm and not form and model[0] in {"h100", "h200", "b200"}:
        form = "SXM"
    words = ["Ada" if tok == "ada" else tok.upper() for tok in model]
    return " ".join(words + ([form] if form else [])), memory


def normalize_gpu_name(raw: str) -> str:
    """Canonical GPU name, e.g. normalize_gpu_name("gpu_8x_h100_sxm5") == "H100 SXM"."""
    if not (raw or "").strip():
        return ""
    return _read(raw)[0]


@dataclass(frozen=True)
class WantedGpu:
    """A GPU as a user asked for it: the canonical words, and a memory size if given."""
    name: str                  # canonical, e.g. "RTX 4090", "H100 SXM", "A100"
    memory_gb: int | None = None

    def __str__(self) -> str:
        return f"{self.name} {self.memory_gb} GB" if self.memory_gb else self.name


def wanted_gpu(text: str) -> WantedGpu:
    """What a user typed (--gpu, --gpu-type), read the way provider names are:
    "rtx4090", "RTX-4090" -> RTX 4090; "H100-SXM5-80GB" -> H100 SXM, 80 GB."""
    name, memory = _read(text)
    return WantedGpu(name, memory)


def _spellings(canonical: str) -> list[set[str]]:
    """The words of a canonical name, and of the card SAME_CARD says it is."""
    return [set(n.lower().split()) for n in dict.fromkeys((canonical, SAME_CARD.get(canonical, canonical)))]


def _extra_words(wanted: str, card: str) -> set[str] | None:
    """The words `card` adds to `wanted` (both canonical) where every word of `wanted` is
    in `card`'s name ("H100" in "H100 SXM": {"sxm"}), else None; SAME_CARD's spellings
    count on both sides ("H200 SXM" is in "H200")."""
    found = [have - want for want in _spellings(wanted) for have in _spellings(card) if want and want <= have]
    return min(found, key=len) if found else None


def gpu_matches(wanted: str | None, actual: str, vram_gb: float | None = None) -> bool:
    """Whether an offer's GPU satisfies --gpu-type: every word of the wanted name is in
    the offer's ("H100" matches "H100 SXM" and "H100 PCIe", "4090" matches "RTX 4090",
    "H100 SXM" does not match "H100 PCIe", "A100" does not match "A10"; "H200 SXM"
    matches "H200", SAME_CARD). A memory size in the wanted name ("a100 80gb") must
    equal the offer's `vram_gb`; an offer whose memory is unknown does not match it."""
    if not wanted:
        return True
    want = wanted_gpu(wanted)
    if _extra_words(want.name, normalize_gpu_name(actual)) is None:
        return False
    return want.memory_gb is None or (vram_gb is not None and round(vram_gb) == want.memory_gb)


@dataclass(frozen=True)
class GpuChoice:
    """The one card a typed name was taken as."""
    name: str                  # canonical, one of the cards resolve_gpu was given
    memory_gb: int | None      # a size the text stated ("a100 40gb"), else None
    note: str = ""             # "H100 taken as H100 SXM; H100 PCIe and H100 NVL are the others"


def resolve_gpu(text: str, cards: Iterable[str], flag: str = "--gpu") -> GpuChoice:
    """The card among `cards` (canonical names) that `text`, as a user types it, means:
    the card it names ("rtx4090", "RTX 4090", "h100 sxm", "H200": SAME_CARD); else the
    one card of its family ("4090" -> RTX 4090, "V100" -> V100 SXM); else the family's
    FAMILY_DEFAULT ("H100" -> H100 SXM), with a note naming the others. A memory size in
    the text leaves out the cards known to have another ("H100 80GB": not the 94 GB
    NVL). A text that clearly means no card, or several without a default, is a
    UsageError of one line listing the candidates; one that names none lists the cards."""
    cards = list(dict.fromkeys(cards))
    want = wanted_gpu(text or "")
    if not want.name:
        raise UsageError(f"{flag} '{text}': name a GPU, e.g. H100, A100, 'RTX 4090'")
    name = SAME_CARD.get(want.name, want.name)
    if name in cards:
        return GpuChoice(name, want.memory_gb)
    extra = {card: _extra_words(want.name, card) for card in cards}
    named = [c for c in cards if extra[c] is not None]
    family = [c for c in named if want.memory_gb is None or known_vram_gb(c) in (None, want.memory_gb)]
    if named and not family:
        raise UsageError(f"{flag}: '{text}': gpubench knows no {want.name} of {want.memory_gb} GB "
                         f"({', '.join(f'{c}: {known_vram_gb(c)} GB' for c in named)})")
    clear = [c for c in family if extra[c] <= _SAME_CHIP]
    typed = str(want)
    if len(clear) == 1:
        card = clear[0]
        added = extra[card] - {"rtx", "gtx"}      # the brand alone is no news; a form factor is
        return GpuChoice(card, want.memory_gb, f"{typed} taken as {card}" if added else "")
    if len(clear) > 1 and FAMILY_DEFAULT.get(want.name) in clear:
        card = FAMILY_DEFAULT[want.name]
        others = [c for c in clear if c != card]
        rest = f"{others[0]} is the other" if len(others) == 1 else f"{spoken(others, 'and')} are the others"
        return GpuChoice(card, want.memory_gb, f"{typed} taken as {card}; {rest}")
    candidates = clear or family
    if len(candidates) > 1:
        raise UsageError(f"{flag}: '{text}' could be {spoken(candidates, 'or')}: name one")
    if candidates:
        raise UsageError(f"{flag}: '{text}' is not clearly the {candidates[0]}: name it so if it is")
    raise UsageError(f"{flag}: '{text}' is not a GPU type gpubench knows; known: {', '.join(cards)}")


def known_vram_gb(gpu_name: str) -> int | None:
    """Memory per GPU from the model's name alone (KNOWN_VRAM_GB), or None."""
    canon = normalize_gpu_name(gpu_name)
    if canon in KNOWN_VRAM_GB:
        return KNOWN_VRAM_GB[canon]
    model = canon.rsplit(" ", 1)[0] if canon.endswith(tuple(_FORM_FACTORS.values())) else canon
    return KNOWN_VRAM_GB.get(model)


def offer_vram_gb(offer) -> int | None:
    """Memory per GPU of an offer in GB: the provider's own figure where it gives one
    (extra "vram_gb" from Lambda's description and RunPod's catalog, Vast.ai's
    "gpu_ram" in MB), else the table of known GPUs, else None."""
    extra = getattr(offer, "extra", None) or {}
    for key, per_gb in (("vram_gb", 1.0), ("memory_gb", 1.0), ("gpu_ram", 1024.0)):
        value = extra.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            # Vast.ai writes MB (24564); accept GB too, which no GPU reaches 1024 of.
            gb = value / per_gb if per_gb > 1 and value >= 1024 else value
            return int(round(gb))
    return known_vram_gb(offer.gpu_name)
