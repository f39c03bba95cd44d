"""The commands the README and docs/ show, run: those that ask and predict (offers,
advise, predict, workloads) against the mock cloud, in-process, and every other one
(provision, run, bench, down, ...) parsed by the command line it names, so a renamed
flag, a removed command or a value it refuses fails here before a reader meets it."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import typer

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Run for real against the mock: they rent nothing and start no workload.
RUN = {"offers", "advise", "predict", "workloads"}


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def commands(block: str) -> list[list[str]]:
    """Each `gpubench ...` command of a shell block, as its arguments after `gpubench`:
    continued lines joined, comments dropped, `;`, `&&` and a trailing `&` taken as the
    shell takes them, a redirect and its target left out."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        words = iter(shlex.split(line.replace(";", " ; "), comments=True) + [";"])
        command: list[str] = []
        for word in words:
            if word in (";", "&&", "&", "||"):
                if command[:1] == ["gpubench"]:
                    found.append(command[1:])
                command = []
            elif word in (">", ">>", "<", "2>"):
                next(words, None)
            else:
                command.append(word)
    return found


def documented() -> list[tuple[str, list[str]]]:
    out = []
    for page in PAGES:
        for block in shell_blocks(page.read_text()):
            out += [(page.relative_to(REPO).as_posix(), args) for args in commands(block)]
    return out


DOCUMENTED = documented()


def test_every_page_shows_commands_and_the_readme_stays_short():
    pages = {page for page, _ in DOCUMENTED}
    assert {"README.md", "docs/running.md", "docs/renting.md", "docs/advise.md", "docs/bench.md",
            "docs/clusters.md", "docs/mock-cloud.md", "docs/reports.md"} <= pages
    assert len((REPO / "README.md").read_text().splitlines()) <= 200
    for page in PAGES:            # every page the README names exists, and the reverse
        if page.parent.name == "docs":
            assert f"(docs/{page.name})" in (REPO / "README.md").read_text(), page.name


def _parse(args: list[str]) -> None:
    """The arguments through the command line, down to the command they name, without
    running it: unknown commands, flags and refused values raise click's errors."""
    from gpubench.cli import app

    command = typer.main.get_command(app)
    ctx = command.make_context("gpubench", list(args))
    while hasattr(command, "resolve_command"):       # a group: the next word names a command
        words = [*(getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", [])), *ctx.args]
        name, command, rest = command.resolve_command(ctx, words)
        ctx = command.make_context(name, rest, parent=ctx)


def test_a_wrong_command_does_not_parse():
    for args in (["run", "mnist-ddp", "--bogus"], ["provision", "vast", "--gpus", "x"], ["nosuch"]):
        with pytest.raises(Exception, match="No such|valid integer"):
            _parse(args)


@pytest.mark.parametrize(("page", "args"), [d for d in DOCUMENTED if d[1][:1] and d[1][0] not in RUN],
                         ids=lambda v: v if isinstance(v, str) else " ".join(v)[:60])
def test_a_documented_command_parses(page, args):
    _parse(args)


RUNNABLE = [d for d in DOCUMENTED if d[1][:1] and d[1][0] in RUN and not any(a.endswith(".py") for a in d[1])]


def test_every_documented_question_runs_against_the_mock(cloud, cli, tmp_path):
    """One mock cloud for all of them (each its own results folder): they only ask."""
    assert len(RUNNABLE) >= 10
    for n, (page, args) in enumerate(RUNNABLE):
        code, out, err = cli(*args[:1], *_with_results(args[0], args[1:], tmp_path / str(n)))
        assert code == 0, f"{page}: gpubench {' '.join(args)}\n{err}"
        assert out.strip(), f"{page}: gpubench {' '.join(args)} printed nothing"


def _with_results(command: str, rest: list[str], tmp_path: Path) -> list[str]:
    """Its records from an empty folder of the test's, never the checkout's results/."""
    if command not in ("advise", "predict") or "--results" in rest:
        return rest
    if "--" in rest:
        i = rest.index("--")
        return [*rest[:i], "--results", str(tmp_path / "results"), *rest[i:]]
    return [*rest, "--results", str(tmp_path / "results")]


# The leave-one-out median error has one source: what the fit wrote beside its constants.
FIT_FILE = "gpubench/predict/step_constants.json"


def test_the_leave_one_out_median_is_the_fits_own_figure_wherever_it_is_given():
    """README.md and docs/advise.md give the leave-one-out median error that the fit wrote
    (`loo_median_error` in step_constants.json), and name that file: a refit that moves
    the figure fails here until every page says the new one."""
    fitted = f"{json.loads((REPO / FIT_FILE).read_text())['loo_median_error']:.0%}"
    for page in ("README.md", "docs/advise.md"):
        text = " ".join((REPO / page).read_text().split())
        sentences = [s for s in re.split(r"(?<=[.;)])\s", text)
                     if re.search(r"left out one at a time|leave-one-out", s) and "median" in s]
        figures = re.findall(r"median(?: error)?(?: of)? (\d+(?:\.\d+)?%)", " ".join(sentences))
        assert figures and set(figures) == {fitted}, (page, figures, fitted)
        assert f"`loo_median_error` in {FIT_FILE}" in text, page


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    from tests.helpers import mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch)
