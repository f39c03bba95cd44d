"""What gpubench's fan-out adds to a run across two machines, and a whole sweep's
figures: two hosts of their own (sshd in network namespaces with a private link,
as tests/launch/cluster_netns.py makes them; needs root and `ip netns`).

    .venv/bin/python benchmarks/cluster_overhead.py [--repeat 3] [-- WORKLOAD_ARGS]

1. Per run, interleaved (A B A B ...): the cluster launcher's run of 2 nodes x 2
   processes (both torchruns started at once over its SSH connections, output
   streamed with a node prefix, the record and load figures collected), against
   the same two torchrun commands typed by hand: two `ssh HOST torchrun ...` at
   once, timed until both have exited. The ratio is the medians'.
2. The whole `gpubench run WORKLOAD --on pair --nodes 1,2 --gpus 2` as a fresh
   process: the time to its first record and to its end, and the 1-node and
   2-node throughputs it recorded.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from namespace_pair import namespace_pair

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workload", default="mnist-ddp")
    ap.add_argument("workload_args", nargs="*", default=["--steps", "20", "--warmup", "2"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpubench-cluster-") as tmp:
        tmp = Path(tmp)
        with namespace_pair(tmp) as cluster:
            per_run(cluster, tmp, args)
            whole_sweep(tmp, args)


def per_run(cluster, tmp: Path, args) -> None:
    from gpubench import paths
    from gpubench.launch.base import SweepPoint
    from gpubench.launch.cluster import open_cluster
    from gpubench.remote.cluster import find_cluster
    from gpubench.suite import resolve

    python = sys.executable  # the "remote" python: this one, which has torch
    hosts = find_cluster("pair")
    workload = resolve(args.workload)
    launcher = open_cluster(hosts, paths.known_hosts_path(), python, str(tmp / "remote-gb"), 10,
                            lambda _: None)
    with launcher:
        launcher.prepare(workload)
        point = SweepPoint(2, 2)
        ours_cmds: list[list[str]] = []

        def ours() -> float:
            start = time.perf_counter()
            outcome = launcher.run(workload, point, list(args.workload_args), lambda _: None, 600)
            elapsed = time.perf_counter() - start
            if outcome.error:
                sys.exit(f"gpubench's run failed: {outcome.error}\n" + "\n".join(outcome.output_tail[-20:]))
            ours_cmds.append(outcome.command)
            return elapsed

        head = hosts.head.private_ip
        # by hand as one learns to type it: is_host says who runs the store (torch does not
        # take an address of a namespace's private link for its own), GLOO_SOCKET_IFNAME the link
        script = tmp / "remote-gb" / "workloads" / workload.script.name

        def by_hand(run: int) -> float:
            procs = []
            start = time.perf_counter()
            for i, node in enumerate(cluster.nodes):
                s = node.sshd
                ssh = ["ssh", "-p", str(s.port), "-i", str(s.key_file), "-o",
                       f"UserKnownHostsFile={paths.known_hosts_path()}", "-o", "StrictHostKeyChecking=yes",
                       "-o", "BatchMode=yes", f"{s.user}@{s.host}"]
                torchrun = (f"GLOO_SOCKET_IFNAME={node.private_link} OMP_NUM_THREADS=1 {python} -m "
                            f"torch.distributed.run --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d "
                            f"--rdzv_endpoint={head}:29500 --rdzv_id=hand{run} "
                            f"--rdzv_conf=is_host={int(i == 0)} "
                            f"--local_addr={node.private_ip} {script} {shlex.join(args.workload_args)}")
                procs.append(subprocess.Popen([*ssh, torchrun], stdout=subprocess.DEVNULL,
                                              stderr=subprocess.PIPE, text=True))
            for proc in procs:
                _, err = proc.communicate(timeout=600)
                if proc.returncode != 0:
                    sys.exit(f"a torchrun by hand failed:\n{err[-2000:]}")
            return time.perf_counter() - start

        ours()  # warm-up: the page cache, the members' probes, the first rendezvous
        by_hand(0)
        a_runs, b_runs = [], []
        for run in range(1, args.repeat + 1):
            a_runs.append(ours())
            b_runs.append(by_hand(run))
    a, b = statistics.median(a_runs), statistics.median(b_runs)
    print(f"one run of {args.workload} at 2 nodes x 2 processes -- {' '.join(args.workload_args)}")
    print(f"  gpubench cluster launcher: median {a:6.2f} s   runs {', '.join(f'{x:.2f}' for x in a_runs)}")
    print(f"  two ssh torchrun by hand:  median {b:6.2f} s   runs {', '.join(f'{x:.2f}' for x in b_runs)}")
    print(f"  fan-out ratio: {a / b:.2f}x  ({a - b:+.2f} s per run)")


def whole_sweep(tmp: Path, args) -> None:
    results = tmp / "results"
    results.mkdir()
    cmd = [sys.executable, "-m", "gpubench", "run", args.workload, "--on", "pair", "--nodes", "1,2",
           "--gpus", "2", "--repeat", "1", "--remote-python", sys.executable, "--remote-dir",
           str(tmp / "remote-sweep"), "--results", str(results), "--", *args.workload_args]
    first: list[float] = []

    def watch(start: float) -> None:
        while not first:
            if any(p.stat().st_size > 0 for p in results.glob("*.jsonl")):
                first.append(time.perf_counter() - start)
            time.sleep(0.05)

    start = time.perf_counter()
    watcher = threading.Thread(target=watch, args=(start,), daemon=True)
    watcher.start()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    total = time.perf_counter() - start
    first.append(total)  # ends the watcher should no record have come
    if done.returncode != 0:
        sys.exit(f"gpubench run failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    records = [json.loads(line) for p in results.glob("*.jsonl") for line in p.read_text().splitlines()]
    shown = " ".join(["gpubench", *cmd[3:]]).replace(sys.executable, "PYTHON")
    print(f"\n{shown}")
    print(f"  first record after {first[0]:.1f} s; the whole command {total:.1f} s")
    for r in sorted(records, key=lambda r: r["nodes"]):
        print(f"  {r['nodes']} node(s) x 2 processes: {r['throughput']:.1f} {r['throughput_unit']}, "
              f"wall {r['wall_seconds']:.2f} s, process {r['process_seconds']:.1f} s, "
              f"network {r['node_network']}")
    one = next(r for r in records if r["nodes"] == 1)
    two = next(r for r in records if r["nodes"] == 2)
    print(f"  node speedup 2 vs 1: {two['throughput'] / one['throughput']:.2f}x")


if __name__ == "__main__":
    main()
