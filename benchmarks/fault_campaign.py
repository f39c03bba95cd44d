"""A randomized fault campaign against the mock cloud: real `gpubench` processes run
`provision`, `run --on` and `bench` while the mock injects faults from its own
vocabulary (gpubench/mock/faults.py), each is SIGKILLed at a random moment (or left
to finish), and then a user's recovery runs (`ls`, `down --all`, `down --orphans`,
once more if anything is left). Two more kinds: the wrong account (`ls` and `down`
with the provider variables pointed at a second mock, then back) and machines that
stop themselves (--max-hours of a few seconds, the user away meanwhile).

Counted per scenario, summed in the table it prints:
  alive      instances still at the provider after recovery (billing)
  lost       instances the mock created that no ledger row names (by id or name)
  off-alive  rows confirmed terminated while their instance still runs
  unsettled  ledger rows still live after recovery with nothing at the provider
  torn       result lines that are not a whole JSON record
  missing    records a command that finished (exit 0) did not leave
  tracebks   Python tracebacks printed by any gpubench command
  recovery   seconds from the first recovery command until nothing is left

    .venv/bin/python benchmarks/fault_campaign.py --scenarios 20 --seed 1

Both mocks run in this process; every scenario has its own ledger and config, and
anything a scenario leaves at the provider is counted, then removed, before the next.
"""

from __future__ import annotations

import argparse
import collections
import getpass
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.providers import registry

KINDS = ("provision", "run", "bench", "wrong-account", "self-stop")
# Faults in force while the command runs (one per scenario; "" is none).
ACTION_FAULTS = ("", "", "429=0@2", "500@1", "503=0@2", "slow=0.3@4", "never-boots", "ssh-refuses",
                 "dies=1.5", "terminate-lies", "hide-from-list@2", "no-capacity", "bad-key@1")
# Faults that may still hold while the user recovers: transient ones, as a provider has them.
RECOVERY_FAULTS = ("", "", "", "hide-from-list@1", "503=0@1", "429=0@1", "slow=0.2@3")
KILL_WINDOW_S = {"provision": 4.0, "run": 9.0, "bench": 12.0, "wrong-account": 3.0, "self-stop": 6.0}
FINISH_SHARE = 0.25             # scenarios whose command is left to finish
SELF_STOP_WAIT_S = 5.0          # the user away: --max-hours 0.0008 is 2.9 s
COMMAND_TIMEOUT_S = 120.0       # any command of the recovery
FINISH_CAP_S = 45.0             # a command left to finish is killed after this all the same
TRACEBACK = "Traceback (most recent call last)"

TINY = '''\
import json, os
import torch.distributed as dist
dist.init_process_group("gloo")  # a measurement is of processes that train together
world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
print(f"rank {rank} of {world} started", flush=True)
if rank == 0:
    with open(os.environ["GPUBENCH_RECORD_FILE"], "w") as f:
        json.dump({"status": "ok", "wall_seconds": 0.1, "throughput": 10.0 * world,
                   "throughput_unit": "samples/s"}, f)
dist.destroy_process_group()
'''


@dataclass
class Outcome:
    number: int
    kind: str
    provider: str
    fault: str
    killed_after: float | None = None     # None: the command was left to finish
    exit_code: int | None = None
    alive: int = 0
    lost: int = 0
    written_off_alive: int = 0
    unsettled: int = 0
    torn: int = 0
    missing: int = 0
    tracebacks: int = 0
    recovery_s: float = 0.0
    stopped_itself: bool | None = None
    notes: list[str] = field(default_factory=list)


