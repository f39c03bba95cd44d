"""A project's files and flags that cannot be used: one line each, nothing run."""

from __future__ import annotations

import pytest

from tests.helpers import one_line


@pytest.fixture
def proj(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("print('hello')\n")
    return proj


@pytest.mark.parametrize("args, files, words", [
    (["--outputs", "/etc/passwd"], {}, "is outside the project"),
    (["--outputs", "../elsewhere/"], {}, "is outside the project"),
    ([], {"train.py": "# /// script\n# dependencies = ['a']\n# ///\nimport os\n# /// script\n# dependencies = []\n# ///\n"},
     "two '# /// script' blocks"),
    ([], {"train.py": "# /// script\n# dependencies = [1\n# ///\n"}, "not TOML"),
    ([], {"requirements.txt": "rich\ntorch>>2\n"}, "requirements.txt line 2: 'torch>>2' is not a requirement"),
    ([], {"pyproject.toml": "[tool.gpubench]\nouputs = 'x/'\n"}, "unknown key 'ouputs'"),
    (["--setup", "python prepare.py"], {}, "--setup runs once on a machine gpubench prepares"),
    (["--on", "slurm", "--setup", "python prepare.py"], {}, "--setup has no meaning on Slurm"),
])
def test_bad_project_input_is_one_line(cli, proj, tmp_path, args, files, words):
    for name, text in files.items():
        (proj / name).write_text(text)
    code, out, err = cli("run", str(proj / "train.py"), "--workdir", str(proj), "--gpus", "1",
                         "--results", str(tmp_path / "results"), *args)
    assert code == 2, out + err
    assert words in one_line(err)
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_outputs_and_setup_are_for_scripts(cli, tmp_path):
    code, _, err = cli("run", "mnist-ddp", "--outputs", "x/", "--results", str(tmp_path))
    assert code == 2 and "--outputs is for your own scripts" in one_line(err)
