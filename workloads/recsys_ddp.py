"""A MovieLens recommendation model (user and movie embeddings, concatenated,
one linear layer to the rating) trained with DistributedDataParallel.

    python workloads/recsys_ddp.py --steps 200                                  # synthetic, ml-1m-shaped
    torchrun --standalone --nproc_per_node=4 workloads/recsys_ddp.py --data ~/data/ml-25m
    python workloads/recsys_ddp.py --data ratings.dat --epochs 1                 # ml-1m's file
    python workloads/recsys_ddp.py --shape ml-latest-small --batch-size 64 --steps 3  # tiny

--data synthetic (the default) draws users, movies and ratings at random in
the shape of a MovieLens release (--shape). --data PATH reads the real thing:
ratings.csv of ml-latest-small / ml-25m (userId,movieId,rating,timestamp) or
ratings.dat of ml-1m (UserID::MovieID::Rating::Timestamp), or a directory
holding one of them, from https://grouplens.org/datasets/movielens/.

The ratings live in tensors on the device; each rank walks its shard of a
per-epoch shuffle (DistributedSampler's split: every world_size-th index of
one permutation), so the loop is bound by the model and the all-reduce.
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import flags
import harness

WORKLOAD = "recsys-ddp"
DEFAULT_EMBEDDING = 32  # the seeds' model

# users, movies, ratings of each release (the GroupLens README of each)
MOVIELENS_SHAPES = {
    "ml-latest-small": (610, 9_742, 100_836),
    "ml-1m": (6_040, 3_706, 1_000_209),
    "ml-25m": (162_541, 59_047, 25_000_095),
}
RATINGS_FILES = ("ratings.csv", "ratings.dat")


class DataError(Exception):
    pass


@dataclass
class Ratings:
    users: torch.Tensor    # int64, 0..n_users-1
    movies: torch.Tensor   # int64, 0..n_movies-1
    ratings: torch.Tensor  # float32, 0.5..5 stars
    n_users: int
    n_movies: int
    source: str

    def __len__(self) -> int:
        return len(self.ratings)


def synthetic_ratings(shape: str, seed: int) -> Ratings:
    n_users, n_movies, n = MOVIELENS_SHAPES[shape]
    g = torch.Generator().manual_seed(seed)
    users = torch.randint(0, n_users, (n,), generator=g)
    movies = torch.randint(0, n_movies, (n,), generator=g)
    ratings = torch.randint(1, 11, (n,), generator=g).float() / 2  # 0.5 .. 5.0 stars
    return Ratings(users, movies, ratings, n_users, n_movies, f"synthetic {shape}")


def load_ratings(path: str) -> Ratings:
    """Read a MovieLens ratings file; ids become dense indices 0..n-1."""
    p = Path(path).expanduser()
    if p.is_dir():
        found = [p / name for name in RATINGS_FILES if (p / name).is_file()]
        if not found:
            raise DataError(f"{p} holds neither {' nor '.join(RATINGS_FILES)}")
        p = found[0]
    if not p.is_file():
        raise DataError(f"no such ratings file or directory: {p}")
    try:
        table = _parse(p)
    except (OSError, ValueError, IndexError) as e:
        raise DataError(f"{p} is not a MovieLens ratings file ({e})") from None
    if table.numel() == 0:
        raise DataError(f"{p} holds no ratings")
    user_ids, users = torch.unique(table[:, 0].long(), return_inverse=True)
    movie_ids, movies = torch.unique(table[:, 1].long(), return_inverse=True)
    return Ratings(users, movies, table[:, 2].float(), len(user_ids), len(movie_ids), str(p))


def _parse(p: Path) -> torch.Tensor:
    """(user, movie, rating) rows of ratings.csv (with its header) or ratings.dat."""
    with p.open(encoding="utf-8", errors="replace") as f:
        header = 1 if f.readline().startswith("userId") else 0
    try:
        import numpy as np  # its C parser reads ml-25m's 25M rows in seconds
    except ImportError:
        np = None
    if p.suffix == ".dat":  # ml-1m: "::" between fields; small enough to rewrite in memory
        source = io.StringIO(p.read_text(encoding="utf-8", errors="replace").replace("::", ","))
    else:
        source = p
    if np is None:
        text = source.getvalue() if isinstance(source, io.StringIO) else p.read_text(encoding="utf-8")
        rows = [line.split(",")[:3] for line in text.splitlines()[header:] if line.strip()]
        return torch.tensor([[float(v) for v in row] for row in rows], dtype=torch.float64)
    table = np.loadtxt(source, delimiter=",", skiprows=header, usecols=(0, 1, 2), ndmin=2,
                       dtype=np.float64, encoding="utf-8")
    return torch.from_numpy(table)


class RecSysModel(nn.Module):
    """The seeds' model: a user vector and a movie vector, side by side, into one linear layer."""

    def __init__(self, n_users: int, n_movies: int, dim: int = DEFAULT_EMBEDDING) -> None:
        super().__init__()
        self.user_embed = nn.Embedding(n_users, dim)
        self.movie_embed = nn.Embedding(n_movies, dim)
        self.out = nn.Linear(2 * dim, 1)

    def forward(self, users: torch.Tensor, movies: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.user_embed(users), self.movie_embed(movies)], dim=1)
        return self.out(x).squeeze(1)


