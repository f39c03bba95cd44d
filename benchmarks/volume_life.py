"""A volume's life on the mock cloud, per provider, timed step by step.

    .venv/bin/python benchmarks/volume_life.py [--mb 64]

For Lambda (a filesystem), RunPod (a network volume) and Vast.ai (a local volume), in a
mock cloud of its own and a fresh gpubench home: `volume create`, `provision --volume`,
MB megabytes written to $GPUBENCH_DATA's mount over SSH (with their sha256), `down`,
`provision --volume` again (placed where the volume is), the file read back and checked
on that second machine, `down`, `volume rm`. Each figure is one run's wall time of that
step on this machine (the mock answers at once: these are gpubench's and SSH's own
costs, not a provider's). Baseline: the same bytes written and checked on this machine's
disk, side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROVIDERS = (("lambda", None), ("runpod", "20"), ("vast", "20"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="megabytes written to the volume")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="volume-life-"))
    os.environ.update(HOME=str(root / "home"), GPUBENCH_STATE_DIR=str(root / "state"),
                      GPUBENCH_CONFIG_DIR=str(root / "config"), GPUBENCH_POLL_INTERVAL="0.05",
                      GPUBENCH_RATE_LIMIT_SCALE="0", GPUBENCH_HTTP_BACKOFF="0.01")
    (root / "home").mkdir()
    sys.path.insert(0, str(REPO))
    from gpubench.cli import main as gpubench
    from gpubench.mock import MockCloud

    def cli(*words: str) -> float:
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                gpubench(list(words))
        except SystemExit as e:
            if e.code not in (0, None):
                raise SystemExit(f"gpubench {' '.join(words)}: exit {e.code}")
        return time.perf_counter() - start

    def ssh(name: str, command: str) -> float:
        start = time.perf_counter()
        done = subprocess.run([str(Path(sys.executable).parent / "gpubench"), "ssh", name, "--", command],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"gpubench ssh {name}: {done.stderr.strip()}")
        return time.perf_counter() - start

    mount = '"${GPUBENCH_MOCK_ROOT:-}/data/gpubench"'
    write = f"head -c {args.mb << 20} /dev/urandom > {mount}/blob && cd {mount} && sha256sum blob > blob.sha"
    check = f"cd {mount} && sha256sum -c blob.sha"
    print(f"{args.mb} MB through each provider's volume on the mock cloud (wall seconds)")
    print(f"{'provider':8} {'create':>7} {'rent':>6} {'write':>6} {'down':>6} {'rent 2':>7} {'read':>6} {'rm':>6}")
    for provider, size in PROVIDERS:
        cloud = MockCloud.start(state_dir=root / f"mock-{provider}", boot_delay=0.0)
        os.environ.update(cloud.env())
        try:
            sized = ["--size", size] if size else []
            t = [cli("volume", "create", provider, "data", *sized, "--gpu-type", "H100", "--yes"),
                 cli("provision", provider, "--gpus", "1", "--name", "first", "--volume", "data", "--yes"),
                 ssh("first", write), cli("down", "first", "--yes"),
                 cli("provision", provider, "--gpus", "1", "--name", "second", "--volume", "data", "--yes"),
                 ssh("second", check)]
            cli("down", "second", "--yes")
            t.append(cli("volume", "rm", "data", "--yes"))
        finally:
            cloud.stop()
        print(f"{provider:8} " + " ".join(f"{x:6.2f}" for x in t))
    local = root / "local.bin"
    start = time.perf_counter()
    data = os.urandom(args.mb << 20)
    local.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    written = time.perf_counter() - start
    start = time.perf_counter()
    same = hashlib.sha256(local.read_bytes()).hexdigest() == digest
    read = time.perf_counter() - start
    print(f"baseline: the same {args.mb} MB written {written:.2f} s and checked {read:.2f} s on this "
          f"machine's disk ({'same' if same else 'DIFFERENT'})")


if __name__ == "__main__":
    main()
