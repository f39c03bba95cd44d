"""What does fit, where the model fits none of the configurations asked about: the
largest batch a GPU the memory model allows on the cards that allow most, and, where
the workload has it, `--activation-checkpointing` at the batch asked on the smallest
cards it fits (with `--precision bf16` where only that step was counted). One line,
for advise and for a bench across candidates to end their refusal with."""

from __future__ import annotations

from gpubench.format import spoken
from gpubench.predict import ops
from gpubench.predict.advise import NO_FIT, Prediction, Subject
from gpubench.predict.memory import GB, need, usable_bytes
from gpubench.providers.gpus import offer_vram_gb

CHECKPOINTING = ("--activation-checkpointing",)


def what_fits(subject: Subject, predictions: list[Prediction]) -> str | None:
    """'batch 6 a GPU fits 8x 80 GB (A100 SXM, H100 SXM): `--batch-size 6`; or
    `--activation-checkpointing --precision bf16` keeps batch 8 on 8x L40S (48 GB) and
    larger'; None where no configuration was left out for its memory, or the model
    knows nothing that would fit."""
    too_big = [p for p in predictions if p.basis == NO_FIT]
    if not too_big:
        return None
    said = [s for s in (_smaller_batch(subject, too_big), _checkpointed(subject, too_big)) if s]
    return "; or ".join(said) or None


def _card(p: Prediction) -> tuple[str, float | None, int]:
    return p.config.offer.gpu_name, offer_vram_gb(p.config.offer), p.config.gpus


def largest_batch(subject: Subject, gpu: str, card_gb: float | None, gpus: int) -> tuple[int, int] | None:
    """(the largest batch a GPU that fits the card, the batch asked); None where nothing
    is known of the memory."""
    if not card_gb:
        return None
    step = ops.modelled(subject.workload, subject.args, gpu, card_gb, gpus, counted=subject.counted)
    if step is not None:
        return ops.largest_batch(step.config, usable_bytes(card_gb), gpus), step.config.batch
    if subject.shape is None:
        return None
    most = need(subject.shape, subject.strategy, gpus, subject.activations).max_batch(card_gb * GB)
    return (most, max(subject.memory_batch, 1)) if most is not None else None


def _smaller_batch(subject: Subject, too_big: list[Prediction]) -> str | None:
    found = []
    for p in too_big:
        gpu, card_gb, gpus = _card(p)
        most = largest_batch(subject, gpu, card_gb, gpus)
        if most is not None and most[0] >= 1:
            found.append((most[0], card_gb, gpus, gpu))
    if not found:
        return None
    best = max(b for b, *_ in found)
    cards = sorted({(gpus, card_gb) for b, card_gb, gpus, _ in found if b == best})
    names = sorted({gpu for b, _, _, gpu in found if b == best})
    where = spoken([f"{gpus}x {card_gb:g} GB" for gpus, card_gb in cards], "or")
    # a user's script names its batch its own way
    flag = "" if subject.counted is not None else f": `--batch-size {best}`"
    return f"batch {best} a GPU fits {where} ({', '.join(names)}){flag}"


def _checkpointed(subject: Subject, too_big: list[Prediction]) -> str | None:
    """The smallest cards that hold the model at the batch asked with each block's
    activations recomputed, where the workload can do that and a step of it was counted."""
    for extra in (CHECKPOINTING, CHECKPOINTING + ("--precision", "bf16")):
        args = tuple(subject.args) + extra
        fits = []
        for p in too_big:
            gpu, card_gb, gpus = _card(p)
            step = ops.modelled(subject.workload, args, gpu, card_gb, gpus) if card_gb else None
            if step is not None and step.estimate.memory_bytes <= usable_bytes(card_gb):
                fits.append((card_gb, gpus, gpu, step.config.batch))
        if fits:
            card_gb, gpus, gpu, batch = min(fits)
            return f"`{' '.join(extra)}` keeps batch {batch} on {gpus}x {gpu} ({card_gb:g} GB) and larger"
    return None
