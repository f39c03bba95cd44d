"""Naming a machine configuration on the command line: `--compare A B`, `--baseline X`.

A selector is a provider (`lambda`), a GPU (`H100`, matched case-insensitively
against the GPU names in the records, a unique part of the name is enough), or
both as `provider:gpu`. It is resolved against the records at hand, so a typo
is caught with the names that do exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from gpubench.errors import UsageError


@dataclass(frozen=True)
class Selector:
    text: str
    provider: str | None = None  # exact provider name as in the records
    gpu_names: tuple[str, ...] = ()  # the GPU names in the records it matches; () = any

    @property
    def kind(self) -> str:
        if self.provider and self.gpu_names:
            return "config"
        return "provider" if self.provider else "gpu"

    def mask(self, frame: pd.DataFrame) -> pd.Series:
        mask = pd.Series(True, index=frame.index)
        if self.provider:
            mask &= frame["provider"] == self.provider
        if self.gpu_names:
            mask &= frame["gpu_name"].isin(self.gpu_names)
        return mask


def short_gpu(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100 80GB HBM3': the vendor is in every name."""
    return re.sub(r"^(NVIDIA|AMD)\s+(GeForce\s+)?", "", name) or name


def _match_gpu(word: str, gpus: list[str]) -> tuple[str, ...]:
    low = word.lower()
    exact = [g for g in gpus if g.lower() == low]
    if exact:
        return tuple(exact)
    return tuple(g for g in gpus if low in g.lower())


def parse_selector(text: str, frame: pd.DataFrame, flag: str) -> Selector:
    providers = sorted(p for p in frame["provider"].unique() if p)
    gpus = sorted(g for g in frame["gpu_name"].unique() if g)
    known = (f"providers in these records: {', '.join(providers) or 'none'}; "
             f"GPUs: {', '.join(gpus) or 'none'}")
    word = text.strip()
    if ":" in word:
        provider, _, gpu = word.partition(":")
        if provider not in providers:
            raise UsageError(f"{flag}: no provider '{provider}' in the records ({known})")
        matched = _match_gpu(gpu, gpus)
        if not gpu or not matched:
            raise UsageError(f"{flag}: no GPU matching '{gpu}' in the records ({known})")
        return Selector(word, provider, matched)
    if word in providers:
        return Selector(word, provider=word)
    matched = _match_gpu(word, gpus) if word else ()
    if not matched:
        raise UsageError(f"{flag}: '{text}' is neither a provider nor a GPU in the records ({known})")
    return Selector(word, gpu_names=matched)
