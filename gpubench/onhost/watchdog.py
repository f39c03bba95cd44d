"""The watchdog that runs on a rented machine: once its deadline has passed and no
gpubench sweep is connected to the machine, it stops the machine.

Standard library only: gpubench copies this file to ~/.gpubench-watchdog/ on the
machine and runs it with the machine's python3 (see watchdog.py beside it):

    python3 watchdog.py start --seconds S --provider P [--endpoint URL] [--poll S] [--base DIR]...
                              [--id-var V --key-var V --method M --path P [--body JSON]]
    python3 watchdog.py status [--base DIR]...

`start` detaches the watchdog (a session of its own, its output to the log beside
it), replacing any earlier one, and returns once it runs, printing "started PID".
`status` prints "active N" while N gpubench sweeps are connected, else "idle".

A sweep is connected while it holds a lease: an flock on <base>/leases/<lease>.lock
that gpubench/onhost/leases.py keeps for the life of the sweep's SSH connection,
each run's marker naming the lease it runs under. A sweep whose gpubench was killed,
or whose link was lost, holds none: its machine is stopped, its runs with it.

How a machine stops itself, cheapest first:
- where gpubench hands it a self-removal (from the provider's registry entry: RunPod,
  Vast.ai), the machine removes itself: it reads its own id and key from the variables
  that --id-var and --key-var name, and makes the provider's documented call: METHOD
  ENDPOINT+PATH, "{id}" in PATH replaced by its id, with `Authorization: Bearer KEY`
  and BODY as JSON where one is given (RunPod: DELETE /v2/pods/{id} with the pod's own
  $RUNPOD_API_KEY; Vast.ai: DELETE /api/v0/instances/{id}/ with $CONTAINER_API_KEY,
  the key Vast.ai gives each instance for itself). A 404 means it is already gone;
- otherwise (Lambda carries no key), or once that call keeps failing: shutdown -h now
  (through sudo -n when not root). A halted machine may still bill: the deadline in
  gpubench's ledger has the next gpubench command terminate it.

This script keeps no table of providers: what it knows of one it is told.
"""

import argparse
import fcntl
import glob
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

HOME_DIR = ".gpubench-watchdog"
STATE = "state.json"
LOG = "log"
DEFAULT_BASE = "gpubench"
SELF_REMOVAL_TRIES = 3          # failed self-removal calls before halting instead
HTTP_TIMEOUT_S = 30
# Containers keep their variables in PID 1's environment; RunPod also writes them here.
ENV_FILES = ("/etc/rp_environment", "/etc/environment")


def home_dir():
    return os.path.join(os.path.expanduser("~"), HOME_DIR)


def log(message):
    print("%s %s" % (time.strftime("%Y-%m-%d %H:%M:%S"), message), flush=True)


# -- is a gpubench sweep connected? ------------------------------------------------

def is_held(path):
    """Whether someone holds the flock on `path` (as gpubench/onhost/leases.py does)."""
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


def lease_dirs(bases):
    """<base>/leases for each base (relative to the home), and any <dir>/leases in the
    home, since a sweep's --remote-dir is not known when the watchdog starts."""
    home = os.path.expanduser("~")
    found = [os.path.join(home, b, "leases") for b in bases]
    found += glob.glob(os.path.join(home, "*", "leases"))
    return sorted(set(d for d in found if os.path.isdir(d)))


def active_leases(bases):
    held = 0
    for d in lease_dirs(bases):
        for name in os.listdir(d):
            if name.endswith(".lock") and is_held(os.path.join(d, name)):
                held += 1
    return held


# -- the machine's own id and key ---------------------------------------------------

def _pairs_from_environ_file(path):
    with open(path, "rb") as f:
        raw = f.read()
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def _pairs_from_shell_file(path):
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("export "):
                line = line[len("export "):]
            key, sep, value = line.partition("=")
            if sep and key.strip():
                out[key.strip()] = value.strip().strip("'\"")
    return out


def machine_variable(name):
    """A variable of the machine: this process's, else the container's (PID 1), else
    one of the files the provider writes them to."""
    if os.environ.get(name):
        return os.environ[name]
    sources = [("/proc/1/environ", _pairs_from_environ_file)]
    sources += [(p, _pairs_from_shell_file) for p in ENV_FILES]
    for path, read in sources:
        try:
            value = read(path).get(name)
        except OSError:
            continue
        if value:
            return value
    return None


# -- stopping ---------------------------------------------------------------------

def removal_of(args):
    """The self-removal gpubench handed over in the arguments, as a dict (id_var,
    key_var, method, path, body: None for none); None where none was: the machine halts."""
    if not (args.id_var and args.key_var and args.path):
        return None
    return {"id_var": args.id_var, "key_var": args.key_var, "method": args.method,
            "path": args.path, "body": args.body}


def self_removal_request(removal, endpoint, machine_id, key):
    """The documented call with which this machine removes itself (`removal`, see removal_of)."""
    url = endpoint.rstrip("/") + removal["path"].replace("{id}", machine_id)
    body = None if removal["body"] is None else removal["body"].encode()
    request = urllib.request.Request(url, data=body, method=removal["method"])
    request.add_header("Authorization", "Bearer " + key)
    if body is not None:
        request.add_header("Content-Type", "application/json")
    return request


