"""Bad input: one line on stderr, a non-zero exit, no traceback, nothing lost."""

from __future__ import annotations

import json

import pytest


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code != 0
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for fragment in fragments:
        assert fragment in lines[0]


def test_unknown_workload_lists_the_known_ones(cli):
    code, _, err = cli("run", "resnet-9000")
    assert_one_line_error(code, err, "unknown workload 'resnet-9000'", "mnist-ddp")


@pytest.mark.parametrize("value, fragment", [("0", "0 is not a valid GPU count"),
                                             ("abc", "'abc' is not a whole number"),
                                             ("1,-2", "-2 is not a valid GPU count")])
def test_bad_gpu_counts(cli, value, fragment, tmp_path):
    code, _, err = cli("run", "mnist-ddp", "--gpus", value, "--results", str(tmp_path))
    assert_one_line_error(code, err, fragment)


def test_missing_results_directory(cli, tmp_path):
    code, _, err = cli("report", "--results", str(tmp_path / "nope"))
    assert_one_line_error(code, err, "does not exist")
    (tmp_path / "a-file").write_text("")  # run creates a directory it is given, never over a file
    code, _, err = cli("run", "mnist-ddp", "--results", str(tmp_path / "a-file"))
    assert_one_line_error(code, err, "is not a directory")


def test_unknown_option_and_format(cli, tmp_path):
    code, _, err = cli("run", "mnist-ddp", "--bogus")
    assert_one_line_error(code, err, "No such option: --bogus")
    code, _, err = cli("report", "--results", str(tmp_path), "--format", "xml")
    assert_one_line_error(code, err, "--format")


def test_max_steps_is_for_a_users_script_and_a_suite_workload_is_told_its_own_flag(cli, tmp_path):
    code, _, err = cli("run", "mnist-ddp", "--max-steps", "20", "--results", str(tmp_path))
    assert_one_line_error(code, err, "--max-steps is for your own scripts", "-- --steps N")
    code, _, err = cli("run", "mnist-ddp", "--max-steps", "1", "--results", str(tmp_path))
    assert_one_line_error(code, err, "--max-steps")
    assert not list(tmp_path.iterdir())  # nothing started, nothing written


def good_record(gpus: int, throughput: float) -> dict:
    return {"schema_version": 1, "workload": "mnist-ddp", "provider": "local",
            "instance_type": "t", "gpu_name": "cpu", "gpu_count": gpus, "status": "ok",
            "throughput": throughput, "time": f"2026-01-01T00:00:0{gpus}Z", "price_per_hour": 0.0,
            "epoch_samples": 60000}


def test_corrupt_line_in_the_middle_is_skipped_naming_the_line(cli, tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(good_record(1, 100)) + "\n{oops\n" + json.dumps(good_record(2, 150)) + "\n")
    before = path.read_bytes()
    code, out, err = cli("report", "--results", str(tmp_path), "--format", "json")
    assert code == 0 and "Traceback" not in err
    assert [r["throughput"] for r in json.loads(out)] == [100, 150]  # the rest still reported
    lines = err.strip().splitlines()
    assert f"{path}:2: skipped a corrupt line" in lines[0]
    assert lines[-1].startswith("warning: skipped 1 corrupt line in the results")
    assert path.read_bytes() == before  # nothing rewritten


def test_truncated_last_line_is_skipped_with_a_warning(cli, tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(good_record(1, 100)) + "\n" + json.dumps(good_record(2, 150))
                    + "\n" + json.dumps(good_record(2, 999))[:25])
    code, out, err = cli("report", "--results", str(tmp_path), "--format", "json")
    assert code == 0
    assert "truncated last line" in err and "Traceback" not in err
    rows = json.loads(out)
    assert [r["throughput"] for r in rows] == [100, 150]
    assert rows[1]["speedup"] == 1.5


def test_version_and_workloads(cli):
    code, out, _ = cli("--version")
    assert code == 0 and out.startswith("gpubench ")
    code, out, _ = cli("workloads")
    assert code == 0 and out.splitlines()[0].startswith("mnist-ddp")
