"""`gpubench top NAME`: a live view of a machine's GPUs (utilisation, memory and power,
each as a short history) and of the processes that hold them: a gpubench run, or a
ghost (a process holding a GPU with no live gpubench run: a run that failed and left
its workers, something started by hand). `--kill PID` ends one, after asking.

The machine is reached as `gpubench ssh` reaches it (a ledger name, NAME:i for a
cluster's member i, or user@host[:port] with gpubench's key); the work there is done
by gpubench/onhost/gpu_top.py, shipped on the first sample and run by the machine's
python on each; the histories are drawn as the live displays of run and bench draw
theirs (cli/gpu_history.py). Every loop is bounded: --once takes one sample, the live view ends
with Ctrl-C, and each sample's SSH call has a deadline.
"""

from __future__ import annotations

import json
import shlex
import time
from typing import Annotated, Callable, Optional

import typer

from gpubench.cli.gpu_history import History, figures, gib
from gpubench.cli.options import DocumentFormatOpt, InstanceNameArg, YesOpt
from gpubench.cli.render import out

REMOTE_PATH = "~/.gpubench-top/gpu_top.py"
KILL_GRACE_S = 5.0                 # between SIGTERM and SIGKILL
CALL_TIMEOUT_S = 45.0              # one sample (nvidia-smi answers in 20 s or is given up)
CONNECT_WAIT_S = 20.0
PYTHON = "python3"
COMMAND_WIDTH = 60                 # a command line's characters in plain lines

INTERVAL_HELP = "Seconds between samples of the live view."
ONCE_HELP = "Take one sample, print it and exit."
KILL_HELP = (f"End process PID (one that holds a GPU) after asking: SIGTERM, then SIGKILL "
             f"after {KILL_GRACE_S:.0f} s.")


def top(
    name: InstanceNameArg,
    interval: Annotated[float, typer.Option("--interval", min=0.1, help=INTERVAL_HELP)] = 2.0,
    once: Annotated[bool, typer.Option("--once", help=ONCE_HELP)] = False,
    kill: Annotated[Optional[int], typer.Option("--kill", metavar="PID", min=1,
                                                help=KILL_HELP)] = None,
    yes: YesOpt = False,
    fmt: DocumentFormatOpt = "table",
) -> None:
    """A live view of NAME's GPUs and the processes on them, ghosts (a GPU held with no
    live gpubench run) marked; --kill PID ends one."""
    from gpubench.cli.output import output_for

    output = output_for(fmt)
    machine = Machine.connect(name)
    try:
        if kill is not None:
            end_process(machine, kill, yes, output)
        else:
            watch(machine, interval, once, output.as_json)
    finally:
        machine.close()


# -- the machine's end ---------------------------------------------------------------------

class Machine:
    """One SSH connection to the machine, and the on-host script's answers over it."""

    def __init__(self, conn, name: str, python: str = PYTHON) -> None:
        self.conn = conn
        self.name = name
        self.python = python
        self.shipped = False

    @classmethod
    def connect(cls, name: str) -> "Machine":
        from gpubench import paths
        from gpubench.remote.connection import ConnectOptions, SshConnection
        from gpubench.remote.errors import SshError

        target = target_of(name)
        conn = SshConnection(target, paths.known_hosts_path(),
                             ConnectOptions(wait=CONNECT_WAIT_S, retry_pause=1.0))
        try:
            conn.open()
        except SshError as e:
            raise type(e)(f"{name}: {e}") from None
        return cls(conn, name)

    def close(self) -> None:
        self.conn.close()

    def _call(self, args: str) -> dict:
        from gpubench import onhost
        from gpubench.remote.errors import ConnectionLostError
        from gpubench.remote.ship import ship_and_run

        if self.shipped:
            command = f"{self.python} {REMOTE_PATH} {args}"
        else:
            command = ship_and_run(self.python, onhost.script_path("gpu_top"), REMOTE_PATH, args)
        try:
            code, text = self.conn.capture(command, CALL_TIMEOUT_S)
        except ConnectionLostError:
            self.conn.open()            # once: a second loss is the caller's error
            code, text = self.conn.capture(command, CALL_TIMEOUT_S)
        answer = read_answer(text, code, self.name, self.python)
        self.shipped = True
        return answer

    def sample(self) -> dict:
        from gpubench.onhost.gpu_top import DEFAULT_RUNS

        return self._call(f"sample --runs {shlex.quote(DEFAULT_RUNS)}")

    def kill(self, pid: int, grace: float, started: int | None) -> dict:
        return self._call(f"kill {pid} {grace:g}" + (f" {started}" if started is not None else ""))


