"""Each workload's step in parts (data, compute, exposed all-reduce, other) at 1 and 2
nodes of one process, on two hosts of their own (sshd in network namespaces joined by a
private veth link, as tests/launch/cluster_netns.py makes them; needs root), over the
bare link and then over the same link shaped with `tc tbf`: what `gpubench report`
says of each (its lost-points lines, and each row's breakdown from --format json).

    sudo .venv/bin/python benchmarks/parts_on_a_pair.py [--rate 200mbit] [--keep DIR]

Every step goes through the real command line: `gpubench run W --on pair --nodes 1,2
--gpus 1 --repeat 1` for mnist-ddp, gpt-ddp and a user's script (benchmarks/scripts/
mnist_net.py) at the small CPU sizes below, then `gpubench report` of each link's
results. Both "nodes" share this host's cores: the shaped link is what tells them apart.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from namespace_pair import namespace_pair

REPO = Path(__file__).resolve().parent.parent
GPUBENCH = str(Path(sys.executable).with_name("gpubench"))
WORKLOADS = {
    "mnist-ddp": ["--steps", "120", "--warmup", "10", "--batch-size", "16"],
    "gpt-ddp": ["--steps", "400", "--warmup", "20", "--n-layer", "2", "--n-head", "2", "--n-embd", "64",
                "--block-size", "64", "--vocab-size", "256", "--batch-size", "4"],
    str(REPO / "benchmarks" / "scripts" / "mnist_net.py"): ["--steps", "100", "--batch-size", "16",
                                                            "--images", "4000"],
}
COLUMNS = "workload,nodes,gpu_count,throughput,efficiency,median_step_s,breakdown,points_lost"


def gpubench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "300"}   # the report's notes on one line each
    done = subprocess.run([GPUBENCH, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=1800)
    if done.returncode != 0:
        sys.exit(f"gpubench {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def shape(cluster, rate: str) -> None:
    """tbf on each end of the private link, so that both directions cross `rate`."""
    for node in cluster.nodes:
        subprocess.run(["tc", "-n", node.host.name, "qdisc", "replace", "dev", node.private_link, "root",
                        "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms"], check=True)


def sweep(label: str, tmp: Path, results: Path) -> None:
    results.mkdir(parents=True, exist_ok=True)
    before = os.getloadavg()[0]
    for workload, args in WORKLOADS.items():
        gpubench("run", workload, "--on", "pair", "--nodes", "1,2", "--gpus", "1", "--repeat", "1",
                 "--quiet", "--remote-python", sys.executable, "--remote-dir", str(tmp / "remote"),
                 "--results", str(results), "--", *args, cwd=tmp)
    report = gpubench("report", "--results", str(results), cwd=tmp).stdout
    rows = json.loads(gpubench("report", "--results", str(results), "--format", "json", "--columns",
                               COLUMNS, cwd=tmp).stdout)
    print(f"\n{label} (load average {before:.1f} before, {os.getloadavg()[0]:.1f} after):")
    for line in report.splitlines():
        if "points against" in line:
            print(f"  {line.strip()}")
    for row in rows:
        parts = row["breakdown"] or {}
        shares = " ".join(f"{k} {100 * v:.1f}%" for k, v in parts.items())
        name = Path(row["workload"]).name
        print(f"  {name:<12} {row['nodes']} node(s): {row['throughput']:>10,.1f}/s, median step "
              f"{1000 * row['median_step_s']:.2f} ms, efficiency {row['efficiency']:.2f}; {shares}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", default="200mbit", help="tc tbf rate of the shaped link")
    ap.add_argument("--keep", type=Path, help="copy both links' results here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpubench-pair-") as tmp:
        tmp = Path(tmp)
        with namespace_pair(tmp) as cluster:
            sweep("the bare veth link", tmp, tmp / "bare")
            shape(cluster, args.rate)
            sweep(f"the same link shaped to {args.rate} (tc tbf)", tmp, tmp / "shaped")
        for name in ("bare", "shaped") if args.keep else ():
            shutil.copytree(tmp / name, args.keep / name, dirs_exist_ok=True)


if __name__ == "__main__":
    main()
