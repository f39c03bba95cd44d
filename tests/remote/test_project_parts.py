"""The parts of a project's preparation that need no machine: which installer, the
venv for an externally managed python, the pull filters, the ledger of outputs."""

from __future__ import annotations

import pytest

from gpubench.project import Requirements
from gpubench.remote.deps import DependencyError, PythonFacts, install_command
from gpubench.remote.pull import filters, matches
from gpubench.store.outputs import OutputsLedger


def facts(**changes) -> PythonFacts:
    base = dict(executable="/usr/bin/python3", held={"torch": "2.13.0+cu128", "nvidia-nccl-cu12": "2.27.3"},
                externally_managed=False, in_venv=False, site_writable=True, uv="/usr/local/bin/uv",
                uv_sees_torch=True, pip=True)
    return PythonFacts(**{**base, **changes})


def test_uv_where_it_sees_torch_pip_where_it_does_not_and_never_neither():
    reqs = Requirements("requirements.txt", ("rich",), "requirements.txt")
    installer, command = install_command(facts(), "python3", reqs, "gpubench/state/deps/abc")
    assert installer == "uv"
    assert command == ("/usr/local/bin/uv pip install --python python3 -r requirements.txt "
                       '-c "$HOME"/gpubench/state/deps/abc.constraints.txt')
    installer, command = install_command(facts(uv_sees_torch=False), "python3", reqs, "/s/deps/abc")
    assert (installer, command) == ("pip", "python3 -m pip install --disable-pip-version-check "
                                           "-r requirements.txt -c /s/deps/abc.constraints.txt")
    with pytest.raises(DependencyError, match="has no pip, and uv does not see its torch"):
        install_command(facts(uv_sees_torch=False, pip=False), "python3", reqs, "/s/x")


def test_requires_lines_beside_a_travelling_file_are_written_out_and_the_project_installed():
    reqs = Requirements("requirements.txt and ...", ("rich", "tiktoken"), "requirements.txt", True,
                        added=("tiktoken",))
    _, command = install_command(facts(), "py", reqs, "/s/d")
    assert "-r requirements.txt -r /s/d.requirements.txt -c /s/d.constraints.txt ." in command
    assert reqs.written == "tiktoken\n"


def test_the_held_versions_are_the_constraints_and_a_managed_python_needs_a_venv():
    assert facts().constraints() == "nvidia-nccl-cu12==2.27.3\ntorch==2.13.0+cu128\n"
    assert facts(externally_managed=True).needs_venv
    assert facts(site_writable=False).needs_venv
    assert not facts(externally_managed=True, in_venv=True).needs_venv


def test_output_patterns_as_rsync_filters_and_matches():
    assert filters(()) == []
    assert filters(("checkpoints/", "runs/*.pt", "final.pt")) == [
        "--include=/checkpoints/***", "--include=/runs/*.pt", "--include=/final.pt",
        "--include=/final.pt/***", "--include=*/", "--exclude=*", "--prune-empty-dirs"]
    patterns = ("checkpoints/", "runs/*.pt")
    assert matches("checkpoints/a/b.pt", patterns) and matches("runs/x.pt", patterns)
    assert not matches("scratch.bin", patterns) and not matches("runs/x.txt", patterns)


def test_the_outputs_ledger_knows_what_is_still_on_the_machine(tmp_path):
    with OutputsLedger(tmp_path / "ledger.sqlite") as ledger:
        big = ("big", 7)
        declared = ledger.begin(big, "run1", "1gpu", "gpubench/workdir", ("checkpoints/",), tmp_path / "d1")
        undeclared = ledger.begin(big, "run1", "2gpus", "gpubench/workdir", (), tmp_path / "d2")
        ledger.begin(("other", 8), "run2", "1gpu", "w", ("x/",), tmp_path / "d3")
        assert [r.label for r in ledger.pending([big])] == ["1gpu"]   # killed: its declared ones
        assert ledger.pending([("big", 9)]) == []   # a later machine of the same name is another
        ledger.ended(declared, ".gpubench-left-behind/a", [])
        ledger.pulled(declared)
        ledger.ended(undeclared, ".gpubench-left-behind/b", [("scratch.bin", 3000)])
        (row,) = ledger.pending([big])
        assert (row.label, row.left, row.declared_pending, row.left_pending) == (
            "2gpus", [("scratch.bin", 3000)], False, True)
        ledger.discarded(row.row_id)
        assert ledger.pending([big]) == []
