"""Which sweep controls which run on a machine, so that one sweep never stops
another's runs when several share a machine and a remote directory.

A sweep holds a lease while its SSH connection lives: `hold` takes an exclusive
flock on <leases>/<lease>.lock and then reads its stdin, which sshd closes when
the connection ends, cleanly or not (gpubench killed, the link cut), and the
lock goes with the process. Each run's marker <runs>/<run>.running holds the
lease it was started under. `orphans` prints the runs whose lease nobody holds
any more (and those of the asking sweep's own earlier connections): their
controller is gone, so they may be stopped.

Standard library only: the same source is imported here and run by the
machine's python: `python -c SOURCE hold LEASES LEASE RUNS` first prints the
runs left over (as `orphans ID...`, for the controller of LEASE), then takes
the lease and holds it.
"""

import fcntl
import os
import sys
import time

HELD = "lease held"
ORPHANS = "orphans"
STALE_S = 60  # an unreferenced, unheld lock file older than this is removed


def lock_path(leases_dir, lease):
    return os.path.join(leases_dir, lease + ".lock")


def controller_of(lease):
    """A lease is CONTROLLER.GENERATION: one controller (sweep), one per connection."""
    return lease.split(".", 1)[0]


def hold(leases_dir, lease):
    """Hold the lease until stdin closes, that is until the SSH connection ends."""
    os.makedirs(leases_dir, exist_ok=True)
    with open(lock_path(leases_dir, lease), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        print(HELD, flush=True)
        sys.stdin.read()


def is_held(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False  # never taken, or tidied away: nobody holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # also releases the lock just taken
    return False


def orphans(runs_dir, leases_dir, controller):
    """The run ids whose controller is gone, or is `controller` itself (which asks
    only while it runs nothing: a run of its own is one a lost connection left)."""
    found, referenced = [], set()
    names = sorted(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else []
    for name in names:
        if not name.endswith(".running"):
            continue
        try:
            with open(os.path.join(runs_dir, name)) as f:
                lease = f.read().strip()
        except OSError:
            continue
        referenced.add(lease)
        if (not lease or controller_of(lease) == controller
                or not is_held(lock_path(leases_dir, lease))):
            found.append(name[:-len(".running")])
    tidy(leases_dir, referenced)
    return found


def tidy(leases_dir, referenced):
    if not os.path.isdir(leases_dir):
        return
    now = time.time()
    for name in os.listdir(leases_dir):
        path = os.path.join(leases_dir, name)
        if not name.endswith(".lock") or name[:-len(".lock")] in referenced:
            continue
        try:
            if now - os.path.getmtime(path) > STALE_S and not is_held(path):
                os.remove(path)
        except OSError:
            pass


def main(argv):
    if argv[:1] == ["hold"] and len(argv) == 4:
        leases_dir, lease, runs_dir = argv[1:]
        print(" ".join([ORPHANS, *orphans(runs_dir, leases_dir, controller_of(lease))]), flush=True)
        hold(leases_dir, lease)
        return 0
    print("usage: hold LEASES LEASE RUNS", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
