"""--on values and key files: parsed, or refused in one line."""

from pathlib import Path

import pytest

from gpubench.remote.errors import BadTargetError
from gpubench.remote.target import parse_spec
from gpubench.remote.targets import resolve


def test_user_host_port(tmp_path: Path):
    key = tmp_path / "id"
    key.write_text("x")
    t = parse_spec("ubuntu@203.0.113.7:2222", key)
    assert (t.user, t.host, t.port, t.key_file) == ("ubuntu", "203.0.113.7", 2222, key.resolve())
    assert t.known_hosts_name == "[203.0.113.7]:2222"
    assert parse_spec("root@gpu-box", key).port == 22
    assert parse_spec("root@[::1]:22", key).host == "::1"


@pytest.mark.parametrize("spec", ["root@", "@host", "root@host:99999", "root@ho st", "root@host:x"])
def test_bad_spec(tmp_path: Path, spec: str):
    key = tmp_path / "id"
    key.write_text("x")
    with pytest.raises(BadTargetError):
        parse_spec(spec, key)


def test_missing_key(tmp_path: Path):
    with pytest.raises(BadTargetError, match="does not exist"):
        resolve("root@host", tmp_path / "nope")
    with pytest.raises(BadTargetError, match="--key"):
        resolve("root@host", None)


def test_cli_bad_on_is_one_line(tmp_path: Path, cli):
    code, _, err = cli("run", "mnist-ddp", "--on", "root@host:0x", "--key", str(tmp_path / "k"),
                       "--results", str(tmp_path))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --on")


def test_bare_name_asks_the_ledger(tmp_path: Path):
    with pytest.raises(Exception) as e:
        resolve("no-such-instance")
    assert "no-such-instance" in str(e.value)
