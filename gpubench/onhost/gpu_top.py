"""What a machine's GPUs are doing and which processes hold them (`gpubench top NAME`),
and the one way `top --kill` ends such a process.

Standard library only: shipped to the machine and run by its python as
`python gpu_top.py sample [--runs DIR]` (one JSON line, after MARK, per call) or
`python gpu_top.py kill PID GRACE [STARTED]` (one JSON line: whether it is gone).

A sample asks nvidia-smi for each GPU's utilisation, memory and power, and for the
compute processes on each (by the GPU's uuid), then looks each process id up in
/proc: its command line, its user, and whether it is a gpubench run. A run's
processes carry GPUBENCH_RUN=<run id> in their environment (stop_tagged.py); the run
is live while its marker <runs>/<run>.running is there and the lease it names
(<base>/leases/<lease>.lock, leases.py) is held by its controller's connection. A
ghost is a process holding a GPU with no live gpubench run: untagged, tagged with a
run whose marker is gone, or orphaned (its controller is gone).

nvidia-smi gives the process ids of the host's pid namespace. In a container those
are not this container's: such a process is reported "not visible here", with the
device it holds, and is never signalled. A pid that /proc does show is trusted as
the process nvidia-smi means when this is the host's pid namespace, or when the
process holds an NVIDIA device open (or, on the mock cloud, whose machines have no
such devices, carries MOCK_DEVICE_VAR=<the GPU's index>).
"""

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time

MARK = "@gpubench-top "
TAG_VAR = "GPUBENCH_RUN"                  # stop_tagged.TAG_VAR: a run's processes carry it
RECORD_VAR = "GPUBENCH_RECORD_FILE"       # launch.base.RECORD_ENV: <base>/runs/<run>.json
MOCK_DEVICE_VAR = "GPUBENCH_MOCK_GPU"     # the mock cloud's stand-in for an open /dev/nvidiaN
DEFAULT_RUNS = "gpubench/runs"            # the remote layout's runs, relative to the home
HOST_PID_NS = "pid:[4026531836]"          # the kernel's initial pid namespace (PROC_PID_INIT_INO)
NOT_FOUND = "nvidia-smi not found"
GPU_FIELDS = ("index", "uuid", "name", "utilization.gpu", "memory.used", "memory.total",
              "power.draw")
APP_FIELDS = ("gpu_uuid", "pid", "used_memory")
SMI_TIMEOUT_S = 20
COMMAND_CHARS = 300


# -- nvidia-smi's answers --------------------------------------------------------------

def number(text):
    """A figure nvidia-smi printed with nounits, or None for [N/A], [Not Supported],
    [Insufficient Permissions] and the like."""
    text = (text or "").strip()
    try:
        return float(text)
    except ValueError:
        return None


