"""The Slurm commands (sbatch, squeue, sacct, scancel, sinfo) and the few file
operations a job needs, run through one small shell that works on this machine
(gpubench on the login node) or over gpubench's own SSH connection.

Both shells give a command's stdout and stderr together, as SSH does, and each
parser in states.py picks its own lines out of that.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gpubench.launch.slurm import states
from gpubench.launch.slurm.errors import SlurmError, SlurmRefusedError
from gpubench.launch.slurm.states import JobState, Partition

COMMAND_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Result:
    code: int
    output: str  # stdout and stderr together


class Shell(Protocol):
    """Where the Slurm commands run: the login node, here or over SSH."""

    where: str  # for messages: "this machine", "alice@login.hpc.example.org"

    def run(self, argv: list[str], timeout: float = COMMAND_TIMEOUT_S, cwd: str | None = None,
            retry: bool = True) -> Result:
        """Run a command; `retry=False` for one that must not run twice (sbatch)."""
        ...

    def read(self, path: str, offset: int = 0) -> str | None:
        """The file's text from byte `offset` on; None when there is no such file."""
        ...

    def write(self, path: str, text: str) -> None:
        """Write the file, making its directory."""
        ...


class LocalShell:
    """This machine is the login node: sbatch is on PATH."""

    where = "this machine"

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = env

    def run(self, argv: list[str], timeout: float = COMMAND_TIMEOUT_S, cwd: str | None = None,
            retry: bool = True) -> Result:
        try:
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  errors="replace", timeout=timeout, cwd=cwd, env=self.env,
                                  stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            return Result(127, f"{argv[0]}: command not found")
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{argv[0]} did not answer in {timeout:.0f}s") from None
        return Result(done.returncode, done.stdout)

    def read(self, path: str, offset: int = 0) -> str | None:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return None

    def write(self, path: str, text: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")


class SshShell:
    """The login node over gpubench's SSH session. A dropped link is re-established
    (within the session's reconnect budget) and the command run again, except a
    submission, which might then be made twice."""

    def __init__(self, session) -> None:
        self.session = session  # gpubench.remote.session.RemoteSession, connected
        self.where = str(session.target)

    def _capture(self, line: str, timeout: float, retry: bool = True) -> tuple[int, str]:
        from gpubench.remote.errors import ConnectionLostError

        try:
            return self.session.conn.capture(line, timeout)
        except ConnectionLostError:
            if not retry:
                raise
            self.session.reconnect()  # raises once the reconnects are spent
            return self.session.conn.capture(line, timeout)

    def run(self, argv: list[str], timeout: float = COMMAND_TIMEOUT_S, cwd: str | None = None,
            retry: bool = True) -> Result:
        line = shlex.join(argv)
        if cwd is not None:
            line = f"cd {shlex.quote(cwd)} && {line}"
        code, output = self._capture(line, timeout, retry)
        return Result(code, output)

    def read(self, path: str, offset: int = 0) -> str | None:
        q = shlex.quote
        code, output = self._capture(f"test -f {q(path)} && tail -c +{offset + 1} {q(path)}",
                                     COMMAND_TIMEOUT_S)
        return output if code == 0 else None

    def write(self, path: str, text: str) -> None:
        q = shlex.quote
        directory = path.rsplit("/", 1)[0] or "/"
        code, output = self._capture(f"mkdir -p {q(directory)} && printf '%s' {q(text)} > {q(path)}",
                                     COMMAND_TIMEOUT_S)
        if code != 0:
            raise SlurmError(f"cannot write {path} on {self.where}: {states.one_line(output)}")


def local_env() -> dict[str, str]:
    """This machine's environment for sbatch, which hands it to the job: without the
    cloud providers' API keys, which a workload has no business with."""
    from gpubench.providers import registry

    scrubbed = registry.key_vars()
    return {k: v for k, v in os.environ.items() if k not in scrubbed}


def refused(output: str) -> SlurmRefusedError:
    return SlurmRefusedError(f"sbatch refused the job: {states.one_line(output)}")


class Slurm:
    """The Slurm verbs gpubench uses, each one command and one parser."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    def _must(self, argv: list[str], **kw) -> str:
        result = self.shell.run(argv, **kw)
        if result.code == 127 or "command not found" in result.output:
            raise SlurmError(f"{argv[0]} is not installed on {self.shell.where} (is this a Slurm "
                             "login node?)")
        if result.code != 0:
            raise SlurmError(f"{argv[0]} failed on {self.shell.where}: "
                             f"{states.one_line(result.output) or f'exit code {result.code}'}")
        return result.output

    def partition(self, name: str | None) -> Partition | None:
        output = self._must(["sinfo", "--noheader", "--format=" + "|".join(states.SINFO_FIELDS)])
        return states.parse_sinfo(output, name)

    def test_only(self, flags: list[str]) -> None:
        """sbatch --test-only: Slurm checks a job with these flags (partition, account,
        reservation, limits) and says when it would start, submitting nothing."""
        result = self.shell.run(["sbatch", "--test-only", *flags, "--wrap=true"])
        if result.code != 0:
            raise refused(result.output)

    def submit(self, script: str, cwd: str) -> str:
        result = self.shell.run(["sbatch", "--parsable", script], cwd=cwd, retry=False)
        if result.code != 0:
            raise refused(result.output)
        return states.parse_job_id(result.output)

    def queue(self, job_id: str) -> JobState | None:
        """The job as the controller holds it; None once it has forgotten it."""
        result = self.shell.run(["squeue", "--noheader", "--states=all", f"--jobs={job_id}",
                                 "--format=" + "|".join(states.SQUEUE_FIELDS)])
        if result.code != 0 and "Invalid job id" in result.output:
            return None
        if result.code != 0:
            raise SlurmError(f"squeue failed on {self.shell.where}: {states.one_line(result.output)}")
        return states.parse_squeue(result.output, job_id)

    def place_in_queue(self, job_id: str, partition: str) -> int | None:
        """1 for the next pending job of the partition to start, by Slurm's priority."""
        result = self.shell.run(["squeue", "--noheader", "--states=PENDING", f"--partition={partition}",
                                 "--sort=-p,i", "--format=%i"])
        ids = states.parse_positions(result.output) if result.code == 0 else []
        return ids.index(job_id) + 1 if job_id in ids else None

    def accounting(self, job_id: str, completion_log: bool) -> tuple[bool, JobState | None]:
        """sacct (with completion_log: sacct -c, the job completion log): whether the
        source answers at all here, and the job if it holds it yet."""
        argv = ["sacct", "--parsable2", "--noheader", "-X", f"--jobs={job_id}",
                "--format=" + ",".join(states.SACCT_FIELDS)]
        if completion_log:
            argv.insert(1, "-c")
        result = self.shell.run(argv)
        if result.code != 0 or states.accounting_off(result.output):
            return False, None
        source = states.FROM_JOBCOMP if completion_log else states.FROM_SACCT
        return True, states.parse_sacct(result.output, job_id, source)

    def cancel(self, job_id: str) -> None:
        result = self.shell.run(["scancel", job_id])
        if result.code != 0:
            raise SlurmError(f"scancel {job_id} failed on {self.shell.where}: "
                             f"{states.one_line(result.output)}")
