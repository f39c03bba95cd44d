"""Time from `gpubench provision` to SSH-ready against the mock cloud with no boot
delay: the whole command (process start to exit) and the "ready in" figure it prints
(first API call to a working SSH login), per provider.

    .venv/bin/python benchmarks/provision_ready.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from gpubench.mock import MockCloud

    with tempfile.TemporaryDirectory() as tmp, \
            MockCloud.start(state_dir=Path(tmp) / "mock", boot_delay=0.0) as cloud:
        env = dict(os.environ, **cloud.env(), GPUBENCH_CONFIG_DIR=str(Path(tmp) / "config"),
                   GPUBENCH_STATE_DIR=str(Path(tmp) / "state"), GPUBENCH_LAMBDA_SSH_USER=getpass.getuser(),
                   GPUBENCH_POLL_INTERVAL="0.2")
        # The mock is a local server: Lambda's published 1 req/s and 1 launch/12 s would
        # only measure the limiter, so it is off here (it stays on against the real API).
        env["GPUBENCH_RATE_LIMIT_SCALE"] = "0"

        def gpubench(*a: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "gpubench", *a], env=env, capture_output=True,
                                  text=True, timeout=300)

        for provider in ("lambda", "vast", "runpod"):
            walls, readies = [], []
            for i in range(args.repeat):
                t = time.perf_counter()
                r = gpubench("provision", provider, "--gpus", "1", "--name", f"bench{i}", "--yes")
                walls.append(time.perf_counter() - t)
                if r.returncode:
                    sys.exit(r.stderr)
                readies.append(float(re.search(r"ready in ([0-9.]+) s", r.stdout).group(1)))
                gpubench("down", f"bench{i}", "--yes")
            print(f"{provider:<7} provision command {statistics.median(walls):.2f} s, "
                  f"API-to-SSH-ready {statistics.median(readies):.2f} s (median of {args.repeat})")


if __name__ == "__main__":
    main()
