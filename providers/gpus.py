"""One spelling per GPU across providers.

Lambda says "gpu_1x_h100_pcie" or "H100 (80 GB PCIe)", Vast.ai "H100 PCIE", RunPod
"NVIDIA H100 PCIe" (id) or "H100 PCIe" (name): all become "H100 PCIe". The canonical
form is MODEL plus, where the provider says it, the form factor (SXM, PCIe, NVL).
Memory size is dropped: no provider spells it consistently enough to compare on.
"""

from __future__ import annotations

import re

_VENDOR_WORDS = {"nvidia", "geforce", "tesla", "amd", "instinct", "gpu", "quadro"}
_FORM_FACTORS = {"sxm": "SXM", "pcie": "PCIe", "nvl": "NVL"}
# RTX A-series workstation cards: Lambda writes "a6000", others "RTX A6000".
_RTX_A_SERIES = re.compile(r"^a[2-6]000$")


def normalize_gpu_name(raw: str) -> str:
    """Canonical GPU name, e.g. normalize_gpu_name("gpu_8x_h100_sxm5") == "H100 SXM"."""
    text = (raw or "").strip().lower()
    if not text:
        return ""
    text = re.sub(r"^gpu_\d+x_", "", text)              # Lambda instance-type prefix
    text = re.sub(r"[_\-(),/]+", " ", text)
    tokens = [t for t in text.split() if t not in _VENDOR_WORDS]
    form = ""
    model: list[str] = []
    hbm = False
    for tok in tokens:
        base = re.sub(r"\d+$", "", tok)                  # sxm5 -> sxm, pcie4 -> pcie
        if base in _FORM_FACTORS and not form:
            form = _FORM_FACTORS[base]
        elif re.fullmatch(r"\d+(gb|g)?", tok) and model and model[-1] != "rtx":
            continue                                     # memory size: "80", "80gb"
        elif tok in {"gb", "gib"}:
            continue
        elif tok.startswith("hbm"):
            hbm = True
        else:
            model.append(tok)
    if not model:
        return raw.strip()
    if _RTX_A_SERIES.match(model[0]):
        model.insert(0, "rtx")
    # RunPod's SXM H100 is "NVIDIA H100 80GB HBM3": HBM without a form factor means SXM.
    if hbm and not form and model[0] in {"h100", "h200", "b200"}:
        form = "SXM"
    words = []
    for tok in model:
        if tok in {"rtx", "gtx", "rtxa"}:
            words.append(tok.upper())
        elif tok == "ada":
            words.append("Ada")
        else:
            words.append(tok.upper())
    return " ".join(words + ([form] if form else []))


def gpu_matches(wanted: str | None, actual: str) -> bool:
    """Whether an offer's GPU satisfies --gpu-type: every word of the wanted name is in
    the offer's ("H100" matches "H100 SXM" and "H100 PCIe", "4090" matches "RTX 4090",
    "H100 SXM" does not match "H100 PCIe", "A100" does not match "A10")."""
    if not wanted:
        return True
    want = normalize_gpu_name(wanted).lower().split()
    have = normalize_gpu_name(actual).lower().split()
    return bool(want) and all(w in have for w in want)
