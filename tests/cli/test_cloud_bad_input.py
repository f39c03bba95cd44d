"""Bad input to the cloud commands (offers, provision, down, ssh, ls): one clear line
on stderr, non-zero exit, no traceback."""

import pytest


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
def test_one_clear_line(cli, args, words):
    code, out, err = cli(*args)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err
    assert "Traceback" not in err


def test_offers_without_any_key_warns_per_provider(cli):
    code, out, err = cli("offers")
    assert code == 1
    assert len(err.strip().splitlines()) == 3 and all(l.startswith("warning:") for l in err.strip().splitlines())
