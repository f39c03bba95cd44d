"""The preflight gate on this machine, as provision runs it on a rented one: the probe
gathers the facts (nvidia-smi, /dev/shm, disk, a short load test) and
gpubench/lifecycle/preflight_checks.py judges them as a rental of the GPU type found.

    python benchmarks/gpu_check_gate.py --out DIR [--expect-gpu H200] [--gpus 1]

Prints every check's value and verdict; keeps the probe's answer (probe-facts.json,
which tests can replay on a CPU) and the checks (gate-checks.json) in DIR. Exit 1 when
the gate would turn the machine away.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from gpubench.lifecycle.preflight import PROBE, PROBE_TIMEOUT_S, PreflightError, parse_answer
from gpubench.lifecycle.preflight_checks import Expectation, fact_rows, judge
from gpubench.providers.gpus import wanted_gpu


def gpu_type(facts: dict) -> str:
    """The GPU type a provider would have listed for the card found ("NVIDIA H200" -> "H200")."""
    rows = fact_rows(facts, "basic")
    name = rows[0].get("name", "") if rows else ""
    return wanted_gpu(name).name or name


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for probe-facts.json and gate-checks.json")
    p.add_argument("--expect-gpu", default=None, help="the GPU type paid for [default: the one found]")
    p.add_argument("--gpus", type=int, default=None, help="GPUs paid for [default: those found]")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    done = subprocess.run([sys.executable, str(PROBE), "gate", json.dumps({"load": True})],
                          capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    (args.out / "probe-output.txt").write_text(done.stdout + done.stderr)
    try:
        facts = parse_answer(done.stdout)
    except PreflightError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    (args.out / "probe-facts.json").write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
    expect = Expectation(args.expect_gpu or gpu_type(facts),
                         args.gpus if args.gpus is not None else len(fact_rows(facts, "basic")))
    checks = judge(facts, expect)
    (args.out / "gate-checks.json").write_text(json.dumps(
        {"expect": {"gpu_name": expect.gpu_name, "gpu_count": expect.gpu_count},
         "stand_in": bool(facts.get("stand_in")),
         "checks": [{"name": c.name, "ok": c.ok, "judged": c.judged, "detail": c.detail} for c in checks]},
        indent=1) + "\n")
    print(f"preflight gate, as a rental of {expect.gpu_count}x {expect.gpu_name}"
          f"{' (a CPU standing in: no GPU found)' if facts.get('stand_in') else ''}:")
    for c in checks:
        verdict = "pass" if c.ok else "FAIL"
        print(f"  {verdict:<4} {c.name:<10} {c.detail}{'' if c.judged else '  (not judged)'}")
    passed = all(c.ok for c in checks)
    print(f"gate: {'passed' if passed else 'would turn this machine away'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
