"""Which launcher an --on value means, decided in one place for `run` and `bench`.

    (none)              this machine: torchrun --standalone here
    NAME                a live cluster in the ledger: torchrun c10d across its members
                        (gpubench.launch.cluster); else an instance in the ledger, over SSH
    NAME:I              member I of a cluster (0 = the head), alone, over SSH
    user@host[:port]    a machine of the user's own, over SSH
    SCHEME[:REST]       the launcher registered for SCHEME in SCHEMES (slurm, slurm:LOGIN)

A new way of launching (Slurm, a cluster of rented machines) is one module with
`open_launcher(spec: str, options: LaunchOptions) -> Launcher` and one line in
SCHEMES. Its module is imported only when its scheme is used, as the SSH one is
only for an --on value, so the CLI starts without loading any of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from gpubench.launch.base import Launcher, LineSink
from gpubench.remote.cluster import ClusterHosts, find_cluster, split_member
from gpubench.remote.errors import BadTargetError
from gpubench.remote.target import looks_like_spec
from gpubench.remote.targets import RemoteHost, resolve

DEFAULT_REMOTE_DIR = "gpubench"  # relative to the remote home

# scheme -> module that opens its launchers, e.g. "slurm": "gpubench.launch.slurm"
SCHEMES: dict[str, str] = {"slurm": "gpubench.launch.slurm"}


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


def open_launcher(on: str | RemoteHost | None, options: LaunchOptions = LaunchOptions()) -> Launcher:
    """A launcher, opened and ready, for an --on value (None: this machine) or for a
    machine already resolved (bench's freshly rented instance). The caller closes it:
    `with open_launcher(...) as launcher:`. Bad values raise a one-line UsageError."""
    if on is None:
        return _open_local()
    if isinstance(on, RemoteHost):
        return _open_ssh(on, options)
    scheme, _, rest = on.partition(":")
    if scheme in SCHEMES:  # SCHEME alone too: --on slurm (this machine is the login node)
        return importlib.import_module(SCHEMES[scheme]).open_launcher(rest, options)
    if not looks_like_spec(on):
        cluster, member = _cluster_named(on, options)
        if cluster is not None and member is None:
            return _open_cluster(cluster, options)
        if cluster is not None:
            if member >= cluster.size:
                raise BadTargetError(f"--on {on}: cluster {cluster.name} has members 0 to "
                                     f"{cluster.size - 1}")
            return _open_ssh(cluster.nodes[member].host, options)
    return _open_ssh(resolve(on, options.key, options.price), options)


def _open_cluster(cluster: ClusterHosts, options: LaunchOptions) -> Launcher:
    from gpubench import paths
    from gpubench.launch.cluster import ClusterOptions, open_cluster

    chosen = options.scheme_options
    return open_cluster(cluster, options.known_hosts or paths.known_hosts_path(),
                        options.remote_python, remote_base(options.remote_dir), options.connect_wait,
                        options.echo, chosen if isinstance(chosen, ClusterOptions) else None)


def _cluster_named(on: str, options: LaunchOptions) -> tuple[ClusterHosts | None, int | None]:
    """The live cluster an --on value names (NAME, or NAME:I for one member), and the
    member; (None, None) when it names none (it may name a single instance)."""
    try:
        name, member = split_member(on)
    except BadTargetError:
        return None, None  # not NAME:I; resolve() says what is wrong with it
    return find_cluster(name, options.key, options.price), member


def _open_local() -> Launcher:
    from gpubench.launch.local import LocalLauncher, torch_python

    torch_python()  # no torch here: one line now, not a failed record per point
    return LocalLauncher()


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
