"""What gpubench adds to a remote sweep: the whole
`gpubench run mnist-ddp --on HOST --gpus 1,2` against a local sshd, against the
same rsync and `ssh ... torchrun` commands typed by hand, in the same run and
interleaved (A B A B ...), so that both see the same machine load.

    .venv/bin/python benchmarks/remote_overhead.py [--repeat 3] [-- WORKLOAD_ARGS]

gpubench's side is a fresh process each time (interpreter start, imports, host
key check, environment check, rsync, both runs, record fetches, the report);
the hand side is one rsync and one ssh per GPU count. The ratio is the medians'.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SSHD = "/usr/sbin/sshd"


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, timeout=30, stdin=subprocess.DEVNULL)


def start_sshd(d: Path) -> tuple[subprocess.Popen, int, Path]:
    """An sshd of our own on a free loopback port; returns it, its port and the client key."""
    keygen(d / "host_key")
    keygen(d / "client_key")
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\nPidFile {d / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n")
    os.makedirs("/run/sshd", exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port, d / "client_key"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("sshd did not start")


def timed(cmd: list[str], env: dict[str, str], timeout: float = 600) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed: {shlex.join(cmd)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("workload_args", nargs="*", default=["--steps", "2", "--warmup", "1"])
    args = ap.parse_args()
    python = sys.executable  # the "remote" python: this one, which has torch
    with tempfile.TemporaryDirectory(prefix="gpubench-overhead-") as tmp:
        tmp = Path(tmp)
        (tmp / "sshd").mkdir()
        sshd, port, key = start_sshd(tmp / "sshd")
        try:
            env = dict(os.environ, GPUBENCH_CONFIG_DIR=str(tmp / "config"),
                       GPUBENCH_STATE_DIR=str(tmp / "state"))
            results = tmp / "results"
            results.mkdir()
            spec = f"root@127.0.0.1:{port}"
            gpubench = [python, "-m", "gpubench", "run", "mnist-ddp", "--on", spec, "--key", str(key),
                        "--remote-python", python, "--remote-dir", str(tmp / "remote-gb"),
                        "--gpus", "1,2", "--results", str(results), "--force",
                        "--", *args.workload_args]
            known = tmp / "config" / "known_hosts"  # pinned by gpubench's warm-up run
            ssh = ["ssh", "-p", str(port), "-i", str(key), "-o", f"UserKnownHostsFile={known}",
                   "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"]
            hand_dir = tmp / "remote-hand"
            rsync = ["rsync", "-az", "--delete", "-e", shlex.join(ssh), f"{REPO / 'workloads'}/",
                     f"root@127.0.0.1:{hand_dir}/"]
            runs = [[*ssh, "root@127.0.0.1",
                     f"mkdir -p {hand_dir} && cd {hand_dir} && {python} -m torch.distributed.run "
                     f"--standalone --nproc_per_node={n} mnist_ddp.py {shlex.join(args.workload_args)}"]
                    for n in (1, 2)]

            def by_hand() -> float:
                return sum(timed(cmd, env) for cmd in [rsync, *runs])

            # warm-up: pins the host key, makes the first copies, loads the page cache
            timed(gpubench, env)
            by_hand()
            ours, hand = [], []
            for _ in range(args.repeat):
                ours.append(timed(gpubench, env))
                hand.append(by_hand())
        finally:
            sshd.kill()
            sshd.wait(timeout=10)
    a, b = statistics.median(ours), statistics.median(hand)
    print(f"gpubench run mnist-ddp --on {spec} --gpus 1,2 -- {' '.join(args.workload_args)}")
    print(f"  gpubench (whole command): median {a:6.2f} s   runs {', '.join(f'{x:.2f}' for x in ours)}")
    print(f"  rsync + ssh torchrun x2:  median {b:6.2f} s   runs {', '.join(f'{x:.2f}' for x in hand)}")
    print(f"  overhead ratio: {a / b:.2f}x  ({a - b:+.2f} s per sweep)")


if __name__ == "__main__":
    main()
