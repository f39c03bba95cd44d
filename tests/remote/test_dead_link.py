"""A link that goes silent mid-run (no reset, no FIN: the machine vanished, a
route died) is noticed within the connection's dead-link time, not at the run's
own timeout, and the sweep then reconnects or stops as for any lost link. The
machine is a real sshd in a network namespace the test creates; the link is cut
by taking its end of a veth pair down."""

import time

import pytest

from gpubench import suite
from gpubench.launch.base import SweepPoint
from gpubench.launch.ssh import connect
from gpubench.remote.connection import ConnectOptions
from gpubench.remote.errors import ConnectionLostError
from gpubench.remote.session import RemoteLayout, SessionOptions
from gpubench.remote.targets import resolve
from tests.remote.helpers import tiny_script

pytestmark = pytest.mark.slow

RUN_TIMEOUT_S = 300


def test_a_silent_link_is_noticed_within_the_dead_link_time(netns_sshd, tmp_path,
                                                           remote_python):
    server, host = netns_sshd
    script = tiny_script(tmp_path, name="tiny_dead_link.py")
    options = SessionOptions(remote_python, RemoteLayout(str(tmp_path / "remote")),
                             ConnectOptions(connect_timeout=2, wait=2, retry_pause=0.5,
                                            keepalive_s=1, dead_link_s=3), reconnects=1)
    lines: list[str] = []
    launcher = connect(resolve(server.spec, server.key_file), tmp_path / "known_hosts",
                       options, lines.append)
    workload = suite.resolve(str(script))
    launcher.prepare(workload)
    cut_at: list[float] = []

    def on_line(line: str) -> None:
        lines.append(line)
        if "started" in line and not cut_at:
            host.cut()
            cut_at.append(time.monotonic())

    with launcher, pytest.raises(ConnectionLostError, match="could not reconnect"):
        launcher.run(workload, SweepPoint(1, 1), ["--sleep", "600"], on_line, RUN_TIMEOUT_S)
    noticed_after = time.monotonic() - cut_at[0]
    # dead-link time 3 s + a keepalive period + one reconnect attempt (wait 2 s), against
    # the 300 s + 60 s it took before; the bound leaves room for a loaded machine
    assert noticed_after < 60, (noticed_after, lines)
    assert any("connection lost; reconnecting" in line for line in lines), lines
