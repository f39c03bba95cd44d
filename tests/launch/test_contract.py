"""The launcher contract (machine, prepare, run, close; a context manager) as the
local and SSH launchers keep it, and the one factory that turns --on into one."""

from __future__ import annotations

import pytest

from gpubench.launch import factory
from gpubench.launch.schemes import Scheme
from gpubench.launch.base import Launcher, Machine, SweepPoint
from gpubench.launch.factory import LaunchOptions, open_launcher
from gpubench.launch.local import LocalLauncher
from gpubench.launch.ssh import SshLauncher
from gpubench.remote.errors import BadTargetError
from gpubench.remote.target import SshTarget
from gpubench.remote.targets import RemoteHost
from gpubench.suite import resolve


class FakeSession:
    closed = 0

    def close(self) -> None:
        self.closed += 1


def test_local_launcher_keeps_the_contract():
    launcher = LocalLauncher(gpus=[])
    assert isinstance(launcher, Launcher)
    with launcher as entered:
        assert entered is launcher
        machine = launcher.machine()
        assert (machine.provider, machine.accelerator, machine.max_nodes) == ("local", "cpu", 1)
        assert launcher.prepare(resolve("mnist-ddp")) is None  # nothing to copy here
        with pytest.raises(ValueError, match="one node"):
            launcher.run(resolve("mnist-ddp"), SweepPoint(2, 1), [], lambda _: None, 10)
    launcher.close()  # twice is harmless


def test_ssh_launcher_closes_its_session_on_leaving_with():
    session = FakeSession()
    launcher = SshLauncher(session, Machine("ssh", "box", "H100", 1, None))
    with launcher:
        assert launcher.machine().max_nodes == 1
    assert session.closed == 1
    with pytest.raises(ValueError, match="one node"):
        launcher.run(resolve("mnist-ddp"), SweepPoint(2, 1), [], lambda _: None, 10)


def test_no_on_value_is_this_machine():
    with open_launcher(None) as launcher:
        assert isinstance(launcher, LocalLauncher)


def test_this_machine_without_torch_is_one_line(monkeypatch):
    from gpubench.errors import RunError
    from gpubench.launch import local

    monkeypatch.setattr(local.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RunError, match="needs PyTorch"):
        open_launcher(None)


@pytest.fixture
def connected(monkeypatch):
    """ssh.connect replaced by one that notes what it was asked to connect to."""
    from gpubench.launch import ssh

    calls = []

    def connect(host, known_hosts, options, echo):
        calls.append((host, known_hosts, options, echo))
        return SshLauncher(FakeSession(), Machine("ssh", "box", "H100", 1, None))

    monkeypatch.setattr(ssh, "connect", connect)
    return calls


def test_user_at_host_goes_over_ssh_with_the_options(connected, tmp_path):
    key = tmp_path / "id"
    key.write_text("x")
    options = LaunchOptions(key=key, price=3.0, remote_python="/opt/py", remote_dir="~/bench",
                            connect_wait=7.0)
    launcher = open_launcher("ubuntu@203.0.113.7:2222", options)
    assert isinstance(launcher, SshLauncher)
    ((host, known_hosts, session, echo),) = connected
    assert (host.provider, host.target.user, host.target.port, host.price_per_hour) == (
        "ssh", "ubuntu", 2222, 3.0)
    assert (session.python, session.layout.base, session.connect.wait) == ("/opt/py", "bench", 7.0)
    assert known_hosts.name == "known_hosts" and echo is options.echo
    assert factory.remote_base("/abs/dir") == "/abs/dir"


def test_a_resolved_host_is_taken_as_it_is(connected, tmp_path):
    target = SshTarget("10.0.0.5", 22, "root", tmp_path / "k")
    host = RemoteHost(target, "lambda", "b1", "gpu_1x_a10", "A10", 1, 0.75)
    open_launcher(host, LaunchOptions(known_hosts=tmp_path / "kh"))
    ((got, known_hosts, session, _),) = connected
    assert got is host and known_hosts == tmp_path / "kh" and session.layout.base == "gpubench"


def test_bad_on_values_are_one_line_errors(tmp_path):
    with pytest.raises(BadTargetError, match="not user@host"):
        open_launcher("root@host:0x", LaunchOptions(key=tmp_path / "k"))
    with pytest.raises(Exception, match="no-such-instance"):
        open_launcher("no-such-instance")


def test_a_scheme_goes_to_its_registered_module_and_nothing_else_does(monkeypatch, connected,
                                                                      tmp_path):
    monkeypatch.setitem(factory.SCHEMES, "fake2", Scheme("fake2", "tests.launch.two_node_fake"))
    assert type(open_launcher("fake2:x")).__name__ == "TwoNodeLauncher"
    key = tmp_path / "k"
    key.write_text("x")
    # a port after a host is not a scheme, nor is a scheme nobody registered
    open_launcher("fake2@host:22", LaunchOptions(key=key))
    assert connected[0][0].target.host == "host"
    with pytest.raises(Exception, match="k8s:login"):
        open_launcher("k8s:login")  # read as a ledger name, which it is not


def test_importing_the_factory_loads_no_launcher():
    import subprocess
    import sys

    code = ("import sys, gpubench.launch.factory; print(' '.join(m for m in "
            "('gpubench.launch.ssh', 'gpubench.launch.local', 'paramiko') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
