"""What an --on value means, read in one place for `run` and `bench`, and the
launcher that runs there.

    (none)              this machine: torchrun --standalone here
    NAME                a live cluster in the ledger: torchrun c10d across its members
                        (gpubench.launch.cluster); else an instance in the ledger, over SSH
    NAME:I              member I of a cluster (0 = the head), alone, over SSH
    user@host[:port]    a machine of the user's own, over SSH
    SCHEME[:REST]       the launcher registered for SCHEME in launch/schemes.py (slurm,
                        slurm:LOGIN), with the flags it declares there

`read_on` reads the value into a Target before anything is connected (so that
flags meant for another launcher, or counts the target cannot hold, cost one
line and no connection); `open_launcher` opens it. A launcher's module is
imported only when it is used, so the CLI starts without loading any of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.errors import UsageError
from gpubench.launch.base import Launcher, LineSink, NodeSpan
from gpubench.launch.schemes import SCHEMES, Scheme
from gpubench.remote.cluster import ClusterHosts, find_cluster, split_member
from gpubench.remote.errors import BadTargetError
from gpubench.remote.target import looks_like_spec
from gpubench.remote.targets import RemoteHost, resolve

DEFAULT_REMOTE_DIR = "gpubench"  # relative to the remote home


def _quiet(line: str) -> None:
    pass


@dataclass(frozen=True)
class LaunchOptions:
    """How to reach and describe the machine an --on value names. Each launcher
    takes what applies to it; this machine needs none of it."""

    key: Path | None = None          # SSH private key [default: the ledger's, else gpubench's own]
    price: float | None = None       # $/h of one node [default: the ledger's; else unknown]
    remote_python: str = "python3"   # the Python with torch over there
    remote_dir: str = DEFAULT_REMOTE_DIR  # working directory over there, relative to its home
    connect_wait: float = 30.0       # seconds to keep trying a machine that does not answer
    echo: LineSink = _quiet          # progress: connecting, the environment found, syncing
    known_hosts: Path | None = None  # [default: gpubench's own known_hosts file]
    scheme_options: object = None    # what only a SCHEMES launcher reads (slurm: SlurmOptions;
    #                                  a cluster: gpubench.launch.cluster.ClusterOptions)
    dry_run: bool = False            # only Launcher.dry_run will be asked: what cannot be
    #                                  asked of the machine is said, not an error
    idle_since: dict | None = None   # onhost.machine_load.mark() as the command began: this
    #                                  machine's busy check before the first run starts there


@dataclass(frozen=True)
class Target:
    """What an --on value names, read once, before anything is connected."""

    on: str | None                        # as given; None: this machine
    scheme: Scheme | None = None          # a SCHEMES launcher, opened with `rest`
    rest: str = ""
    cluster: ClusterHosts | None = None   # a live cluster of the ledger (NAME or NAME:I)
    member: int | None = None             # NAME:I: that member alone
    given: dict = field(default_factory=dict)  # the scheme's flags the user gave

    @property
    def span(self) -> NodeSpan | None:
        """How it gives out nodes, as far as is known before connecting."""
        if self.cluster is not None and self.member is None:
            return NodeSpan(f"cluster {self.cluster.name}", gpus_per_node=True)
        return None

    @property
    def max_nodes(self) -> int | None:
        """Its nodes, where known before connecting (a cluster in the ledger)."""
        return self.cluster.size if self.span is not None else None

    @property
    def rented(self) -> bool:
        """It names a machine gpubench rented (a ledger name), which --preflight checks."""
        return self.on is not None and self.scheme is None and not looks_like_spec(self.on)


def read_on(on: str | None, given: dict | None = None, dry_run: bool = False,
            key: Path | None = None, price: float | None = None) -> Target:
    """The target an --on value names. `given`: the SCHEMES flags the user gave
    (name -> value), refused with one line unless they are the target's own
    launcher's; so is --dry-run where that launcher cannot show a run."""
    given = dict(given or {})
    scheme_name, _, rest = (on or "").partition(":")
    scheme = SCHEMES.get(scheme_name) if on is not None else None
    for other in SCHEMES.values():
        if other is scheme:
            continue
        for flag in other.flags:
            if flag.name in given:
                raise UsageError(f"{flag.flag} is for {other.title}: add {other.on_hint}")
    if dry_run and not (scheme is not None and scheme.dry_run):
        able = [s for s in SCHEMES.values() if s.dry_run]
        raise UsageError(f"--dry-run is for {' or '.join(s.title for s in able)}: add "
                         f"{' or '.join(s.on_hint for s in able)}")
    if scheme is not None:
        return Target(on, scheme, rest, given=given)
    if on is None or looks_like_spec(on):
        return Target(on)
    try:
        name, member = split_member(on)
    except BadTargetError:
        return Target(on)  # not NAME:I; resolve() says what is wrong with it when opened
    cluster = find_cluster(name, key, price)
    if cluster is not None and member is not None and member >= cluster.size:
        raise BadTargetError(f"--on {on}: cluster {cluster.name} has members 0 to {cluster.size - 1}")
    return Target(on, cluster=cluster, member=member)


