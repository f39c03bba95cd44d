"""Each run of a user's script starts from the same files.

A training script that writes a checkpoint (snapshot.pt) and resumes from it
when it finds one would have the second GPU count resume where the first one
stopped, train less and look faster. So around every run of a user's script the
launcher lists the working directory (names, sizes, modification times), and
after the run:

- files and directories the run created are moved aside, into
  .gpubench-left-behind/<run>/ in that directory (a rename, however large), and
  named to the user: the next run starts without them;
- files that were there before and that the run changed cannot be put back:
  they are named, and the sweep stops rather than run the next count on them.

What a script writes outside its working directory is not watched. Version
control, virtual environments and Python's caches are left out, and so is
gpubench's own output: `gpubench run ... > out.log` or `... | tee bench.log`
in the script's directory writes that file all along, and it is not the run's
(own_output finds such files: gpubench's stdout and stderr when they are files,
and the files that the programs reading them through a pipe write to). A directory
other programs write to as well (the home directory, /tmp, /) or one too large
to list quickly is not watched at all, and the run says so: there a new file
need not be the run's.

Standard library only: imported here for a local run; on a remote machine the
same source runs as `python -c SOURCE snapshot ROOT FILE [SKIP...]` before the
run and `python -c SOURCE settle ROOT FILE KEEP [SKIP...]` after it (printing
a JSON line); SKIP names paths under ROOT that are gpubench's own.
"""

import json
import os
import stat
import sys
import tempfile
import time

KEEP_DIR = ".gpubench-left-behind"
SKIPPED = {".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules", KEEP_DIR}
MAX_ENTRIES = 100000  # a larger tree (a home directory) is not watched
MARK = "@gpubench-left "


class TooLarge(Exception):
    pass


def unwatched(root):
    """Why the tree at root is not watched, or None when it is."""
    root = os.path.realpath(root)
    shared = {"/", "/tmp", "/var/tmp", os.path.realpath(tempfile.gettempdir()),
              os.path.realpath(os.path.expanduser("~"))}
    if root in shared:
        return "%s is shared with other programs" % root
    return None


def listing(root, skip=(), own=()):
    """{relative path: (size, mtime_ns)} of every file under root; directories as
    (None, None). `skip`: absolute paths left out (gpubench's own files); `own`:
    files left out by (st_dev, st_ino), wherever they are (own_output)."""
    root = os.path.abspath(root)
    skip = {os.path.abspath(p) for p in skip}
    own = set(own)
    found = {}
    stack = [root]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIPPED or entry.name.endswith(".pyc") or entry.path in skip:
                continue
            rel = os.path.relpath(entry.path, root)
            try:
                if entry.is_dir(follow_symlinks=False):
                    found[rel] = (None, None)
                    stack.append(entry.path)
                else:
                    st = entry.stat(follow_symlinks=False)
                    if (st.st_dev, st.st_ino) in own:
                        continue
                    found[rel] = (st.st_size, st.st_mtime_ns)
            except OSError:
                continue
            if len(found) > MAX_ENTRIES:
                raise TooLarge(root)
    return found


def changes(earlier, now):
    """(created, changed): the top-most paths that are new, and the files that
    were there and are no longer the same."""
    created = sorted(p for p in now if p not in earlier)
    top = []
    for path in created:  # a new directory stands for everything in it
        if not any(path.startswith(t + os.sep) for t in top):
            top.append(path)
    changed = sorted(p for p, stamp in earlier.items()
                     if stamp[0] is not None and p in now and now[p] != stamp)
    return top, changed


def snapshot(root, skip=(), own=()):
    """The listing a run is compared with afterwards; None when root is not watched."""
    if unwatched(root):
        return None
    try:
        return listing(root, skip, own)
    except TooLarge:
        return None


def settle(root, earlier, keep_name, skip=(), own=()):
    """Move what the run created into KEEP_DIR/keep_name; report it all. `earlier`:
    snapshot()'s listing, None when the tree is not watched."""
    root = os.path.abspath(root)
    if earlier is None:
        return {"watched": False, "created": [], "changed": []}
    try:
        now = listing(root, skip, own)
    except TooLarge:
        return {"watched": False, "created": [], "changed": []}
    created, changed = changes(earlier, now)
    kept, n = os.path.join(root, KEEP_DIR, keep_name), 1
    while os.path.exists(kept):  # another run of the same name (a repeat within a second)
        n += 1
        kept = os.path.join(root, KEEP_DIR, "%s-%d" % (keep_name, n))
    moved = []
    for rel in created:
        target = os.path.join(kept, rel)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(os.path.join(root, rel), target)
            moved.append(rel)
        except OSError:
            pass  # gone already (a temporary file), or not ours to move
    return {"watched": True, "created": moved, "changed": changed,
            "kept_in": kept if moved else None}


