"""Bad input: one clear line on stderr, non-zero exit, no traceback; and the CLI stays light."""

import subprocess
import sys

import pytest

from gpubench.cli import main


def run(capsys, *args):
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(list(args))
    out, err = capsys.readouterr()
    return e.value.code, out, err


@pytest.mark.parametrize("args,words", [
    (["provision", "azure", "--gpus", "1"], "unknown provider 'azure'"),
    (["offers", "azure"], "unknown provider 'azure'"),
    (["provision", "vast", "--gpus", "1", "--disk", "-5"], "--disk"),
    (["provision", "vast", "--gpus", "0"], "--gpus must be at least 1"),
    (["offers", "--gpus", "0"], "--gpus must be at least 1"),
    (["provision", "vast", "--gpus", "1"], "VAST_API_KEY"),             # no key anywhere
    (["provision", "lambda", "--gpus", "1", "--name", "Bad Name!"], "--name"),
    (["down"], "exactly one of NAME"),
    (["down", "ghost", "--yes"], "no instance named 'ghost'"),
    (["ssh", "ghost"], "no instance named 'ghost'"),
    (["ls", "--format", "xml"], "--format"),
])
def test_one_clear_line(capsys, args, words):
    code, out, err = run(capsys, *args)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err
    assert "Traceback" not in err


def test_offers_without_any_key_warns_per_provider(capsys):
    code, out, err = run(capsys, "offers")
    assert code == 1
    assert len(err.strip().splitlines()) == 3 and all(l.startswith("warning:") for l in err.strip().splitlines())


def test_importing_the_cli_loads_no_adapter():
    code = ("import sys, gpubench.cli; "
            "bad = [m for m in sys.modules if m.split('.')[-1] in ('lambda_cloud', 'vast', 'runpod', 'http')"
            " or m.startswith(('torch', 'pandas', 'requests', 'paramiko'))]; print(bad)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_registry_is_one_line_per_provider():
    from gpubench.providers import registry

    assert registry.names() == ["lambda", "vast", "runpod"]
    assert all(e.module.startswith("gpubench.providers.") for e in registry.entries())
