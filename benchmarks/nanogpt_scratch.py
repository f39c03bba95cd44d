"""nanoGPT's train.py where it can run without a network: its train.py, model.py and
configurator.py copied beside random GPT-2 token ids where it reads OpenWebText
(data/openwebtext/train.bin, val.bin). Shared by gpu_speed.py, gpu_scripts.py and
predict_accuracy.py's part S."""

from __future__ import annotations

import shutil
from pathlib import Path

FILES = ("train.py", "model.py", "configurator.py")
# train.py as the reference H200 ran it by hand: eager, one micro-batch a step (12 x 1024
# tokens, its default batch), 60 iterations, no checkpoint, no wandb
TRAIN_ARGS = ("--compile=False", "--gradient_accumulation_steps=1", "--max_iters=60", "--eval_interval=1000",
              "--eval_iters=2", "--log_interval=20", "--always_save_checkpoint=False", "--wandb_log=False")


def synthetic_tokens(folder: Path, train_tokens: int = 2_000_000) -> None:
    """Random token ids for train.py's get_batch (uint16 memmaps), a tenth as many for val."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, size in (("train", train_tokens), ("val", train_tokens // 10)):
        rng.integers(0, 50257, size=size, dtype=np.uint16).tofile(folder / f"{name}.bin")


def scratch(checkout: Path, where: Path, train_tokens: int = 2_000_000) -> Path:
    """A copy of the checkout's training files in `where`, with synthetic data; its train.py."""
    where.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copy(checkout / name, where / name)
    synthetic_tokens(where / "data" / "openwebtext", train_tokens)
    return where / "train.py"