def csv_rows(text, width):
    """The lines of a csv,noheader answer with `width` fields each (others, such as
    'No running processes found', are left out)."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == width:
            rows.append(cells)
    return rows


def parse_gpus(text):
    gpus = []
    for index, uuid, name, util, used, total, power in csv_rows(text, len(GPU_FIELDS)):
        try:
            i = int(index)
        except ValueError:
            continue
        gpus.append({"index": i, "uuid": uuid, "name": name, "util": number(util),
                     "mem_used": number(used), "mem_total": number(total), "power": number(power)})
    return gpus


def parse_apps(text):
    apps = []
    for uuid, pid, used in csv_rows(text, len(APP_FIELDS)):
        try:
            p = int(pid)
        except ValueError:
            continue
        apps.append({"uuid": uuid, "pid": p, "used_mib": number(used)})
    return apps


def smi(args, which=shutil.which):
    """(exit code, stdout, stderr) of nvidia-smi ARGS; None when there is no nvidia-smi."""
    tool = which("nvidia-smi")
    if tool is None:
        return None
    try:
        done = subprocess.run([tool, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, universal_newlines=True,
                              timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, "", str(e)
    return done.returncode, done.stdout, done.stderr


def ask_nvidia_smi(run=smi):
    """(GPU csv, apps csv) or an error line."""
    gpus = run(["--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader,nounits"])
    if gpus is None:
        return None, None, NOT_FOUND
    code, out, err = gpus
    if code != 0:
        last = (err.strip() or out.strip() or "no output").splitlines()[-1]
        return None, None, "nvidia-smi failed: " + last[:200]
    apps = run(["--query-compute-apps=" + ",".join(APP_FIELDS), "--format=csv,noheader,nounits"])
    if apps is None or apps[0] != 0:
        return out, "", None            # the GPUs without their processes beats nothing
    return out, apps[1], None


# -- /proc -------------------------------------------------------------------------------

def _read(path, binary=False):
    try:
        with open(path, "rb" if binary else "r") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def environ(proc, pid):
    """The process's environment; None where it cannot be read (another user's)."""
    raw = _read("%s/%d/environ" % (proc, pid), binary=True)
    if raw is None:
        return None
    found = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            found[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return found


def command_line(proc, pid):
    raw = _read("%s/%d/cmdline" % (proc, pid), binary=True) or b""
    words = [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]
    text = " ".join(words) or "[%s]" % ((_read("%s/%d/comm" % (proc, pid)) or "?").strip())
    return text if len(text) <= COMMAND_CHARS else text[:COMMAND_CHARS - 3] + "..."


def state_and_start(proc, pid):
    """(one-letter state, start time in clock ticks) from /proc/PID/stat; (None, None)
    when there is no such process."""
    stat = _read("%s/%d/stat" % (proc, pid))
    if not stat:
        return None, None
    rest = stat[stat.rfind(")") + 2:].split()     # the command name may hold spaces
    try:
        return rest[0], int(rest[19])
    except (IndexError, ValueError):
        return None, None


def alive(proc, pid):
    state, _ = state_and_start(proc, pid)
    return state is not None and state not in ("Z", "X")


def user_of(proc, pid):
    try:
        uid = os.stat("%s/%d" % (proc, pid)).st_uid
    except OSError:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def holds_device(proc, pid):
    """Whether the process has an NVIDIA device open (False where its fds cannot be read)."""
    fd_dir = "%s/%d/fd" % (proc, pid)
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(os.path.join(fd_dir, fd)).startswith("/dev/nvidia"):
                return True
        except OSError:
            pass
    return False


def host_pid_namespace(proc="/proc"):
    """True in the host's pid namespace, False in another (a container's), None unknown."""
    try:
        return os.readlink(proc + "/self/ns/pid") == HOST_PID_NS
    except OSError:
        return None


# -- gpubench's runs ---------------------------------------------------------------------

def lease_held(path):
    """leases.is_held: someone holds the flock on `path`."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def run_state(run, env, runs_dir):
    """'live', 'orphaned' (marker there, its controller's lease let go) or 'ended' (no
    marker) for the run `run` a process is tagged with."""
    record = env.get(RECORD_VAR)
    folder = os.path.dirname(record) if record else runs_dir
    marker = os.path.join(folder, run + ".running")
    lease = _read(marker)
    if lease is None:
        return "ended"
    lease = lease.strip()
    leases_dir = os.path.join(os.path.dirname(os.path.abspath(folder)), "leases")
    if lease and lease_held(os.path.join(leases_dir, lease + ".lock")):
        return "live"
    return "orphaned"


# -- a sample ----------------------------------------------------------------------------

