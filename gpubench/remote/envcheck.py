"""What the machine has: python, torch and whether it sees CUDA, the GPUs
nvidia-smi lists, free disk, the size of /dev/shm, and the tools a run needs
(rsync, setsid, timeout).

Checked once per machine: the answer is kept in the remote state directory and
read back on later sweeps, unless something was missing last time.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from gpubench.remote.connection import SshConnection
from gpubench.remote.errors import RemoteEnvError

MARK = "@gpubench-env "
CACHED_MARK = "@gpubench-env-cached "
LOW_DISK_BYTES = 10 * 1024**3
# NCCL between the GPUs of one machine goes through /dev/shm; Docker's default of
# 64 MB makes multi-GPU runs fail or crawl ("Error while creating shared memory").
LOW_SHM_BYTES = 1024**3

# Runs with the remote python; stdlib only apart from the torch it looks for.
PROBE = r'''
import json, os, shutil, subprocess, sys
info = {"python": sys.version.split()[0], "cpu_count": os.cpu_count(), "torch": None,
        "cuda_available": False, "gpus": [], "free_disk_bytes": shutil.disk_usage(".").free,
        "tools": {t: bool(shutil.which(t)) for t in ("rsync", "setsid", "timeout")},
        "shm_bytes": shutil.disk_usage("/dev/shm").total if os.path.isdir("/dev/shm") else None}
try:
    import torch
    info["torch"] = torch.__version__
    info["cuda_available"] = bool(torch.cuda.is_available())
except Exception as e:
    info["torch_error"] = (str(e).splitlines() or [type(e).__name__])[0][:200]
if shutil.which("nvidia-smi"):
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            info["gpus"] = [l.strip() for l in out.stdout.splitlines() if l.strip()]
    except Exception:
        pass
line = json.dumps(info, sort_keys=True)
if info["torch"] and all(info["tools"].values()):
    with open(sys.argv[1], "w") as f:
        f.write(line + "\n")
print("@gpubench-env " + line)
'''


@dataclass(frozen=True)
class RemoteEnv:
    python: str
    torch: str | None
    cuda_available: bool
    gpus: list[str] = field(default_factory=list)
    free_disk_bytes: int = 0
    cpu_count: int = 1
    tools: dict = field(default_factory=dict)
    torch_error: str | None = None
    cached: bool = False
    shm_bytes: int | None = None  # None: not known (no /dev/shm, or an older check)

    def missing(self) -> list[str]:
        """What stops every run."""
        gaps = []
        if not self.torch:
            gaps.append(f"torch ({self.torch_error or 'not installed'})")
        gaps += [tool for tool, present in sorted(self.tools.items()) if not present]
        return gaps

    def warnings(self) -> list[str]:
        notes = []
        if self.gpus and not self.cuda_available:
            notes.append(f"torch {self.torch} does not see CUDA although nvidia-smi lists "
                         f"{len(self.gpus)} GPU(s); runs will use the CPU")
        if not self.gpus:
            notes.append("no NVIDIA GPU found (nvidia-smi); each 'GPU' is a CPU process")
        if self.free_disk_bytes < LOW_DISK_BYTES:
            notes.append(f"only {self.free_disk_bytes / 1024**3:.1f} GB of disk free")
        if len(self.gpus) > 1 and self.shm_bytes is not None and self.shm_bytes < LOW_SHM_BYTES:
            notes.append(f"/dev/shm is only {self.shm_bytes / 1024**2:.0f} MB: NCCL between this "
                         "machine's GPUs may fail or slow down (a container needs --shm-size=8g "
                         "or --ipc=host)")
        return notes

    def summary(self) -> str:
        gpus = f"{len(self.gpus)}x {self.gpus[0]}" if self.gpus else "no GPU"
        cuda = "sees CUDA" if self.cuda_available else "no CUDA"
        return (f"Python {self.python}, torch {self.torch or 'missing'} ({cuda}), {gpus}, "
                f"{self.free_disk_bytes / 1024**3:.0f} GB free"
                + (" (checked before)" if self.cached else ""))


def check(conn: SshConnection, python: str, state_dir: str, timeout: float = 120.0) -> RemoteEnv:
    """The machine's environment: the kept answer when there is one, else a fresh probe."""
    cache = f"{state_dir}/env-{_slug(python)}.json"
    q = shlex.quote
    command = (f"mkdir -p {q(state_dir)} && "
               f"{{ test -s {q(cache)} && printf '%s' {q(CACHED_MARK)} && cat {q(cache)} || "
               f"{python} -c {q(PROBE)} {q(cache)}; }}")
    code, output = conn.capture(command, timeout)
    line = next((ln for ln in output.splitlines() if ln.startswith((MARK, CACHED_MARK))), None)
    if line is None:
        if code == 127 or "not found" in output:
            raise RemoteEnvError(f"remote environment on {conn.target}: missing python "
                                 f"('{python}' not found; choose one with --remote-python)")
        last = (output.strip().splitlines() or [f"exit code {code}"])[-1]
        raise RemoteEnvError(f"remote environment check on {conn.target} failed: {last}")
    cached = line.startswith(CACHED_MARK)
    info = json.loads(line.split(" ", 1)[1])
    env = RemoteEnv(info["python"], info.get("torch"), bool(info.get("cuda_available")),
                    list(info.get("gpus") or []), int(info.get("free_disk_bytes") or 0),
                    int(info.get("cpu_count") or 1), dict(info.get("tools") or {}),
                    info.get("torch_error"), cached, info.get("shm_bytes"))
    if env.missing():
        raise RemoteEnvError(f"remote environment on {conn.target}: missing "
                             + ", ".join(env.missing()) + f" (python: {python})")
    return env


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)[-60:] or "python"