def target_of(name: str):
    """The SshTarget NAME means, as `gpubench ssh` reads it: user@host[:port], a ledger
    instance, a cluster's head, or NAME:i for its member i."""
    from gpubench.errors import UsageError
    from gpubench.remote.cluster import member_instance
    from gpubench.remote.target import looks_like_spec
    from gpubench.remote.targets import host_from_entry, resolve
    from gpubench.store.ledger import Ledger

    if looks_like_spec(name):
        return resolve(name).target
    with Ledger() as ledger:
        entry = ledger.find(member_instance(ledger, name))   # one line for an unknown name
    if entry.termination_confirmed or not entry.may_answer_ssh:
        raise UsageError(f"{name} is {entry.status}: no machine to watch (see 'gpubench ls')")
    if not entry.ssh_host:
        raise UsageError(f"{name} has no SSH address yet ({entry.status}); wait for it to boot "
                         f"(see 'gpubench ls')")
    return host_from_entry(entry).target


def read_answer(text: str, code: int, name: str, python: str = PYTHON) -> dict:
    """The on-host script's JSON line; its error (no nvidia-smi) as one line."""
    from gpubench.errors import GpubenchError
    from gpubench.onhost.gpu_top import MARK, NOT_FOUND

    line = next((ln for ln in text.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        if code == 127:
            raise GpubenchError(f"{name}: '{python}' not found on the machine: top needs its python")
        last = (text.strip().splitlines() or ["no output"])[-1]
        raise GpubenchError(f"{name}: top's probe gave no answer: {last[:200]}")
    try:
        answer = json.loads(line[len(MARK):])
    except ValueError:
        raise GpubenchError(f"{name}: top's probe gave an answer that is not JSON") from None
    error = answer.get("error")
    if error == NOT_FOUND:
        raise GpubenchError(f"no NVIDIA GPU on {name} (nvidia-smi not found)")
    if error and "pid" not in answer:
        raise GpubenchError(f"{name}: {error}")
    return answer


# -- what is shown -------------------------------------------------------------------------

def pid_text(proc: dict) -> str:
    return f"pid {proc['pid']}" if proc.get("visible") else f"host pid {proc['pid']}"


def run_text(proc: dict) -> str:
    """A live gpubench run's id, or GHOST and why; '?' where it cannot be told."""
    state, run = proc.get("state"), proc.get("run")
    if state == "live":
        return f"gpubench run {run}"
    if state == "untagged":
        return "GHOST (not a gpubench run)"
    if state == "ended":
        return f"GHOST (gpubench run {run} has ended)"
    if state == "orphaned":
        return f"GHOST (gpubench run {run}: its controller is gone)"
    if proc.get("ghost"):
        return "GHOST (no gpubench run is live here)"
    return "? (a gpubench run is live here)"      # a pid not seen, or another user's process


def headline(name: str, sample: dict) -> str:
    gpus, procs = sample.get("gpus", []), sample.get("procs", [])
    ghosts = sum(1 for p in procs if p.get("ghost"))
    clock = time.strftime("%H:%M:%S", time.localtime(sample.get("t", time.time())))
    return (f"{name}: {_count(len(gpus), 'GPU')}, {_count(len(procs), 'process', 'processes')}, "
            f"{_count(ghosts, 'ghost')} (sampled {clock})")


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _by_gpu(sample: dict) -> dict:
    found: dict = {}
    for proc in sample.get("procs", []):
        found.setdefault(proc.get("gpu"), []).append(proc)
    return found


def plain_lines(name: str, sample: dict, history: History) -> list[str]:
    """The sample as lines of text (no terminal): a line per GPU, one per process under it."""
    lines = [headline(name, sample)]
    procs = _by_gpu(sample)
    for gpu in sample.get("gpus", []):
        util, memory, power = figures(history, gpu)
        lines.append(f"GPU {gpu['index']}  {gpu['name']}  util {util}  memory {memory}  power {power}")
        lines += [_plain_proc(p) for p in procs.get(gpu["index"], [])]
    lines += [_plain_proc(p) for p in procs.get(None, [])]        # a GPU nvidia-smi did not list
    return lines


def _plain_proc(proc: dict) -> str:
    command = proc.get("command") or ""
    if proc.get("visible") and len(command) > COMMAND_WIDTH:
        command = command[:COMMAND_WIDTH - 3] + "..."
    memory = f"  {gib(proc['used_mib'])} GiB" if proc.get("used_mib") is not None else ""
    user = f"{proc['user']}: " if proc.get("user") else ""
    return f"  {pid_text(proc)}{memory}  {run_text(proc)}  {user}{command}"


def rich_view(name: str, sample: dict, history: History, interval: float | None = None):
    """The sample as rich tables: the GPUs with their histories, then the processes."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    procs = _by_gpu(sample)
    gpus = Table(title=headline(name, sample), title_justify="left", expand=False)
    for column in ("GPU", "name", "utilisation", "memory", "power", "processes"):
        gpus.add_column(column, no_wrap=True)
    for gpu in sample.get("gpus", []):
        held = procs.get(gpu["index"], [])
        ghosts = sum(1 for p in held if p.get("ghost"))
        gpus.add_row(str(gpu["index"]), gpu["name"], *figures(history, gpu),
                     Text(f"{len(held)}" + (f" ({_count(ghosts, 'ghost')})" if ghosts else ""),
                          style="bold red" if ghosts else ""))
    parts: list = [gpus]
    if sample.get("procs"):
        table = Table(expand=False)
        for column in ("GPU", "PID", "GPU memory", "user", "command", "gpubench run"):
            table.add_column(column, no_wrap=column != "command", overflow="ellipsis")
        for proc in sample["procs"]:
            used = proc.get("used_mib")
            table.add_row("?" if proc.get("gpu") is None else str(proc["gpu"]), pid_text(proc),
                          "n/a" if used is None else f"{gib(used)} GiB", proc.get("user") or "",
                          proc.get("command") or "",
                          Text(run_text(proc), style="bold red" if proc.get("ghost") else "green"))
        parts.append(table)
    else:
        parts.append(Text("no process holds a GPU"))
    if interval is not None:
        parts.append(Text(f"every {interval:g} s; Ctrl-C ends", style="dim"))
    return Group(*parts)


# -- the loop --------------------------------------------------------------------------------

def watch(machine: Machine, interval: float, once: bool, as_json: bool,
          console=None, sleep: Callable[[float], None] = time.sleep,
          clock: Callable[[], float] = time.monotonic) -> None:
    """Sample every `interval` seconds until Ctrl-C (once with `once`): JSON lines, the
    live tables on a terminal, else plain lines."""
    from rich.console import Console

    console = console or Console(highlight=False, soft_wrap=False)
    history = History()
    live = None
    try:
        while True:
            started = clock()
            sample = machine.sample()
            history.add(sample)
            if as_json:
                out(json.dumps({"name": machine.name, **sample}))
            elif console.is_terminal and once:
                console.print(rich_view(machine.name, sample, history))
            elif console.is_terminal:
                view = rich_view(machine.name, sample, history, interval)
                if live is None:
                    from rich.live import Live

                    live = Live(view, console=console, auto_refresh=False, transient=False)
                    live.start()
                live.update(view, refresh=True)
            else:
                out("\n".join(plain_lines(machine.name, sample, history)))
            if once:
                return
            if not as_json and not console.is_terminal:
                out()
            sleep(max(0.0, interval - (clock() - started)))
    except KeyboardInterrupt:
        return                      # Ctrl-C is how the live view ends
    finally:
        if live is not None:
            live.stop()


# -- --kill ----------------------------------------------------------------------------------

def end_process(machine: Machine, pid: int, yes: bool, output) -> None:
    """End `pid` (a process that holds a GPU, visible on the machine) after asking."""
    from gpubench.cli.confirm import confirm_or_stop
    from gpubench.errors import GpubenchError, UsageError

    name = machine.name
    sample = machine.sample()
    held = [p for p in sample.get("procs", []) if p["pid"] == pid]
    if not held:
        raise UsageError(f"pid {pid} holds no GPU on {name} (see 'gpubench top {name} --once')")
    proc = held[0]
    if not proc.get("visible") and sample.get("host_pid_namespace"):
        output.say(f"pid {pid} on {name} had already exited")
        output.emit({"name": name, "pid": pid, "found": False, "gone": True, "signal": None})
        return
    if not proc.get("visible"):
        raise GpubenchError(f"pid {pid} on {name} is the host's process id, not visible on the "
                            f"machine (a container): it cannot be ended from there")
    on = ", ".join(str(p["gpu"]) for p in held if p.get("gpu") is not None) or "?"
    command = proc.get("command") or ""
    if len(command) > COMMAND_WIDTH:
        command = command[:COMMAND_WIDTH - 3] + "..."
    confirm_or_stop(f"End pid {pid} ({command}) on {name}'s GPU {on}, {run_text(proc)}?",
                    f"--kill asks before it ends a process: pass --yes to end pid {pid} on {name}",
                    "nothing ended", yes)
    answer = machine.kill(pid, KILL_GRACE_S, proc.get("started"))
    document = {"name": name, "pid": pid, "command": proc.get("command"), "gpus": on,
                "ghost": proc.get("ghost"), "run": proc.get("run"), **answer}
    if answer.get("error"):
        raise GpubenchError(f"pid {pid} on {name}: {answer['error']}")
    if not answer.get("gone"):
        raise GpubenchError(f"pid {pid} on {name} is still running after SIGKILL")
    if not answer.get("found"):
        output.say(f"pid {pid} on {name} had already exited")
    elif answer.get("signal") == "SIGKILL":
        output.say(f"pid {pid} on {name} ended by SIGKILL ({KILL_GRACE_S:.0f} s after SIGTERM); "
                   f"GPU {on} is free of it")
    else:
        output.say(f"pid {pid} on {name} ended by SIGTERM; GPU {on} is free of it")
    output.emit(document)


def register(app: typer.Typer) -> None:
    app.command("top")(top)