def describe(app, gpu, proc, runs_dir, host_ns):
    """One process on one GPU: who it is and whether it is a ghost."""
    pid = app["pid"]
    found = {"pid": pid, "gpu": gpu["index"] if gpu else None, "uuid": app["uuid"],
             "used_mib": app["used_mib"]}
    here = alive(proc, pid)
    env = environ(proc, pid) if here else None
    mock_device = env is not None and gpu is not None and \
        str(gpu["index"]) in (env.get(MOCK_DEVICE_VAR) or "").split(",")
    if not here or not (host_ns or mock_device or holds_device(proc, pid)):
        where = "GPU %s" % found["gpu"] if gpu else app["uuid"]
        if gpu:
            where += " (%s, /dev/nvidia%s)" % (gpu["name"], gpu["index"])
        said = ("exited since nvidia-smi listed it on %s" if host_ns and not here
                else "not visible here: holds %s") % where
        found.update(visible=False, command=said, user=None, run=None, state="unknown",
                     ghost=None, started=None)
        return found
    run = (env or {}).get(TAG_VAR) or None
    if env is None:
        state = "unknown"               # another user's: whose run it is cannot be read
    else:
        state = run_state(run, env, runs_dir) if run else "untagged"
    found.update(visible=True, command=command_line(proc, pid), user=user_of(proc, pid),
                 run=run, state=state, ghost=None if state == "unknown" else state != "live",
                 started=state_and_start(proc, pid)[1])
    return found


def live_runs(runs_dir):
    try:
        names = os.listdir(runs_dir)
    except OSError:
        return []
    return sorted(n[:-len(".running")] for n in names if n.endswith(".running"))


def build_sample(gpu_csv, apps_csv, runs_dir=DEFAULT_RUNS, proc="/proc", host_ns=None,
                 now=None):
    """The sample as `top` reads it, from nvidia-smi's two answers and /proc."""
    gpus = parse_gpus(gpu_csv)
    by_uuid = {g["uuid"]: g for g in gpus}
    runs_dir = os.path.expanduser(runs_dir)
    procs = [describe(app, by_uuid.get(app["uuid"]), proc, runs_dir, host_ns)
             for app in parse_apps(apps_csv)]
    markers = live_runs(runs_dir)
    if not markers and not any(p["state"] == "live" for p in procs):
        for p in procs:                 # nothing of gpubench's runs here: whoever it is, a ghost
            if p["state"] == "unknown":
                p["ghost"] = True
    return {"t": time.time() if now is None else now, "gpus": gpus, "procs": procs,
            "runs": markers, "host_pid_namespace": host_ns}


def sample(runs_dir=DEFAULT_RUNS, run=smi, proc="/proc"):
    gpu_csv, apps_csv, error = ask_nvidia_smi(run)
    if error:
        return {"t": time.time(), "error": error}
    return build_sample(gpu_csv, apps_csv, runs_dir, proc, host_pid_namespace(proc))


# -- ending one --------------------------------------------------------------------------

def _gone(proc, pid, started):
    state, start = state_and_start(proc, pid)
    return state is None or state in ("Z", "X") or (started is not None and start != started)


def _wait_gone(proc, pid, started, seconds):
    deadline = time.time() + seconds
    while not _gone(proc, pid, started):
        if time.time() >= deadline:
            return False
        time.sleep(0.1)
    return True


def kill(pid, grace, started=None, proc="/proc"):
    """SIGTERM, up to `grace` seconds to exit, then SIGKILL. `started` (the start time a
    sample saw) keeps a process that took the pid since from being signalled."""
    said = {"pid": pid, "signal": None}
    if _gone(proc, pid, started):
        return dict(said, found=False, gone=True)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 3.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return dict(said, found=True, gone=True)
        except OSError as e:
            return dict(said, found=True, gone=False, error="cannot signal it: %s" % e.strerror)
        said["signal"] = sig.name
        if _wait_gone(proc, pid, started, wait):
            return dict(said, found=True, gone=True)
    return dict(said, found=True, gone=False)


def main(argv):
    if argv[:1] == ["sample"]:
        runs = argv[2] if argv[1:2] == ["--runs"] and len(argv) > 2 else DEFAULT_RUNS
        answer = sample(runs)
    elif argv[:1] == ["kill"] and len(argv) in (3, 4):
        answer = kill(int(argv[1]), float(argv[2]), int(argv[3]) if len(argv) == 4 else None)
    else:
        print("usage: gpu_top.py sample [--runs DIR] | kill PID GRACE [STARTED]", file=sys.stderr)
        return 2
    print(MARK + json.dumps(answer), flush=True)
    return 1 if answer.get("error") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
