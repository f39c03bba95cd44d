"""Nothing a rented machine made is destroyed unasked (mock cloud, real sshd and rsync):
a client killed mid-run leaves its declared outputs on the machine; `ls` marks it;
`down --yes` brings them back before it terminates, a pull that fails keeps the
machine, `pull` tries again, and `down --yes --discard-outputs` gives them up."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import pytest

from gpubench.store.ledger import Ledger
from tests.helpers import JOIN, LEAVE, mock_cloud, start_gpubench

SLOW = JOIN + """\
import os, pathlib, time
if os.environ["RANK"] == "0":
    pathlib.Path("checkpoints").mkdir()
    pathlib.Path("checkpoints/model.pt").write_bytes(b"weights" * 1000)
    pathlib.Path({started!r}).write_text("1")
deadline = time.monotonic() + 60
while not pathlib.Path({release!r}).exists() and time.monotonic() < deadline:
    time.sleep(0.1)
""" + LEAVE


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch)


def killed_mid_run(cli, tmp_path: Path, name: str, pull_every: float | None = None) -> Path:
    """Rent `name`, start a run that writes checkpoints/model.pt and waits, kill the
    client once it has written it (with `pull_every`, once the pulls while it runs have
    brought it here); returns the results directory."""
    code, _, err = cli("provision", "lambda", "--gpus", "1", "--name", name, "--yes")
    assert code == 0, err
    proj = tmp_path / f"proj-{name}"
    proj.mkdir()
    started, release = tmp_path / f"{name}.started", tmp_path / "release"
    (proj / "train.py").write_text(SLOW.format(started=str(started), release=str(release)))
    results = tmp_path / f"results-{name}"
    proc = start_gpubench("run", str(proj / "train.py"), "--workdir", str(proj), "--on", name, "--gpus", "1",
                          "--repeat", "1", "--outputs", "checkpoints/", "--results", str(results),
                          env={"GPUBENCH_OUTPUTS_PULL_EVERY": str(pull_every or 300)})
    try:
        deadline = time.monotonic() + 90
        pulled = results.glob("*/outputs/1gpu/checkpoints/*")
        while not started.exists() or (pull_every and not any(pulled)):
            pulled = results.glob("*/outputs/1gpu/checkpoints/*")
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return results


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_killed_run_s_outputs_come_back_before_the_machine_goes(cloud, cli, tmp_path):
    results = killed_mid_run(cli, tmp_path, "kept")
    code, out, _ = cli("ls", "--format", "json")
    assert [(r["name"], r["outputs"]) for r in json.loads(out)] == [("kept", "1 unpulled")]

    # the machine does not answer: nothing is pulled, so nothing is terminated
    with Ledger() as ledger:
        entry = ledger.find("kept")
        ledger.update(entry.row_id, ssh_port=free_port())
    code, out, err = cli("down", "kept", "--yes")
    assert code == 1
    assert "kept was kept: its outputs could not be pulled" in err and "an hour" in err
    assert Ledger().find("kept").status == "ready"
    with Ledger() as ledger:
        ledger.update(entry.row_id, ssh_port=entry.ssh_port)

    # without --yes and no terminal: what it holds is said, nothing is done
    code, _, err = cli("down", "kept")
    assert code == 2 and "holds 1 file(s) of its runs not yet pulled" in err
    assert "checkpoints/model.pt (7.0 kB)" in err

    code, out, err = cli("down", "kept", "--yes")
    assert code == 0, err
    (pulled,) = results.glob("*/outputs/1gpu/checkpoints/model.pt")
    assert pulled.read_bytes() == b"weights" * 1000
    assert "terminated" in out and Ledger().find("kept").status == "terminated"
    (tmp_path / "release").write_text("1")


@pytest.mark.slow
def test_pulled_while_it_runs_then_pull_and_discard(cloud, cli, tmp_path):
    results = killed_mid_run(cli, tmp_path, "gone", pull_every=0.3)   # here before the kill
    code, out, err = cli("pull", "gone")
    assert code == 0, err
    assert len(list(results.glob("*/outputs/1gpu/checkpoints/model.pt"))) == 1
    code, out, _ = cli("pull", "gone")
    assert code == 0 and "nothing to pull" in out

    results = killed_mid_run(cli, tmp_path, "lost")
    code, out, err = cli("down", "lost", "--yes", "--discard-outputs")
    assert code == 0, err
    assert "gave up the files of 1 count(s)" in err
    assert not list(results.glob("*/outputs/*/checkpoints/model.pt"))
    assert Ledger().find("lost").status == "terminated"
    (tmp_path / "release").write_text("1")
    code, _, err = cli("down", "gone", "--yes")
    assert code == 0, err
