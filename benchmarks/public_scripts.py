"""Public training scripts, unchanged, predicted at the GPU counts asked: what
`gpubench predict SCRIPT --gpu G --gpus N` answers of each, or the one line it refuses
with, and how long each call took (its calibration on this machine's CPU included: each
script is counted afresh, with a state folder of its own).

    python benchmarks/public_scripts.py --examples DIR --nanogpt DIR --airbench DIR --lightning DIR \\
        [--site DIR] [--gpu H100] [--gpus 1,4] [--only mnist,tp] [--out FILE]

The checkouts are pytorch/examples, karpathy/nanoGPT, KellerJordan/cifar10-airbench and
Lightning-AI/pytorch-lightning. Each script runs in a scratch copy of its folder with the
data it reads made up where it would download it (no network): MNIST's IDX files, a
wikitext-2 of random words, a Cora graph of random features, CIFAR-10 as airbench keeps it,
nanoGPT's OpenWebText token ids. --site is put on PYTHONPATH (a torchvision for a CPU
torch, where the environment has none). It prints the table benchmarks/README.md keeps
(markdown) and, with --out, writes every row as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_scripts  # noqa: E402  (this folder's: synthetic MNIST)
import nanogpt_scratch  # noqa: E402


@dataclass(frozen=True)
class PublicScript:
    """One script: where it is in its checkout, what it does, its arguments, its data."""

    key: str
    checkout: str          # examples, nanogpt, airbench or lightning
    path: str              # the script, relative to its checkout
    does: str
    args: tuple[str, ...] = ()
    data: str = ""         # the data made for it (see lay_out)


SCRIPTS = (
    PublicScript("mnist", "examples", "mnist/main.py", "CNN on MNIST, DataLoader, Adadelta",
                 ("--epochs", "1"), "mnist"),
    PublicScript("vae", "examples", "vae/main.py", "variational autoencoder on MNIST", ("--epochs", "1"), "mnist"),
    PublicScript("dcgan", "examples", "dcgan/main.py", "GAN: D on real, fake, fake again; FakeData",
                 ("--dataset", "fake", "--accel", "--niter", "1", "--workers", "0")),
    PublicScript("word-lm", "examples", "word_language_model/main.py",
                 "time-major LSTM LM, hand-written SGD update (no torch.optim)", ("--accel", "--epochs", "1"),
                 "wikitext"),
    PublicScript("gat", "examples", "gat/main.py", "graph attention on Cora, full batch, masked scores",
                 ("--epochs", "3"), "cora"),
    PublicScript("imagenet", "examples", "imagenet/main.py",
                 "ResNet-18 on FakeData, nn.DataParallel in one process", ("--dummy", "-a", "resnet18")),
    PublicScript("ddp-torchrun", "examples", "distributed/ddp-tutorial-series/multigpu_torchrun.py",
                 "DDP under torchrun, DistributedSampler", ("1", "1")),
    PublicScript("fsdp2", "examples", "distributed/FSDP2/example.py",
                 "FSDP2 fully_shard per block, bf16 MixedPrecisionPolicy", ("--mixed-precision",)),
    PublicScript("tp", "examples", "distributed/tensor_parallelism/tensor_parallel_example.py",
                 "tensor parallel MLP on a 1-D device mesh"),
    PublicScript("fsdp-tp", "examples", "distributed/tensor_parallelism/fsdp_tp_example.py",
                 "2-D mesh: FSDP over dp, tensor parallel Llama over tp=2"),
    PublicScript("nanogpt", "nanogpt", "train.py", "GPT-2 124M, bf16, 8 micro-batches divided by the world",
                 (*nanogpt_scratch.TRAIN_ARGS[:1], "--gradient_accumulation_steps=8",
                  *nanogpt_scratch.TRAIN_ARGS[2:]), "openwebtext"),
    PublicScript("airbench94", "airbench", "airbench94_muon.py",
                 "CIFAR-10 ResNet, Muon, torch.load onto cuda, random crops by boolean masks", (), "cifar10"),
    PublicScript("lightning-ae", "lightning", "examples/pytorch/basics/autoencoder.py",
                 "LightningCLI autoencoder on MNIST", ("--trainer.max_epochs=1",), "lightning-mnist"),
    PublicScript("fabric-tp", "lightning", "examples/fabric/tensor_parallel/train.py",
                 "Fabric ModelParallelStrategy, Llama-style, needs 4 GPUs"),
)


def lay_out(script: PublicScript, checkouts: dict[str, Path], scratch: Path) -> Path:
    """The script's folder copied into `scratch` with its data made; the script's path."""
    source = checkouts[script.checkout] / script.path
    if script.checkout == "nanogpt":
        return nanogpt_scratch.scratch(checkouts["nanogpt"], scratch / script.key)
    folder = scratch / script.key / Path(script.path).parent
    shutil.copytree(source.parent, folder, ignore=shutil.ignore_patterns("data", "*.pt", "logs"))
    if script.data == "mnist":
        gpu_scripts.synthetic_mnist(folder.parent / "data" / "MNIST" / "raw")     # ../data
    elif script.data == "lightning-mnist":
        gpu_scripts.synthetic_mnist(folder / "data" / "MNIST" / "raw")            # ./data, Lightning's own
        gpu_scripts.synthetic_mnist(folder.parent.parent / "Datasets" / "MNIST" / "raw")
    elif script.data == "wikitext":
        random_text(folder / "data" / "wikitext-2")
    elif script.data == "cora":
        random_graph(folder / "cora")
    elif script.data == "cifar10":
        random_cifar(folder / "cifar10")
    return folder / Path(script.path).name


def random_text(folder: Path, words: int = 2000, lines: int = 3000) -> None:
    """train, valid and test files of random words (a vocabulary of `words`)."""
    import random

    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(words)]
    folder.mkdir(parents=True, exist_ok=True)
    for name, count in (("train", lines), ("valid", lines // 10), ("test", lines // 10)):
        (folder / f"{name}.txt").write_text("\n".join(" ".join(rng.choices(vocab, k=20)) for _ in range(count)) + "\n")


def random_graph(folder: Path, nodes: int = 2708, features: int = 1433, edges: int = 5429) -> None:
    """cora.content (id, binary features, class) and cora.cites (pairs of ids), Cora's sizes."""
    import numpy as np

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    ids = rng.choice(10**6, nodes, replace=False)
    x = (rng.random((nodes, features)) < 0.0127).astype(int)
    x[:, 0] = 1   # no node without a feature
    classes = rng.integers(0, 7, nodes)
    (folder / "cora.content").write_text("".join(
        f"{i}\t" + "\t".join(map(str, row)) + f"\tclass{c}\n" for i, row, c in zip(ids, x, classes)))
    pairs = rng.integers(0, nodes, (edges, 2))
    (folder / "cora.cites").write_text("".join(f"{ids[a]}\t{ids[b]}\n" for a, b in pairs))


