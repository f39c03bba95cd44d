"""MNIST without torchvision: read the standard IDX files into tensors once.

Files are verified against their published MD5 sums and fetched from the usual
mirrors when absent. Images are decoded and normalised once into one float
tensor, so an epoch costs indexing, not per-sample Python transforms.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import torch

MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)

# file name -> md5 of the gzip file, as published with the data set
TRAIN_FILES = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
}
TEST_FILES = {
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}

MEAN, STD = 0.1307, 0.3081  # the pytorch/examples normalisation
TRAIN_SIZE = 60_000

# IDX type codes -> (torch dtype, bytes per element); big-endian on disk
_IDX_TYPES = {
    0x08: (torch.uint8, 1),
    0x09: (torch.int8, 1),
    0x0B: (torch.int16, 2),
    0x0C: (torch.int32, 4),
    0x0D: (torch.float32, 4),
    0x0E: (torch.float64, 8),
}


class DataError(Exception):
    """The data set is missing, corrupt, or cannot be fetched."""


@dataclass
class Split:
    images: torch.Tensor  # float32 [N, 1, 28, 28], normalised
    labels: torch.Tensor  # int64 [N]

    def __len__(self) -> int:
        return self.labels.shape[0]


def md5_of(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_idx(path: Path) -> torch.Tensor:
    """Decode one IDX file (optionally gzipped) into a tensor of its shape."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: cannot read IDX file: {e}") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise DataError(f"{path}: not an IDX file (bad magic number)")
    dtype, width = _IDX_TYPES[data[2]]
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataError(f"{path}: truncated IDX header")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    count = 1
    for d in shape:
        count *= d
    if len(data) - header != count * width:
        raise DataError(f"{path}: expected {count * width} bytes of data for shape "
                        f"{tuple(shape)}, found {len(data) - header}")
    raw = torch.frombuffer(bytearray(data[header:]), dtype=torch.uint8)
    if width > 1:  # IDX is big-endian; torch reads native order
        raw = raw.view(-1, width).flip(1).reshape(-1)
    return raw.view(dtype).reshape(shape)


def verify(path: Path, expected_md5: str) -> None:
    actual = md5_of(path)
    if actual != expected_md5:
        raise DataError(f"{path}: checksum mismatch (md5 {actual}, expected {expected_md5}); "
                        "delete the file to fetch it again")


def download(name: str, dest: Path, mirrors: tuple[str, ...] = MIRRORS, timeout: float = 30) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    for base in mirrors:
        tmp = dest.with_suffix(dest.suffix + ".part")
        try:
            with urllib.request.urlopen(base + name, timeout=timeout) as r, open(tmp, "wb") as f:
                while chunk := r.read(1 << 20):
                    f.write(chunk)
            os.replace(tmp, dest)
            return
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            tmp.unlink(missing_ok=True)
            errors.append(f"{base}: {getattr(e, 'reason', e)}")
    raise DataError(f"cannot download {name} (offline?) from any mirror: " + "; ".join(errors)
                    + ". Use --data synthetic, or put the MNIST IDX files in the data directory.")


def ensure_files(root: Path, files: dict[str, str], fetch: bool = True) -> dict[str, Path]:
    """Each file of `files` present in `root` (gzipped or not) and verified."""
    found = {}
    for name, md5 in files.items():
        gz = root / name
        plain = root / name[: -len(".gz")]
        if gz.exists():
            verify(gz, md5)
            found[name] = gz
        elif plain.exists():  # an unpacked copy: the published sums are of the .gz
            found[name] = plain
        elif fetch:
            download(name, gz)
            verify(gz, md5)
            found[name] = gz
        else:
            raise DataError(f"{gz} is missing")
    return found


def normalise(images_u8: torch.Tensor) -> torch.Tensor:
    # in place on the one float copy: 60,000 images are 188 MB in fp32
    return images_u8.to(torch.float32).div_(255.0).sub_(MEAN).div_(STD)


def load_split(root: Path, files: dict[str, str], fetch: bool = True) -> Split:
    paths = ensure_files(root, files, fetch)
    image_file, label_file = (paths[n] for n in files)
    images = read_idx(image_file)
    labels = read_idx(label_file)
    if images.dim() != 3 or labels.dim() != 1 or images.shape[0] != labels.shape[0]:
        raise DataError(f"{root}: images {tuple(images.shape)} and labels "
                        f"{tuple(labels.shape)} do not match")
    return Split(normalise(images).unsqueeze(1), labels.to(torch.int64))


def synthetic(n: int = TRAIN_SIZE, seed: int = 0) -> Split:
    """MNIST-shaped data: 28x28 digit-like blobs whose class decides the position,
    so the model has something learnable."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = torch.randint(0, 64, (n, 28, 28), generator=g, dtype=torch.uint8)
    rows = (labels // 5) * 12 + 4
    cols = (labels % 5) * 5 + 2
    for dr in range(8):
        for dc in range(4):
            images[torch.arange(n), rows + dr, cols + dc] = 255
    return Split(normalise(images).unsqueeze(1), labels)


def load_train(data: str, seed: int = 0, fetch: bool = True) -> Split:
    if data == "synthetic":
        return synthetic(seed=seed)
    return load_split(Path(data).expanduser(), TRAIN_FILES, fetch)
