"""Start-up time of `gpubench --help` next to a bare `python -c pass`, same run.

    .venv/bin/python benchmarks/cli_startup.py [--runs 20]

Prints the median of each and their ratio. The CLI must not import torch,
pandas or matplotlib to print its help.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path


def median_seconds(cmd: list[str], runs: int) -> float:
    subprocess.run(cmd, capture_output=True, check=True)  # warm the page cache, not timed
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    gpubench = str(Path(sys.executable).parent / "gpubench")
    baseline = median_seconds([sys.executable, "-c", "pass"], args.runs)
    cli = median_seconds([gpubench, "--help"], args.runs)
    print(f"python -c pass   median {baseline * 1000:7.1f} ms over {args.runs} runs")
    print(f"gpubench --help  median {cli * 1000:7.1f} ms over {args.runs} runs")
    print(f"ratio {cli / baseline:.2f}x; gpubench's own start-up {1000 * (cli - baseline):.1f} ms")


if __name__ == "__main__":
    main()