def random_cifar(folder: Path) -> None:
    """airbench's own cache of CIFAR-10 (train.pt, test.pt), which it reads before downloading."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    for name, count in (("train", 50_000), ("test", 10_000)):
        torch.save({"images": torch.randint(0, 256, (count, 32, 32, 3), dtype=torch.uint8),
                    "labels": torch.randint(0, 10, (count,)), "classes": classes}, folder / f"{name}.pt")


def predict(script: PublicScript, path: Path, gpu: str, gpus: int, env: dict, timeout: float) -> dict:
    """One call: its command as typed in the script's folder, the answer or the refusal, its time."""
    command = ["gpubench", "predict", f"./{path.name}", "--gpu", gpu, "--gpus", str(gpus), "--format", "json",
               *(["--", *script.args] if script.args else [])]
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", *command], cwd=path.parent, capture_output=True, text=True,
                              env=env, timeout=timeout)
        out, err, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired:
        out, err, code = "", f"no answer within {timeout:.0f} s", None
    took = round(time.monotonic() - started, 1)
    row = {"key": script.key, "gpus": gpus, "command": shlex.join(command), "seconds": took, "exit": code}
    try:
        answer = json.loads(out)[0]
    except (ValueError, IndexError, KeyError):
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        return {**row, "refused": lines[-1] if lines else "no output"}
    return {**row, **{k: answer.get(k) for k in ("unit", "throughput", "step_seconds", "speedup", "bound_by",
                                                  "memory_bytes", "sources")}}


def said(row: dict) -> str:
    """The table's cell: the answer in brief, or the refusal (the scratch folder left out of
    the script's path)."""
    if "refused" in row:
        words = re.sub(r"\S*gpubench-public-[^/\s]+/(?:\S*/)?([^/\s]+\.py)", r"\1", row["refused"])
        return "refused: " + words.removeprefix("error: ").replace("|", "\\|")
    speedup = f", {row['speedup']:.2f}x" if row.get("speedup") and row["gpus"] > 1 else ""
    return (f"{row['throughput']:,.0f} {row['unit']}, {row['step_seconds'] * 1e3:,.1f} ms a step{speedup}, "
            f"bound by {row['bound_by']}")


def table(rows: list[dict], scripts: list[PublicScript], counts: list[int]) -> str:
    head = "| script | what it does | " + " | ".join(f"{n} GPU{'s' if n > 1 else ''}" for n in counts) + \
           " | s a call |"
    lines = [head, "|" + "---|" * (3 + len(counts))]
    for s in scripts:
        mine = {r["gpus"]: r for r in rows if r["key"] == s.key}
        if not mine:
            continue
        cells = [said(mine[n]) if n in mine else "-" for n in counts]
        times = " / ".join(f"{mine[n]['seconds']:.0f}" for n in counts if n in mine)
        lines.append(f"| {s.key} | {s.does} | " + " | ".join(cells) + f" | {times} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("examples", "nanogpt", "airbench", "lightning"):
        p.add_argument(f"--{name}", type=Path, required=True)
    p.add_argument("--site", type=Path, help="put on PYTHONPATH (a torchvision for this torch)")
    p.add_argument("--gpu", default="H100")
    p.add_argument("--gpus", default="1,4")
    p.add_argument("--only", default="")
    p.add_argument("--timeout", type=float, default=420.0)
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    counts = [int(n) for n in a.gpus.split(",")]
    chosen = [s for s in SCRIPTS if not a.only or s.key in a.only.split(",")]
    checkouts = {"examples": a.examples, "nanogpt": a.nanogpt, "airbench": a.airbench, "lightning": a.lightning}
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpubench-public-") as tmp:
        scratch = Path(tmp)
        env = {**gpu_scripts.gpubench_env(scratch), "PYTHONWARNINGS": "ignore"}
        if a.site:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(a.site), env.get("PYTHONPATH")]))
        for script in chosen:
            path = lay_out(script, checkouts, scratch)
            for n in counts:
                row = predict(script, path, a.gpu, n, env, a.timeout)
                rows.append(row)
                print(f"{script.key:<13} {n} GPU(s) {row['seconds']:6.1f} s  {said(row)[:160]}", flush=True)
    print()
    print(table(rows, chosen, counts))
    if a.out:
        a.out.write_text(json.dumps({"gpu": a.gpu, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
