"""Naming workloads on the command line: `run WORKLOAD [--workdir DIR]` and
`bench --workload A,B [--workdir DIR]` resolve through gpubench.suite."""

from __future__ import annotations

import pytest

from gpubench import suite
from gpubench.errors import UnknownWorkloadError, UsageError


@pytest.fixture
def project(tmp_path):
    (tmp_path / "proj").mkdir()
    script = tmp_path / "proj" / "train.py"
    script.write_text("print('hi')\n")
    return tmp_path / "proj"


def test_resolve_with_a_workdir_sends_the_project(project):
    ref = suite.resolve(str(project / "train.py"), project)
    assert (ref.in_suite, ref.workdir) == (False, project.resolve())
    assert ref.script == (project / "train.py").resolve()
    assert suite.resolve(str(project / "train.py")).workdir is None
    with pytest.raises(UsageError, match="^--workdir is for your own scripts; mnist-ddp is a suite "
                                         "workload$"):
        suite.resolve("mnist-ddp", project)


def test_resolve_list_takes_names_and_scripts_in_order(project):
    refs = suite.resolve_list(f" mnist-ddp, ,{project / 'train.py'},gpt-ddp,")
    assert [r.in_suite for r in refs] == [True, False, True]
    assert refs[0].name == "mnist-ddp" and refs[2].name == "gpt-ddp"
    assert all(r.workdir is None for r in refs)


def test_resolve_list_gives_the_workdir_to_scripts_only(project):
    suite_ref, own = suite.resolve_list(f"mnist-ddp,{project / 'train.py'}", project)
    assert suite_ref.workdir is None and own.workdir == project.resolve()


@pytest.mark.parametrize("names, message", [
    ("", "--workload: name at least one workload (see 'gpubench workloads')"),
    (" , ", "--workload: name at least one workload (see 'gpubench workloads')"),
])
def test_resolve_list_needs_a_workload(names, message):
    with pytest.raises(UsageError) as e:
        suite.resolve_list(names)
    assert str(e.value) == message and e.value.exit_code == 2


def test_a_workdir_with_only_suite_workloads_is_a_usage_error(project):
    with pytest.raises(UsageError, match="^--workdir is for your own scripts; --workload names only "
                                         "suite workloads$"):
        suite.resolve_list("mnist-ddp,gpt-ddp", project)


def test_resolve_list_names_an_unknown_workload(project, tmp_path):
    with pytest.raises(UnknownWorkloadError, match="unknown workload 'nope'"):
        suite.resolve_list("mnist-ddp,nope")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("")
    with pytest.raises(UsageError, match="is not inside"):
        suite.resolve_list(f"{outside}", project)