class Trainer:
    """One DDP replica over its shard of the device-resident ratings."""

    def __init__(self, ctx: harness.Dist, args, data: Ratings) -> None:
        self.ctx = ctx
        self.args = args
        self.users = data.users.to(ctx.device)
        self.movies = data.movies.to(ctx.device)
        self.ratings = data.ratings.to(ctx.device)
        model = RecSysModel(data.n_users, data.n_movies, args.embedding_dim).to(ctx.device)
        self.n_params = sum(p.numel() for p in model.parameters())
        self.model = harness.replicate(ctx, model)
        if args.compile:
            self.model = torch.compile(self.model)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.scaler = harness.grad_scaler(ctx, args.precision)
        self.shard_len = len(data) // ctx.world_size  # drop_last, as DistributedSampler
        self.steps_per_epoch = self.shard_len // args.batch_size
        self._order: torch.Tensor | None = None
        self._epoch = -1

    def _batch_indices(self, step: int) -> torch.Tensor:
        epoch, i = divmod(step, self.steps_per_epoch)
        if epoch != self._epoch:  # same permutation on every rank, a different slice of it
            g = torch.Generator(device=self.ctx.device).manual_seed(self.args.seed + epoch)
            perm = torch.randperm(len(self.ratings), generator=g, device=self.ctx.device)
            self._order = perm[self.ctx.rank::self.ctx.world_size][:self.shard_len]
            self._epoch = epoch
        b = self.args.batch_size
        return self._order[i * b:(i + 1) * b]

    def step(self, step: int) -> None:
        idx = self._batch_indices(step)
        self.optimizer.zero_grad(set_to_none=True)
        with harness.autocast(self.ctx, self.args.precision):
            pred = self.model(self.users[idx], self.movies[idx])
        loss = F.mse_loss(pred.float(), self.ratings[idx])
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()


def main(argv: list[str] | None = None) -> int:
    args = flags.parse(WORKLOAD, argv)
    torch.manual_seed(args.seed)
    ctx = harness.setup_distributed()
    try:
        try:
            data = (synthetic_ratings(args.shape, args.seed) if args.data == "synthetic"
                    else load_ratings(args.data))
        except DataError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        trainer = Trainer(ctx, args, data)
        if trainer.steps_per_epoch < 1:
            print("error: batch size too large for the data set", file=sys.stderr)
            return 2
        steps = harness.measured_steps(args, trainer.steps_per_epoch)
        timer = harness.measure(ctx, args, trainer.step, steps, model=trainer.model)
        record = harness.build_record(
            ctx, args, workload=WORKLOAD, timer=timer, steps=steps,
            samples_per_step=args.batch_size * ctx.world_size, epoch_samples=len(data),
            unit="ratings/s", model=trainer.model,
            extra={"model": "recsys-embedding", "data": data.source, "users": data.n_users,
                   "movies": data.n_movies, "ratings": len(data),
                   "embedding_dim": args.embedding_dim,
                   "steps_per_epoch": trainer.steps_per_epoch,
                   "epochs": steps / trainer.steps_per_epoch},
        )
        harness.emit_record(ctx, args, record)
        return 0
    finally:
        harness.teardown_distributed()


if __name__ == "__main__":
    sys.exit(main())