def scheme_options(target: Target, price: float | None, results_dir: Path | None) -> object:
    """What the target's SCHEMES launcher reads, from the flags the user gave (None
    for other targets). Refuses, in one line, what cannot be right."""
    if target.scheme is None or target.scheme.flags_module is None:
        return None
    module = importlib.import_module(target.scheme.flags_module)
    return module.options_from(target.given, price, results_dir)


def open_launcher(on: str | Target | RemoteHost | None,
                  options: LaunchOptions = LaunchOptions()) -> Launcher:
    """A launcher, opened and ready, for an --on value or a Target read from one
    (None: this machine), or for a machine already resolved (bench's freshly rented
    instance). The caller closes it: `with open_launcher(...) as launcher:`. Bad
    values raise a one-line UsageError."""
    if isinstance(on, RemoteHost):
        return _open_ssh(on, options)
    target = on if isinstance(on, Target) else read_on(on, key=options.key, price=options.price)
    if target.on is None:
        return _open_local(options.idle_since)
    if target.scheme is not None:  # SCHEME alone too: --on slurm (this machine is the login node)
        return importlib.import_module(target.scheme.module).open_launcher(target.rest, options)
    if target.cluster is not None and target.member is None:
        return _open_cluster(target.cluster, options)
    if target.cluster is not None:
        return _open_ssh(target.cluster.nodes[target.member].host, options)
    return _open_ssh(resolve(target.on, options.key, options.price), options)


def _open_cluster(cluster: ClusterHosts, options: LaunchOptions) -> Launcher:
    from gpubench import paths
    from gpubench.launch.cluster import ClusterOptions, open_cluster

    chosen = options.scheme_options
    return open_cluster(cluster, options.known_hosts or paths.known_hosts_path(),
                        options.remote_python, remote_base(options.remote_dir), options.connect_wait,
                        options.echo, chosen if isinstance(chosen, ClusterOptions) else None)


def _open_local(idle_since: dict | None = None) -> Launcher:
    from gpubench.launch.local import LocalLauncher, torch_python

    torch_python()  # no torch here: one line now, not a failed record per point
    return LocalLauncher(idle_since=idle_since)


def _open_ssh(host: RemoteHost, options: LaunchOptions) -> Launcher:
    from gpubench import paths
    from gpubench.launch.ssh import connect
    from gpubench.remote.connection import ConnectOptions
    from gpubench.remote.session import RemoteLayout, SessionOptions

    session = SessionOptions(options.remote_python, RemoteLayout(remote_base(options.remote_dir)),
                             ConnectOptions(wait=options.connect_wait))
    return connect(host, options.known_hosts or paths.known_hosts_path(), session, options.echo)


def remote_base(remote_dir: str) -> str:
    """--remote-dir as the remote layout takes it: '~/x' is 'x', relative to the home."""
    return remote_dir[2:] if remote_dir.startswith("~/") else remote_dir
