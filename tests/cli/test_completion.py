"""Shell completion as typer provides it: `--show-completion` prints a script,
`--install-completion` installs it in the user's shell start-up files, and a Tab
completes provider names and workload names (the shell asks the real executable)."""

from __future__ import annotations

import pytest

from gpubench.cli import completion
from gpubench.providers import registry
from gpubench.suite import suite_names
from tests.helpers import run_gpubench

# typer's switch for naming the shell on the command line instead of detecting the
# one the tests run under (shellingham), so each shell's script can be asked for.
NAMED_SHELL = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}


@pytest.mark.parametrize("shell, marker", [("bash", "_GPUBENCH_COMPLETE=complete_bash"),
                                           ("zsh", "_GPUBENCH_COMPLETE=complete_zsh"),
                                           ("fish", "complete_fish")])
def test_show_completion_prints_the_script_for_a_shell(shell, marker):
    r = run_gpubench("--show-completion", shell, env=NAMED_SHELL, timeout=60)
    assert r.returncode == 0, r.stderr
    assert marker in r.stdout and "gpubench" in r.stdout


def test_install_completion_writes_into_the_users_home(isolated):
    r = run_gpubench("--install-completion", "bash", env=NAMED_SHELL, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "completion installed" in r.stdout.lower()
    assert "_GPUBENCH_COMPLETE" in (isolated.home / ".bash_completions" / "gpubench.sh").read_text()
    assert ".bash_completions/gpubench.sh" in (isolated.home / ".bashrc").read_text()


def _tab(words: str) -> list[str]:
    """What bash would be offered for the last word of `words` (ending in a space:
    a new, empty word)."""
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    r = run_gpubench(env={"COMP_WORDS": words, "COMP_CWORD": str(cword),
                          "_GPUBENCH_COMPLETE": "complete_bash"}, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_tab_completes_providers_and_workloads():
    assert _tab("gpubench provision ") == registry.names()
    assert _tab("gpubench offers v") == ["vast"]
    assert _tab("gpubench run gp") == ["gpt-ddp", "gpt-fsdp"]
    assert _tab("gpubench bench lambda --workload mnist-ddp,r") == ["mnist-ddp,resnet-ddp", "mnist-ddp,recsys-ddp"]
    assert _tab("gpubench bench lambda --args gpt-f") == ["gpt-fsdp="]


def test_completion_functions():
    assert completion.provider_names("") == registry.names()
    assert completion.workload_names("") == suite_names()
    assert completion.workload_list("gpt-ddp,") == [f"gpt-ddp,{n}" for n in suite_names() if n != "gpt-ddp"]
    assert completion.workload_arg_names("gpt-ddp=--n") == []
