"""Data that stays, on the mock cloud of each provider: a volume made through gpubench
holds what one machine's run wrote to $GPUBENCH_DATA for the next machine rented with it,
placed where the volume is; `volume ls` shows it with a monthly cost (and one made
outside gpubench as not gpubench's); an attached volume is not deleted; a detached one
is, and is confirmed gone."""

from __future__ import annotations

import json

import pytest

from gpubench.store.ledger import Ledger
from gpubench.store.results import ResultsStore
from gpubench.store.volumes import VolumesLedger
from tests.helpers import JOIN, LEAVE, mock_cloud

WRITE_THEN_READ = JOIN + """\
import json, os, pathlib, sys
data = pathlib.Path(os.environ["GPUBENCH_DATA"])
if os.environ["RANK"] == "0":
    mine = data / "tokens.bin"
    found = mine.read_text() if mine.exists() else None
    if found is None:
        mine.write_text(sys.argv[1])
    with open(os.environ["GPUBENCH_RECORD_FILE"], "w") as f:
        json.dump({"throughput": 1.0, "throughput_unit": "samples/s", "found": found}, f)
""" + LEAVE


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch)


SETUP = 'echo prepared >> "$GPUBENCH_DATA/setup-runs"'


def _run(cli, tmp_path, name: str, word: str) -> tuple[dict, str]:
    proj = tmp_path / f"proj-{name}"
    proj.mkdir(exist_ok=True)
    (proj / "train.py").write_text(WRITE_THEN_READ)
    results = tmp_path / f"results-{name}"
    code, out, err = cli("run", str(proj / "train.py"), "--workdir", str(proj), "--on", name, "--gpus", "1",
                         "--repeat", "1", "--results", str(results), "--setup", SETUP, "--", word)
    assert code == 0, out + err
    (record,) = ResultsStore(results).load().records
    return record, out


@pytest.mark.slow
@pytest.mark.parametrize("provider, size", [("lambda", None), ("runpod", 20), ("vast", 20)])
def test_a_volume_outlives_its_machine_and_pins_the_next(cloud, cli, tmp_path, provider, size):
    volume_life(cli, tmp_path, provider, size)


@pytest.mark.slow
def test_in_namespace_mode_too(tmp_path, monkeypatch, cli):
    """Each machine a host of its own on the mock's bridge: the volume's files still reach
    the next machine rented with it."""
    from tests.mock.helpers import netns_mock_cloud

    with netns_mock_cloud(tmp_path / "mock", monkeypatch, boot_delay=0.0):
        volume_life(cli, tmp_path, "runpod", 20)


def volume_life(cli, tmp_path, provider: str, size: int | None) -> None:
    """Make a volume, rent a machine with it, write to $GPUBENCH_DATA, find it refused by
    rm while attached and listed with a cost, take the machine down, rent another with it
    (placed where it is), read what the first wrote, take it down, remove the volume."""
    code, out, err = cli("volume", "create", provider, "data", *(["--size", str(size)] if size else []),
                         "--gpu-type", "H100", "--yes")
    assert code == 0, err
    assert "placing it in" in err and "made" in out
    row = VolumesLedger().find("data")
    assert row.volume_id and row.place

    code, out, err = cli("provision", provider, "--gpus", "1", "--name", "first", "--volume", "data", "--yes")
    assert code == 0, err
    first = Ledger().find("first")
    assert first.volume == "data"
    record, out = _run(cli, tmp_path, "first", "written-by-first")
    assert record.get("found") is None and "setup (once per volume)" in out

    code, _, err = cli("volume", "rm", "data", "--yes")          # attached: refused, nothing deleted
    assert code != 0 and "in use by" in err and len(err.strip().splitlines()) == 1
    code, out, _ = cli("volume", "ls", "--format", "json")
    (listed,) = [v for v in json.loads(out) if v["name"] == "data"]
    assert listed["ours"] and listed["place"] == row.place and listed["monthly_cost"] is not None
    assert "first" in (listed["attached_to"] or "")

    code, _, err = cli("down", "first", "--yes")
    assert code == 0, err
    code, out, err = cli("provision", provider, "--gpus", "1", "--name", "second", "--volume", "data", "--yes")
    assert code == 0, err
    second = Ledger().find("second")
    assert second.region == first.region or provider == "vast"   # where the volume is
    record, out = _run(cli, tmp_path, "second", "written-by-second")
    assert record.get("found") == "written-by-first"          # the first machine's file
    assert "setup already done on this volume" in out           # its setup step ran once
    code, _, err = cli("down", "second", "--yes")
    assert code == 0, err

    code, out, err = cli("volume", "rm", "data", "--yes")
    assert code == 0, err
    assert "no longer lists it" in out
    assert VolumesLedger().find_live("data") is None


def test_bad_volume_input_is_one_line_and_makes_nothing(cloud, cli):
    code, _, err = cli("provision", "lambda", "--gpus", "1", "--volume", "nosuch", "--yes")
    assert code == 2 and "no volume named 'nosuch'" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("volume", "create", "lambda", "Bad_Name", "--yes")
    assert code == 2 and "volume name 'Bad_Name'" in err
    code, _, err = cli("volume", "create", "runpod", "big", "--size", "5000", "--yes")
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert VolumesLedger().rows(include_deleted=True) == []


def test_a_filesystem_made_outside_gpubench_is_listed_as_not_its_own(cloud, cli):
    from tests.mock.helpers import Api

    env = cloud.env()
    lam = Api(env["GPUBENCH_LAMBDA_URL"], {"Authorization": f"Bearer {env['LAMBDA_API_KEY']}"})
    code, _, err = cli("volume", "create", "lambda", "data", "--yes")
    assert code == 0, err
    region = VolumesLedger().find("data").place
    made = lam("POST", "/filesystems", json={"name": "teamdata", "region": region})
    assert made.status_code == 200, made.text
    code, out, err = cli("volume", "ls", "--format", "json")
    assert code == 0, err
    listed = {v["name"]: v for v in json.loads(out)}
    assert listed["data"]["ours"] and listed["data"]["status"] == "ready"
    assert not listed["teamdata"]["ours"] and listed["teamdata"]["status"] == "not gpubench's"
    code, out, _ = cli("volume", "ls")
    assert "not gpubench's" in out and "a month in all" in out