# --------------------------------------------------------------------------- own output
MAX_PROCESSES = 20000  # /proc entries looked at for the readers of a pipe
MAX_FDS = 1000  # open files looked at in one reader
PIPE_DEPTH = 3  # gpubench | tee a.log | grep x > b.log: readers of readers, this far
LOOK_S = 2.0  # the whole look-up, however many processes the machine has


def own_output(fds=(1, 2), proc="/proc"):
    """{(st_dev, st_ino): path or None} of the files gpubench's own output goes to:
    its stdout and stderr when they are regular files (`> out.log`), and, when they
    are pipes, the regular files that the programs reading those pipes have open for
    writing (`| tee bench.log`; on Linux, from /proc). Empty when nothing is found;
    never raises."""
    found, pipes = {}, set()
    for fd in fds:
        try:
            st = os.fstat(fd)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            found[(st.st_dev, st.st_ino)] = _link("%s/self/fd/%d" % (proc, fd))
        elif stat.S_ISFIFO(st.st_mode):
            pipes.add((st.st_dev, st.st_ino))
    try:
        found.update(_written_by_readers(pipes, proc))
    except Exception:  # /proc unreadable or odd: nothing more is known, and that is all
        pass
    return found


def _link(path):
    try:
        target = os.readlink(path)
    except OSError:
        return None
    return target if target.startswith("/") else None


def _written_by_readers(pipes, proc):
    """The regular files written by the processes whose stdin is one of `pipes`, and,
    when those write to pipes in turn, by those pipes' readers (PIPE_DEPTH deep)."""
    found = {}
    if not pipes or not os.path.isdir(os.path.join(proc, "self", "fd")):
        return found
    deadline = time.monotonic() + LOOK_S
    me = str(os.getpid())
    pids = [p for p in os.listdir(proc) if p.isdigit() and p != me][:MAX_PROCESSES]
    seen_pipes, readers = set(pipes), set()
    for _ in range(PIPE_DEPTH):
        next_pipes = set()
        for pid in pids:
            if time.monotonic() > deadline:
                return found
            if pid in readers:
                continue
            try:
                st = os.stat("%s/%s/fd/0" % (proc, pid))
            except OSError:  # gone, or another user's
                continue
            if (st.st_dev, st.st_ino) not in pipes:
                continue
            readers.add(pid)
            files, out_pipes = _written_files(proc, pid)
            found.update(files)
            next_pipes |= out_pipes - seen_pipes
        if not next_pipes:
            break
        seen_pipes |= next_pipes
        pipes = next_pipes
    return found


def _written_files(proc, pid):
    """({(dev, ino): path} of the regular files process `pid` has open for writing,
    {(dev, ino)} of the pipes it writes to)."""
    files, out_pipes = {}, set()
    try:
        fds = os.listdir("%s/%s/fd" % (proc, pid))[:MAX_FDS]
    except OSError:
        return files, out_pipes
    for fd in fds:
        link = "%s/%s/fd/%s" % (proc, pid, fd)
        try:
            st = os.stat(link)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
                continue
            if not _open_for_writing("%s/%s/fdinfo/%s" % (proc, pid, fd)):
                continue
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            files[(st.st_dev, st.st_ino)] = _link(link)
        else:
            out_pipes.add((st.st_dev, st.st_ino))
    return files, out_pipes


def _open_for_writing(fdinfo):
    """Whether /proc/PID/fdinfo/FD says the file was opened for writing."""
    with open(fdinfo) as f:
        for line in f:
            if line.startswith("flags:"):
                return (int(line.split()[1], 8) & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)
    return False


def main(argv):
    if argv[:1] == ["snapshot"] and len(argv) >= 3:
        found = snapshot(argv[1], [os.path.join(argv[1], p) for p in argv[3:]])
        with open(argv[2], "w") as f:
            json.dump(found, f)
        return 0
    if argv[:1] == ["settle"] and len(argv) >= 4:
        try:
            with open(argv[2]) as f:
                earlier = json.load(f)
        except (OSError, ValueError):
            earlier = None
        if earlier is not None:
            earlier = {k: tuple(v) for k, v in earlier.items()}
        result = settle(argv[1], earlier, argv[3], [os.path.join(argv[1], p) for p in argv[4:]])
        print(MARK + json.dumps(result))
        return 0
    print("usage: snapshot ROOT FILE [SKIP...] | settle ROOT FILE KEEP [SKIP...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