class Campaign:
    def __init__(self, root: Path, seed: int, clouds: dict) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.clouds = clouds                      # "a": the account used, "b": another
        self.launched: list[tuple[str, str, str, str]] = []   # (cloud, provider, id, name)
        for label, cloud in clouds.items():
            self._record_launches(label, cloud)
        self.script = root / "tiny_fault.py"
        self.script.write_text(TINY)

    def _record_launches(self, label: str, cloud) -> None:
        engine = cloud.engine
        launch = engine.launch

        def recorded(provider, **kw):
            inst = launch(provider, **kw)
            self.launched.append((label, provider, inst.id, inst.name))
            return inst

        engine.launch = recorded

    # -- running gpubench -------------------------------------------------------
    def env(self, home: Path, cloud: str = "a", **more: str) -> dict:
        env = dict(os.environ, **self.clouds[cloud].env())
        env.update(GPUBENCH_CONFIG_DIR=str(home / "config"), GPUBENCH_STATE_DIR=str(home / "state"),
                   GPUBENCH_LAMBDA_SSH_USER=getpass.getuser(), GPUBENCH_RATE_LIMIT_SCALE="0",
                   GPUBENCH_POLL_INTERVAL="0.1", GPUBENCH_HTTP_TIMEOUT="5",
                   GPUBENCH_HTTP_BACKOFF="0.05", GPUBENCH_WATCHDOG_POLL="0.3", **more)
        return env

    def command(self, args: list[str]) -> list[str]:
        return [sys.executable, "-m", "gpubench", *args]

    def cli(self, outcome: Outcome, args: list[str], env: dict) -> subprocess.CompletedProcess:
        done = subprocess.run(self.command(args), env=env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
        self._count_tracebacks(outcome, args, done.stdout + done.stderr)
        return done

    def killed_at_random(self, outcome: Outcome, args: list[str], env: dict) -> int | None:
        """Run `args`, SIGKILL it at a random moment of its kind's window (or let it finish)."""
        finish = self.rng.random() < FINISH_SHARE
        after = FINISH_CAP_S if finish else self.rng.uniform(0.05, KILL_WINDOW_S[outcome.kind])
        proc = subprocess.Popen(self.command(args), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        try:
            out, err = proc.communicate(timeout=after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate()
            outcome.killed_after = after
        self._count_tracebacks(outcome, args, out + err)
        outcome.exit_code = proc.returncode
        return proc.returncode

    @staticmethod
    def _count_tracebacks(outcome: Outcome, args: list[str], text: str) -> None:
        found = text.count(TRACEBACK)
        if found:
            outcome.tracebacks += found
            tail = text[text.index(TRACEBACK):].strip().splitlines()[-1]
            outcome.notes.append(f"traceback in {' '.join(args[:2])}: {tail[:120]}")

    # -- the provider's and the ledger's side ------------------------------------
    def instances(self, name_prefix: str, cloud: str | None = None) -> list:
        """Instances of this scenario the mocks still have (any phase: all of them bill)."""
        labels = [cloud] if cloud else list(self.clouds)
        return [i for label in labels for i in self.clouds[label].engine.store.instances()
                if i.name.startswith(f"gpubench-{name_prefix}")]

    def ledger_rows(self, home: Path) -> list:
        from gpubench.store.ledger import Ledger

        path = home / "state" / "ledger.sqlite"
        if not path.exists():
            return []
        with Ledger(path) as ledger:
            return ledger.entries(include_done=True)

    def clear_faults(self) -> None:
        for cloud in self.clouds.values():
            cloud.set_faults("")

    # -- one scenario ---------------------------------------------------------------
    def scenario(self, number: int, kinds: tuple[str, ...] = KINDS) -> Outcome:
        kind = self.rng.choice(kinds)
        provider = self.rng.choice(registry.names())
        fault = "" if kind in ("wrong-account", "self-stop") else self.rng.choice(ACTION_FAULTS)
        outcome = Outcome(number, kind, provider, fault)
        home = self.root / f"s{number:03d}"
        name = f"s{number:03d}"
        results = home / "results"
        results.mkdir(parents=True)
        env = self.env(home)
        quick = ["--boot-timeout", "4", "--ssh-timeout", "4", "--attempts", "2"]
        launched_before = len(self.launched)
        try:
            if kind == "provision":
                self.clouds["a"].set_faults(f"{provider}:{fault}" if fault else "")
                self.killed_at_random(outcome, ["provision", provider, "--gpus", "1", "--name", name,
                                                "--yes", *quick], env)
            elif kind == "run":
                ready = self.cli(outcome, ["provision", provider, "--gpus", "2", "--name", name,
                                           "--yes", *quick], env)
                if ready.returncode != 0:
                    outcome.notes.append(f"provision before run failed: {ready.stderr.strip()[-120:]}")
                self.clouds["a"].set_faults(f"{provider}:{fault}" if fault else "")
                self.killed_at_random(outcome, ["run", str(self.script), "--on", name, "--gpus", "1,2",
                                                "--results", str(results), "--connect-wait", "5"], env)
                self._check_records(outcome, results, expected=2)
            elif kind == "bench":
                self.clouds["a"].set_faults(f"{provider}:{fault}" if fault else "")
                self.killed_at_random(outcome, ["bench", provider, "--gpus", "2", "--workload",
                                                str(self.script), "--counts", "1,2", "--name", name,
                                                "--yes", "--results", str(results), *quick], env)
                self._check_records(outcome, results, expected=2)
            elif kind == "wrong-account":
                self.killed_at_random(outcome, ["provision", provider, "--gpus", "1", "--name", name,
                                                "--yes", *quick], env)
                other = self.env(home, cloud="b")        # the same variables, another endpoint
                self.cli(outcome, ["ls"], other)
                self.cli(outcome, ["down", name, "--yes", "--timeout", "10"], other)
                self._written_off_alive(outcome, home, name)
            else:   # self-stop: rented for a few seconds, the user away meanwhile
                self.killed_at_random(outcome, ["provision", provider, "--gpus", "1", "--name", name,
                                                "--yes", "--max-hours", "0.0008", *quick], env)
                time.sleep(SELF_STOP_WAIT_S)
                watched = [e for e in self.ledger_rows(home)
                           if e.watchdog in ("self-removal", "shutdown -h")]
                if watched:     # killed before SSH answered: no watchdog, the ledger's deadline acts
                    outcome.stopped_itself = all(i.phase == "stopped" for i in self.instances(name))
        finally:
            self.clear_faults()
        self._recover(outcome, home, env, name)
        self._written_off_alive(outcome, home, name)
        self._tally(outcome, home, name, launched_before)
        return outcome

    def _recover(self, outcome: Outcome, home: Path, env: dict, name: str) -> None:
        """What a user does: look, take everything down, take the orphans down; once
        more if something is left. A transient fault may still hold meanwhile."""
        late = self.rng.choice(RECOVERY_FAULTS)
        if late:
            self.clouds["a"].set_faults(f"{outcome.provider}:{late}")
        started = time.monotonic()
        steps = [["ls"], ["down", "--all", "--yes", "--timeout", "30"], ["down", "--orphans", "--yes"],
                 ["ls"], ["down", "--all", "--yes", "--timeout", "30"], ["down", "--orphans", "--yes"]]
        for step in steps:
            self.cli(outcome, step, env)
            if step[0] == "down" and self._clean(home, name):
                break
        outcome.recovery_s = time.monotonic() - started
        self.clear_faults()

    def _clean(self, home: Path, name: str) -> bool:
        return not self.instances(name, "a") and not [e for e in self.ledger_rows(home) if e.active]

    def _written_off_alive(self, outcome: Outcome, home: Path, name: str) -> None:
        alive = {i.id for i in self.instances(name)}
        outcome.written_off_alive = max(outcome.written_off_alive, sum(
            1 for e in self.ledger_rows(home) if e.termination_confirmed and e.instance_id in alive))

    def _check_records(self, outcome: Outcome, results: Path, expected: int) -> None:
        records = 0
        for path in results.glob("*.jsonl"):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    outcome.torn += 1
                    continue
                if not isinstance(record, dict) or "status" not in record or "workload" not in record:
                    outcome.torn += 1
                else:
                    records += 1
        if outcome.killed_after is None and outcome.exit_code == 0 and records < expected:
            outcome.missing += expected - records

    def _tally(self, outcome: Outcome, home: Path, name: str, launched_before: int) -> None:
        left = self.instances(name)
        outcome.alive = len(left)
        rows = self.ledger_rows(home)
        ids = {e.instance_id for e in rows if e.instance_id}
        names = {e.provider_name for e in rows}
        mine = [x for x in self.launched[launched_before:] if x[3].startswith(f"gpubench-{name}")]
        outcome.lost = sum(1 for _, _, iid, inst_name in mine if iid not in ids and inst_name not in names)
        outcome.unsettled = sum(1 for e in rows if e.active) if not left else 0
        for inst in left:                                  # the next scenario starts clean
            outcome.notes.append(f"left alive: {inst.provider} {inst.id} ({inst.phase})")
            for cloud in self.clouds.values():
                if cloud.engine.store.get(inst.provider, inst.id) is not None:
                    cloud.engine.terminate(inst)


def summary(outcomes: list[Outcome], seconds: float) -> str:
    counts = ("alive", "lost", "written_off_alive", "unsettled", "torn", "missing", "tracebacks")
    heads = ("alive", "lost", "off-alive", "unsettled", "torn", "missing", "tracebks")
    lines = [f"{'kind':<14} {'runs':>4} {'killed':>6} " + " ".join(f"{h:>9}" for h in heads)
             + f" {'worst rec.':>10}"]
    by_kind = collections.defaultdict(list)
    for o in outcomes:
        by_kind[o.kind].append(o)
    for kind in [*KINDS, "all"]:
        group = outcomes if kind == "all" else by_kind.get(kind, [])
        if not group:
            continue
        killed = sum(1 for o in group if o.killed_after is not None)
        sums = [sum(getattr(o, c) for o in group) for c in counts]
        worst = max(o.recovery_s for o in group)
        lines.append(f"{kind:<14} {len(group):>4} {killed:>6} " + " ".join(f"{s:>9}" for s in sums)
                     + f" {worst:>9.1f}s")
    stops = [o for o in outcomes if o.kind == "self-stop" and o.stopped_itself is not None]
    if stops:
        lines.append(f"machines that stopped themselves before the user came back: "
                     f"{sum(o.stopped_itself for o in stops)} of {len(stops)}")
    lines.append(f"{len(outcomes)} scenarios in {seconds:.0f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kinds", default=",".join(KINDS), help="Which kinds of scenario to draw from.")
    ap.add_argument("--verbose", action="store_true", help="One line per scenario as it ends.")
    args = ap.parse_args(argv)
    if args.scenarios < 1:
        ap.error("--scenarios must be at least 1")
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    if not kinds or set(kinds) - set(KINDS):
        ap.error(f"--kinds: pick from {', '.join(KINDS)}")
    from gpubench.mock import MockCloud

    started = time.monotonic()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="gpubench-faults-") as tmp:
        root = Path(tmp)
        with MockCloud.start(state_dir=root / "mock-a") as a, MockCloud.start(state_dir=root / "mock-b") as b:
            campaign = Campaign(root, args.seed, {"a": a, "b": b})
            for number in range(args.scenarios):
                outcome = campaign.scenario(number, kinds)
                outcomes.append(outcome)
                if args.verbose:
                    killed = (f"killed at {outcome.killed_after:.2f}s" if outcome.killed_after is not None
                              else "finished")
                    print(f"#{number:03d} {outcome.kind:<13} {outcome.provider:<6} "
                          f"{outcome.fault or '-':<16} {killed:<17} recovery {outcome.recovery_s:5.1f}s "
                          f"{'; '.join(outcome.notes)}", flush=True)
            created = len(campaign.launched)
    print(summary(outcomes, time.monotonic() - started))
    print(f"{created} machines created at the provider in all")
    bad = sum(o.alive + o.lost + o.written_off_alive + o.torn + o.missing + o.tracebacks for o in outcomes)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
