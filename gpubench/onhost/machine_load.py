"""How busy the machine is around a run, and how much memory the run holds.

Before a run: the 1-minute load average over the cores, and the share of the
cores busy over a fifth of a second (the run not started yet, so that is other
work; the load average still carries the previous run's last minute). Locally
that window is mostly not waited: it starts when gpubench started or the
previous run ended, less the CPU gpubench itself used since. While it runs:
the memory its processes hold (RSS, summed over every process carrying the
run's tag) and the least memory the machine has available, sampled. After it:
/proc/stat's busy time over the run, less the CPU time the run's own processes
got, is the share other processes took.

Standard library only, Linux's /proc: imported here for a local run; on a
remote machine the same source runs as `python -c SOURCE before FILE` (before
the run) and `python -c SOURCE watch RUN_ID FILE` (beside it, until stopped).
"""

import json
import os
import signal
import sys
import time

TAG_VAR = "GPUBENCH_RUN"  # stop_tagged's: every process of a run carries it
MOCK_VAR = "GPUBENCH_MOCK_INSTANCE"  # set in every session of a mock cloud instance
BEFORE_S = 0.2  # how long the machine is watched before a run starts (2.5% steps on 2 cores)
INTERVAL_S = 0.5  # between samples while it runs
BUSY_SHARE = 0.25  # other work on this share of the cores makes the machine busy
STALE_S = 10.0  # a mark() older than this is not "as the run started" (a question was asked)


def cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_stat():
    """(busy, total) jiffies of all cores since boot, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def meminfo():
    """(total, available) bytes from /proc/meminfo."""
    found = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemAvailable"):
                    found[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError):
        pass
    return found.get("MemTotal"), found.get("MemAvailable")


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def own_cpu_seconds():
    """CPU time this process (every thread) and its finished children have had so far."""
    try:
        import resource
    except ImportError:
        return None
    mine = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def mark():
    """Where a window of the machine's other work may start: /proc/stat now, the CPU
    time this process and its finished children have had, the clock. Taken when
    nothing of a run is alive (the launcher opened, the previous run ended), it lets
    before() count the time since as part of its window instead of waiting it out."""
    return {"stat": cpu_stat(), "own": own_cpu_seconds(), "clock": time.monotonic()}


_FIRST = []  # this process's first_mark()


def first_mark():
    """The mark() this process took first (gpubench's start: its command line calls this
    before importing its commands), while recent enough to start before()'s window;
    else a new mark."""
    if not _FIRST:
        _FIRST.append(mark())
    if time.monotonic() - _FIRST[0]["clock"] <= STALE_S:
        return _FIRST[0]
    return mark()


def before(seconds=BEFORE_S, since=None):
    """The machine just before a run: its cores, memory, load average over the
    cores, and the share of the cores busy over `seconds` (other work only). With
    `since` (a mark()), the window starts there, less the CPU this process used
    meanwhile (gpubench's own work between runs is not other work), and only what
    it lacks of `seconds` is waited."""
    n = cores()
    first, own = cpu_stat(), own_cpu_seconds()
    if (since and since.get("stat") and since.get("own") is not None and own is not None
            and time.monotonic() - since["clock"] <= STALE_S):
        first, own = since["stat"], since["own"]
        seconds -= time.monotonic() - since["clock"]
    if seconds > 0:
        time.sleep(seconds)
    second = cpu_stat()
    mine = own_cpu_seconds()
    busy = None
    if first and second and second[1] > first[1]:
        used = (mine - own) * os.sysconf("SC_CLK_TCK") if own is not None and mine is not None else 0
        busy = min(1.0, max(0.0, (second[0] - first[0] - used) / (second[1] - first[1])))
    load = load_average()
    total, _ = meminfo()
    return {"cpu_cores": n, "load_before": load / n if load is not None else None,
            "busy_before": busy, "memory_total_bytes": total,
            "mock_instance": bool(os.environ.get(MOCK_VAR)), "stat_start": second,
            "clock_start": time.time()}


def tagged_rss(run_id):
    """Bytes resident in every process whose environment carries the run's tag."""
    tag = ("%s=%s" % (TAG_VAR, run_id)).encode()
    me, page, rss = os.getpid(), os.sysconf("SC_PAGE_SIZE"), 0
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                if tag not in f.read().split(b"\0"):
                    continue
            with open("/proc/%s/statm" % d) as f:
                rss += int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            pass
    return rss


class Watch:
    """The run's memory and the machine's, sampled until stop()."""

    def __init__(self, run_id):
        self.run_id = run_id
        self.peak_rss = 0
        self.min_available = None

    def sample(self):
        self.peak_rss = max(self.peak_rss, tagged_rss(self.run_id))
        _, available = meminfo()
        if available is not None:
            self.min_available = (available if self.min_available is None
                                  else min(self.min_available, available))

    def summary(self):
        return {"peak_rss_bytes": self.peak_rss or None,
                "memory_available_min_bytes": self.min_available,
                "stat_end": cpu_stat(), "clock_end": time.time()}


def during(started, ended, run_cpu_seconds, launcher_cpu_seconds=0.0):
    """The figures of a whole run from before() and Watch.summary(): the share of
    the cores' time other processes took while it ran, and the cores' worth of
    CPU the run's own processes got. `launcher_cpu_seconds`: what the process that
    launched the run used meanwhile on the same machine (gpubench, loading its report
    beside a local run): not other work."""
    out = {}
    wall = (ended.get("clock_end") or 0) - (started.get("clock_start") or 0)
    a, b = started.get("stat_start"), ended.get("stat_end")
    if run_cpu_seconds is not None and wall > 0:
        out["run_cpu_seconds"] = run_cpu_seconds
        out["run_cores_used"] = run_cpu_seconds / wall
    if a and b and b[1] > a[1] and run_cpu_seconds is not None:
        hz = os.sysconf("SC_CLK_TCK")
        other = (b[0] - a[0] - (run_cpu_seconds + launcher_cpu_seconds) * hz) / (b[1] - a[1])
        out["other_cpu_share"] = min(1.0, max(0.0, other))
    return out


def busy_verdict(figures):
    """Why the machine counted as busy with other work around a run, or None."""
    reasons = []
    before_share, during_share = figures.get("busy_before"), figures.get("other_cpu_share")
    if before_share is not None and before_share > BUSY_SHARE:
        reasons.append("%.0f%% of the cores busy with other work as it started" % (before_share * 100))
    if during_share is not None and during_share > BUSY_SHARE:
        reasons.append("other processes took %.0f%% of the cores' time while it ran"
                       % (during_share * 100))
    return "; ".join(reasons) or None


def main(argv):
    if argv[:1] == ["before"] and len(argv) == 2:
        with open(argv[1], "w") as f:
            json.dump(before(), f)
        return 0
    if argv[:1] == ["watch"] and len(argv) == 3:
        watch, out = Watch(argv[1]), argv[2]

        def write(*_):
            with open(out + ".tmp", "w") as f:
                json.dump(watch.summary(), f)
            os.replace(out + ".tmp", out)

        def stop(*_):
            write()
            sys.exit(0)

        signal.signal(signal.SIGTERM, stop)
        while True:
            watch.sample()
            write()
            time.sleep(INTERVAL_S)
    print("usage: before FILE | watch RUN_ID FILE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
