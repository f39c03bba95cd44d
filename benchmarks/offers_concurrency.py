"""`gpubench offers` asks every provider at once. This measures by how much that
beats asking them one after another, against the mock cloud with every provider
answering after a fixed delay (the mock's `slow` fault).

    .venv/bin/python benchmarks/offers_concurrency.py [--delay 0.3] [--repeat 3]

Prints the per-provider latencies, their sum, the concurrent wall time and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay", type=float, default=0.3, help="seconds each provider takes to answer")
    ap.add_argument("--repeat", type=int, default=3, help="runs to take the median of")
    args = ap.parse_args()

    from gpubench.mock import MockCloud

    with tempfile.TemporaryDirectory() as tmp, \
            MockCloud.start(state_dir=Path(tmp) / "mock", faults=f"slow={args.delay}") as cloud:
        os.environ.update(cloud.env())
        os.environ.update(GPUBENCH_CONFIG_DIR=str(Path(tmp) / "config"),
                          GPUBENCH_STATE_DIR=str(Path(tmp) / "state"))
        from gpubench.offers import OfferQuery, gather
        from gpubench.providers import registry

        names = registry.names()
        providers = {n: registry.get(n) for n in names}
        for p in providers.values():   # warm the connection pools: measure the APIs, not TCP set-up
            p.offers(gpus=1)
        singles: dict[str, list[float]] = {n: [] for n in names}
        concurrent: list[float] = []
        sums: list[float] = []
        for _ in range(args.repeat):
            total = 0.0
            for n, p in providers.items():
                t = time.perf_counter()
                p.offers(gpus=1)
                dt = time.perf_counter() - t
                singles[n].append(dt)
                total += dt
            sums.append(total)
            t = time.perf_counter()
            offers, warnings = gather(OfferQuery(names, gpus=1))
            concurrent.append(time.perf_counter() - t)
            if warnings or not offers:
                sys.exit(f"offers failed: {warnings}")
    seq, conc = statistics.median(sums), statistics.median(concurrent)
    for n in names:
        print(f"{n:<8} alone        {statistics.median(singles[n]):.3f} s")
    print(f"sum of the three      {seq:.3f} s")
    print(f"gpubench offers (all) {conc:.3f} s   (median of {args.repeat}, mock delay {args.delay} s each)")
    print(f"ratio concurrent/sum  {conc / seq:.2f}   (speed-up {seq / conc:.2f}x)")


if __name__ == "__main__":
    main()
