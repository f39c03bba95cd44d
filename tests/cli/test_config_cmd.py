"""[defaults] in config.toml: honoured by the commands (a flag wins, then the
environment, then the file, then the built-in value), shown by `gpubench config`
with where each value came from, unknown keys named in one warning, a broken file
one line; API keys shown as set or not set, never their values."""

from __future__ import annotations

import json

import pytest

from tests.helpers import mock_cloud


@pytest.fixture
def config(isolated):
    def write(text: str | bytes):
        isolated.config.mkdir(parents=True, exist_ok=True)
        path = isolated.config / "config.toml"
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return path
    return write


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch)


def _defaults(cli) -> dict[str, dict]:
    code, out, err = cli("config", "--format", "json")
    assert code == 0, err
    return {row["key"]: row for row in json.loads(out)["defaults"]}


def test_config_with_no_file_shows_the_built_in_values(cli, isolated):
    code, out, err = cli("config")
    assert code == 0, err
    assert f"config file: {isolated.config / 'config.toml'} (not there yet)" in out
    assert "disk           100" in out and "from built-in" in out
    shown = _defaults(cli)
    assert {k: (r["value"], r["source"]) for k, r in shown.items() if k in ("disk", "remote_python", "results")} \
        == {"disk": (100, "built-in"), "remote_python": ("python3", "built-in"), "results": ("results", "built-in")}
    assert shown["image"]["value"].startswith("pytorch/pytorch:")


def test_config_shows_each_source_and_keys_as_set_never_their_value(cli, config, monkeypatch):
    config('[defaults]\ngpu_type = "A100 SXM"\nmax_price = 2.5\ndisk = 80\n'
           '[lambda]\napi_key = "sekrit-lambda-key"\n')
    monkeypatch.setenv("GPUBENCH_DISK", "60")
    monkeypatch.setenv("VAST_API_KEY", "sekrit-vast-key")
    shown = _defaults(cli)
    assert (shown["gpu_type"]["value"], shown["gpu_type"]["source"]) == ("A100 SXM", "config")
    assert (shown["max_price"]["value"], shown["max_price"]["source"]) == (2.5, "config")
    assert (shown["disk"]["value"], shown["disk"]["source"]) == (60, "env")  # env over the file
    assert shown["region"]["source"] == "built-in"
    code, out, err = cli("config", "--format", "json")
    keys = {k["provider"]: k for k in json.loads(out)["api_keys"]}
    assert (keys["lambda"]["api_key"], keys["vast"]["api_key"], keys["runpod"]["api_key"]) == \
        ("set", "set", "not set")
    assert keys["vast"]["source"] == "$VAST_API_KEY" and "RUNPOD_API_KEY" in keys["runpod"]["source"]
    code, text, err = cli("config")
    for shown_text in (out, text, err):
        assert "sekrit" not in shown_text
    assert "lambda   set" in text and "runpod   not set" in text


def test_unknown_keys_are_one_warning_naming_them(cli, config, cloud):
    config('[defaults]\ngpu_typ = "H100"\ncolour = "blue"\n')
    code, out, err = cli("config")
    assert code == 0
    (warning,) = [line for line in err.splitlines() if "unknown" in line]
    assert "unknown keys in [defaults] ignored: colour, gpu_typ" in warning
    code, out, err = cli("provision", "vast", "--gpus", "1", "--dry-run")
    assert code == 0, err
    assert [line for line in err.splitlines() if line.startswith("warning:")] == [
        line for line in err.splitlines() if "unknown keys in [defaults]" in line] != []


@pytest.mark.parametrize("text, fragment", [
    ("[defaults\n", "not valid TOML"),
    (b"[defaults]\ndisk = 1 # \xff\n", "not UTF-8"),
    ('defaults = 3\n', "'defaults' must be a section"),
    ('[defaults]\ndisk = "big"\n', "disk under [defaults] must be a positive whole number"),
    ('[defaults]\nmax_price = -1\n', "max_price under [defaults] must be a positive number"),
])
@pytest.mark.parametrize("command", [["config"], ["provision", "vast", "--gpus", "1", "--dry-run"],
                                     ["report"]])
def test_a_broken_config_is_one_line_and_a_non_zero_exit(cli, config, cloud, text, fragment, command):
    config(text)
    code, out, err = cli(*command)
    assert code != 0 and fragment in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_bad_variable_is_one_line(cli, monkeypatch):
    monkeypatch.setenv("GPUBENCH_MAX_PRICE", "cheap")
    code, out, err = cli("config")
    assert code == 1 and err.strip() == "error: $GPUBENCH_MAX_PRICE must be a positive number (got 'cheap')"


def _dry_run(cli, *args) -> list[dict]:
    code, out, err = cli("provision", "vast", "--gpus", "1", "--dry-run", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)["offers"]


def test_provision_takes_gpu_type_and_max_price_from_defaults(cli, config, cloud, monkeypatch):
    everything = _dry_run(cli)
    assert len({o["gpu_name"] for o in everything}) > 1
    config('[defaults]\ngpu_type = "RTX 4090"\nmax_price = 5.0\n')
    offers = _dry_run(cli)
    assert offers and {o["gpu_name"] for o in offers} == {"RTX 4090"}
    flagged = _dry_run(cli, "--gpu-type", "A100 SXM")          # the flag wins
    assert flagged and {o["gpu_name"] for o in flagged} <= {"A100 SXM", "A100 80GB", "A100 SXM4"}
    assert "RTX 4090" not in {o["gpu_name"] for o in flagged}
    config('[defaults]\nmax_price = 0.01\n')
    code, _, err = cli("provision", "vast", "--gpus", "1", "--dry-run")
    assert code != 0 and "0.01" in err                          # nothing that cheap
    monkeypatch.setenv("GPUBENCH_MAX_PRICE", "100")             # the environment over the file
    assert _dry_run(cli)


def test_results_dir_from_defaults_is_where_report_reads(cli, config, tmp_path):
    from tests.report.helpers import rec

    store = tmp_path / "my-results"
    store.mkdir()
    (store / "a.jsonl").write_text(json.dumps(rec(1, 10.0, 1.0)) + "\n")
    config(f'[defaults]\nresults = "{store}"\n')
    code, out, err = cli("report", "--format", "json")
    assert code == 0, err
    assert [r["throughput"] for r in json.loads(out)] == [10.0]
    code, out, err = cli("report", "--results", str(tmp_path / "elsewhere"))  # the flag wins
    assert code != 0 and "elsewhere does not exist" in err
