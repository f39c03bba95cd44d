"""One node against two over a Vast.ai overlay network, as the mock makes it in namespace
mode (a bridge of its own between the members' namespaces), then over the same overlay
shaped slow with `tc tbf`: measured throughput at 1 and 2 nodes, the measured speedup,
and what gpubench predicted before each run (the record's predicted_throughput; the
node-scaling line the sweep says before its first run).

    sudo .venv/bin/python benchmarks/overlay_scaling.py [--rate 100mbit] [--repeat 3]

Everything goes through the real command line against the mock cloud: provision vast
--nodes 2 (an overlay), run resnet-ddp --nodes 1,2 at one process a node, down. The
machines are namespaces on this host's CPUs: both "nodes" share its cores, so a 2-node
figure is a check of the path, not of a network's speed, unless the shaped link is what
sets the pace.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from gpubench.mock import NETNS, MockCloud, netns
from gpubench.predict.for_records import CPU_OVERLAP
from gpubench.predict.model import MEASURED, Figure, StepInputs, step_time
from gpubench.predict.links import between_machines
from gpubench.providers.common import Offer

ROOT = Path(__file__).resolve().parents[1]
GPUBENCH = str(Path(sys.executable).with_name("gpubench"))
RESNET_TINY = ["--steps", "8", "--warmup", "2", "--depth", "18", "--width", "8", "--image-size", "32",
               "--batch-size", "16"]
OVERLAY_IFNAME = "eth1"


def gpubench(*args: str, env: dict, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([GPUBENCH, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    if check and done.returncode != 0:
        raise SystemExit(f"gpubench {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def member_namespaces(cloud: MockCloud) -> list[str]:
    """The namespaces of this mock's instances (<its bridge>-<k>), in order."""
    return sorted(n for n in netns.namespaces() if n.startswith(cloud.engine.network.bridge + "-"))


def shape(namespaces: list[str], rate: str) -> None:
    """tbf on each member's overlay interface, so both directions cross `rate`."""
    for ns in namespaces:
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", OVERLAY_IFNAME, "root",
                        "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms"], check=True)


def sweep(label: str, env: dict, cwd: Path, results: Path, repeat: int) -> list[dict]:
    done = gpubench("run", "resnet-ddp", "--on", "ov", "--nodes", "1,2", "--gpus", "1", "--repeat", str(repeat),
                    "--force", "--yes", "--quiet", "--results", str(results), "--", *RESNET_TINY, env=env, cwd=cwd)
    said = [line for line in (done.stdout + done.stderr).splitlines()
            if line.startswith(("link ", "going on", "node scaling", "[node"))]
    print(f"\n{label}:")
    for line in said:
        print(f"  said: {line}")
    return [json.loads(line) for f in sorted(results.glob("*.jsonl")) for line in f.read_text().splitlines()]


def predicted_speedup(one_node: float, record: dict, mbit_s: float) -> float:
    """The performance model's 2-node speedup from the 1-node run measured just before
    (its seconds per image), the model's gradient bytes and the link: a ring all-reduce
    over `mbit_s`, nothing hidden behind the backward pass (gloo on a CPU)."""
    inputs = StepInputs(Figure(1.0 / one_node, MEASURED, "the 1-node run"),
                        Figure(float(record["grad_bytes"]), MEASURED, "the model's gradients"),
                        int(record["batch_per_gpu"]), CPU_OVERLAP)
    link = between_machines(Offer("vast", "-", "RTX 4090", 1, 0.0), mbit_s)
    return step_time(inputs, 2, 2, link).throughput / one_node


def table(label: str, records: list[dict], mbit_s: float | None) -> None:
    ok = [r for r in records if r.get("status") == "ok"]
    by_nodes: dict[int, list[dict]] = {}
    for r in ok:
        by_nodes.setdefault(r.get("nodes") or 1, []).append(r)
    med = {n: sorted(r["throughput"] for r in rows)[len(rows) // 2] for n, rows in by_nodes.items()}
    for n in sorted(by_nodes):
        rows = by_nodes[n]
        pred = [r.get("predicted_throughput") for r in rows if r.get("predicted_throughput")]
        spread = (max(r["throughput"] for r in rows) - min(r["throughput"] for r in rows)) / med[n]
        speedup = f"; speedup {med[n] / med[1]:.2f}" if 1 in med else ""
        if n == 2 and 1 in med:
            rate = mbit_s or (rows[-1].get("links") or [{}])[0].get("gbps", 0) * 1000
            if rate:
                speedup += (f" (model: {predicted_speedup(med[1], rows[-1], rate):.2f} "
                            f"over {rate:,.0f} Mb/s)")
        predicted = (f"; predicted {pred[-1]:.1f}/s ({rows[-1].get('predicted_basis')})" if pred
                     else "; no prediction")
        print(f"  {label:<22} {n} node(s): {med[n]:8.1f} images/s, median of {len(rows)} "
              f"(spread {spread:.0%}){speedup}{predicted}; network {rows[-1].get('node_network')}, "
              f"collectives on {rows[-1].get('socket_ifname')}")


def rate_mbit(rate: str) -> float:
    """tc's '100mbit', '1gbit' in Mb/s."""
    number = float(rate.rstrip("bitBIT").rstrip("mgkMGK") or 0)
    return number * {"g": 1000.0, "m": 1.0, "k": 0.001}.get(rate.lower().rstrip("bit")[-1:], 1.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", default="100mbit", help="tc tbf rate of the shaped run")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gpubench-overlay-") as tmp:
        tmp = Path(tmp)
        cloud = MockCloud.start(state_dir=tmp / "mock", netns=True, boot_delay=0.0)
        try:
            if cloud.mode != NETNS:
                print(f"error: namespace mode unavailable: {cloud.mode_note}", file=sys.stderr)
                return 2
            env = {**os.environ, **cloud.env(), "GPUBENCH_CONFIG_DIR": str(tmp / "config"),
                   "GPUBENCH_STATE_DIR": str(tmp / "state"), "COLUMNS": "150"}
            work = tmp / "work"
            work.mkdir()
            made = gpubench("provision", "vast", "--gpus", "4", "--nodes", "2", "--name", "ov", "--yes",
                            "--ssh-timeout", "60", env=env, cwd=work)
            for line in made.stdout.splitlines():
                if "network:" in line or "link" in line:
                    print(f"provision: {line.strip()}")
            try:
                plain = sweep("over the overlay", env, work, tmp / "plain", args.repeat)
                shape(member_namespaces(cloud), args.rate)
                shaped = sweep(f"over the overlay shaped to {args.rate} (tc tbf)", env, work, tmp / "shaped",
                               args.repeat)
                print("\nresnet-ddp (ResNet-18 at width 8, 32x32 images, batch 16 a process), 1 process a node:")
                table("overlay", plain, None)                 # the link measured at provision
                table(f"overlay, tbf {args.rate}", shaped, rate_mbit(args.rate))
            finally:
                gpubench("down", "ov", "--yes", env=env, cwd=work, check=False)
        finally:
            cloud.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
