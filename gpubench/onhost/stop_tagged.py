"""Stop every process whose environment carries one of the given run ids.

torchrun starts its workers in sessions of their own, so killing torchrun's
process group does not reach them; the run id in their inherited environment
does. Standard library only: the same source runs here (imported) and on a
remote machine (`python -c SOURCE GRACE ID...`).
"""

import os
import signal
import sys
import time

TAG_VAR = "GPUBENCH_RUN"


def tagged(run_ids):
    """The pids whose environment holds GPUBENCH_RUN=<one of run_ids>."""
    tags = {("%s=%s" % (TAG_VAR, i)).encode() for i in run_ids}
    me, found = os.getpid(), set()
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != me:
            try:
                with open("/proc/%s/environ" % d, "rb") as f:
                    if tags & set(f.read().split(b"\0")):
                        found.add(int(d))
            except OSError:
                pass
    return found


def _send(sig, pids):
    for p in pids:
        try:
            os.kill(p, sig)
        except OSError:
            pass


def stop(run_ids, grace):
    """SIGTERM, up to `grace` seconds to exit, then SIGKILL. Returns how many were found."""
    pids = tagged(run_ids)
    _send(signal.SIGTERM, pids)
    deadline = time.time() + grace
    while time.time() < deadline and tagged(run_ids):
        time.sleep(0.2)
    _send(signal.SIGKILL, tagged(run_ids))
    return len(pids)


if __name__ == "__main__":
    print(stop(sys.argv[2:], float(sys.argv[1])))