def remove_self(provider, endpoint, removal):
    """Ask the provider to remove this machine. Returns (done, what happened)."""
    id_var, key_var = removal["id_var"], removal["key_var"]
    machine_id, key = machine_variable(id_var), machine_variable(key_var)
    if not machine_id or not key:
        return False, "no %s/%s on this machine" % (id_var, key_var)
    if not endpoint:
        return False, "no API endpoint given"
    try:
        with urllib.request.urlopen(self_removal_request(removal, endpoint, machine_id, key),
                                    timeout=HTTP_TIMEOUT_S) as answer:
            return True, "%s answered %d to removing %s" % (provider, answer.status, machine_id)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return True, "%s no longer has %s" % (provider, machine_id)
        return False, "%s answered %d to removing %s" % (provider, e.code, machine_id)
    except (OSError, ValueError) as e:
        return False, "cannot reach %s: %s" % (endpoint, e)


def halt():
    """shutdown -h now, through sudo -n when not root. Returns (done, what happened)."""
    command = ["shutdown", "-h", "now"]
    if os.geteuid() != 0:
        command = ["sudo", "-n"] + command
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError) as e:
        return False, "%s: %s" % (" ".join(command), e)
    return done, "%s %s" % (" ".join(command), "accepted" if done else "failed")


def stop(provider, endpoint, removal, tries):
    """Stop the machine the cheapest way this machine can: `removal` (see removal_of)
    where there is one; `tries` counts earlier attempts."""
    if removal is not None and tries < SELF_REMOVAL_TRIES:
        done, said = remove_self(provider, endpoint, removal)
        log("self-removal: " + said)
        if done or tries + 1 < SELF_REMOVAL_TRIES:
            return done
    done, said = halt()
    log("halt: " + said)
    return done


# -- the watch --------------------------------------------------------------------

def read_state():
    try:
        with open(os.path.join(home_dir(), STATE)) as f:
            state = json.load(f)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def write_state(state):
    path = os.path.join(home_dir(), STATE)
    with open(path + ".new", "w") as f:
        json.dump(state, f)
    os.replace(path + ".new", path)


def watch(args, deadline):
    """Wait for the deadline, then for the sweeps to go, then stop the machine. Ends
    when a newer watchdog replaced this one, or `give_up` seconds after its first
    attempt to stop the machine (it waits for connected sweeps as long as they last)."""
    waiting_said = False
    tries = 0
    first_try = None
    while True:
        if read_state().get("pid") != os.getpid():
            log("replaced by a newer watchdog; leaving")
            return 0
        now = time.time()
        if now < deadline:
            time.sleep(min(args.poll, deadline - now))
            continue
        if first_try is not None and now > first_try + args.give_up:
            log("giving up: the machine is still here %.0f s after the first attempt" % args.give_up)
            return 1
        held = active_leases(args.base)
        if held:
            if not waiting_said:
                log("deadline passed; %d gpubench sweep(s) connected: waiting for them" % held)
                waiting_said = True
            time.sleep(args.poll)
            continue
        log("deadline passed and no gpubench sweep is connected: stopping the machine")
        first_try = now if first_try is None else first_try
        waiting_said = False
        stop(args.provider, args.endpoint, removal_of(args), tries)
        tries += 1
        time.sleep(min(args.poll * 2 ** tries, 60))   # still here: try again, less often


def stop_earlier():
    """End the watchdog an earlier start left, if it still runs."""
    pid = read_state().get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if b"watchdog" not in f.read():
                return
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass


def start(args):
    """Detach the watchdog (double fork, own session) and return once it runs."""
    os.makedirs(home_dir(), mode=0o700, exist_ok=True)
    stop_earlier()
    deadline = time.time() + args.seconds
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(ready_r)
        os.setsid()
        if os.fork():
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        out = os.open(os.path.join(home_dir(), LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        code = 1
        try:
            write_state({"pid": os.getpid(), "deadline": deadline, "provider": args.provider,
                         "started": time.time()})
            log("watching: deadline in %.0f s, then %s" % (args.seconds, how(removal_of(args))))
            os.write(ready_w, b"ok")
            os.close(ready_w)
            code = watch(args, deadline)
        except BaseException as e:   # said in the log: nobody else would see it
            log("watchdog failed: %s: %s" % (type(e).__name__, e))
        finally:
            os._exit(code)
    os.close(ready_w)
    os.waitpid(child, 0)
    said = os.read(ready_r, 16)
    os.close(ready_r)
    if said != b"ok":
        print("watchdog did not start (see ~/%s/%s)" % (HOME_DIR, LOG))
        return 1
    print("started %s" % read_state().get("pid"))
    return 0


def how(removal):
    return "self-removal" if removal is not None else "shutdown -h"


def parser():
    """The command line (see the module docstring)."""
    top = argparse.ArgumentParser(prog="watchdog.py")
    sub = top.add_subparsers(dest="command")
    go = sub.add_parser("start")
    go.add_argument("--seconds", type=float, required=True)
    go.add_argument("--provider", required=True)
    go.add_argument("--endpoint", default="")
    go.add_argument("--poll", type=float, default=30.0)
    go.add_argument("--give-up", type=float, default=6 * 3600.0)
    # the self-removal, as gpubench hands it over (none: the machine halts)
    go.add_argument("--id-var", default="")
    go.add_argument("--key-var", default="")
    go.add_argument("--method", default="DELETE")
    go.add_argument("--path", default="")
    go.add_argument("--body", default=None)
    for p in (go, sub.add_parser("status")):
        p.add_argument("--base", action="append", default=None)
    return top


def main(argv):
    command_line = parser()
    args = command_line.parse_args(argv)
    if args.command is None:
        command_line.print_usage()
        return 2
    args.base = args.base or [DEFAULT_BASE]
    if args.command == "status":
        held = active_leases(args.base)
        print("active %d" % held if held else "idle")
        return 0
    return start(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
