"""The options that several commands take are defined once (gpubench/cli/options.py):
every command that takes one uses the alias, so its flag, short option, help text and
default read the same everywhere; a flag with different meanings in different commands
has one alias per meaning. Every command's --help still works and shows them."""

from __future__ import annotations

import re
import typing

import pytest
import typer

from gpubench.cli import app, options
from gpubench.providers import registry


# Which commands take each shared option. A new alias, or a command that starts
# taking one, is added here.
USES = {
    "ProviderArg": {"provision", "bench", "volume create"},
    "ProvidersArg": {"offers"},
    "MachineGpusOpt": {"provision", "bench"},
    "MachineGpusFilterOpt": {"offers"},
    "GpuTypeOpt": {"provision", "bench", "providers stats", "volume create"},
    "OffersGpuOpt": {"offers", "advise", "predict"},
    "MaxPriceOpt": {"offers", "provision", "bench", "advise"},
    "DiskOpt": {"provision", "bench"},
    "ImageOpt": {"provision", "bench"},
    "NameOpt": {"provision", "bench"},
    "RegionOpt": {"offers", "provision", "volume create"},
    "AnyGpuOpt": {"provision", "bench"},
    "InstanceNameArg": {"down", "ssh", "pull", "top"},
    "YesOpt": {"provision", "bench", "down", "volume create", "volume rm", "top"},
    "AttemptsOpt": {"provision", "bench"},
    "BootTimeoutOpt": {"provision", "bench"},
    "SshTimeoutOpt": {"provision", "bench"},
    "MaxHoursOpt": {"provision", "bench"},
    "BudgetOpt": {"bench"},
    "GpuCountsOpt": {"run"},
    "WorkloadArgsArg": {"run", "bench", "advise", "predict"},
    "ForceOpt": {"run", "bench"},
    "RemotePythonOpt": {"run", "bench"},
    "WorkdirOpt": {"run", "bench"},
    "RunTimeoutOpt": {"run", "bench"},
    "RepeatOpt": {"run", "bench"},
    "MaxStepsOpt": {"run", "bench"},
    "TraceOpt": {"run", "bench"},
    "TraceStepsOpt": {"run", "bench"},
    "OutputsOpt": {"run", "bench"},
    "SetupOpt": {"run", "bench"},
    "InstallProjectOpt": {"run", "bench"},
    "VolumeOpt": {"provision", "bench", "offers"},
    "QuietOpt": {"run", "bench"},
    "PublicNetworkOpt": {"provision", "bench"},
    "GoneTimeoutOpt": {"down"},
    "ResultsOpt": {"run", "bench", "report", "logs", "advise", "predict"},
    "TotalGpusOpt": {"predict"},
    "WideOpt": {"offers", "ls", "report", "advise"},
    "ColumnsOpt": {"offers", "ls", "report"},
    "FormatOpt": {"offers", "ls", "report", "workloads", "providers stats", "advise", "volume ls"},
    "DocumentFormatOpt": {"provision", "down", "bench", "run", "config", "predict", "pull", "volume create",
                          "top"},
    "NoPreflightOpt": {"bench"},
    "PreflightOpt": {"provision", "run"},
    "ProceedOpt": {"run"},
    "MachineSizesOpt": {"advise"},
    "WorkBudgetOpt": {"advise"},
    "RowsOpt": {"offers", "advise"},
}

# Flags that two commands give different meanings and that stay with their one
# command each (ls --all: include terminated; down --all: every instance; provision
# --dry-run: rent nothing; run --dry-run: print the sbatch scripts, submit nothing;
# provision --nodes: how many machines the cluster has; run --nodes: node counts to sweep;
# offers --sort and advise --sort: orders of different things; providers stats --provider:
# one provider's figures; advise --provider: the providers to ask).
LOCAL_MEANINGS = {"--all", "--workload", "--interruptible", "--dry-run", "--nodes", "--sort", "--provider"}


def _aliases() -> dict[str, object]:
    return {name: value for name, value in vars(options).items()
            if typing.get_origin(value) is typing.Annotated}


def _info(annotated):
    """The typer OptionInfo/ArgumentInfo an Annotated alias carries."""
    return typing.get_args(annotated)[1]


def _callbacks() -> dict[str, object]:
    """Command path ('mock serve') -> the function typer calls."""
    found = {info.name: info.callback for info in app.registered_commands}
    for group in app.registered_groups:
        for info in group.typer_instance.registered_commands:
            found[f"{group.name} {info.name}"] = info.callback
    return found


def _click_commands() -> dict[str, object]:
    """Command path -> the click command typer built, with its params as users see them."""
    root = typer.main.get_command(app)
    found = {}

    def walk(command, path):
        for name, sub in command.commands.items():
            if hasattr(sub, "commands"):
                walk(sub, path + [name])
            else:
                found[" ".join(path + [name])] = sub
    walk(root, [])
    return found


def _alias_uses() -> dict[str, dict[str, str]]:
    """Alias name -> {command path: the parameter's name} for every parameter
    annotated with that alias."""
    by_info = {id(_info(alias)): name for name, alias in _aliases().items()}
    uses: dict[str, dict[str, str]] = {name: {} for name in by_info.values()}
    for path, callback in _callbacks().items():
        for param, hint in typing.get_type_hints(callback, include_extras=True).items():
            if typing.get_origin(hint) is typing.Annotated and id(_info(hint)) in by_info:
                uses[by_info[id(_info(hint))]][path] = param
    return uses


def _param(path: str, name: str):
    return next(p for p in _click_commands()[path].params if p.name == name)


def _flat(text: str) -> str:
    """Help text as one line, however click wrapped it (it breaks lines after hyphens too)."""
    return re.sub(r"\s+", " ", re.sub(r"-\n\s*", "-", text)).strip()


def test_every_alias_is_listed_and_used_where_listed():
    assert set(_aliases()) == set(USES)
    assert {name: set(paths) for name, paths in _alias_uses().items()} == USES


def test_a_shared_flag_has_one_help_text_unless_its_meanings_differ():
    alias_helps: dict[str, set[str]] = {}
    for alias in _aliases().values():
        info = _info(alias)
        if isinstance(info, typer.models.OptionInfo):
            alias_helps.setdefault(info.default, set()).add(info.help)
    seen: dict[str, dict[str, str]] = {}
    for path, command in _click_commands().items():
        for param in command.params:
            if param.param_type_name == "option":
                seen.setdefault(param.opts[0], {})[path] = param.help
    for flag, helps in seen.items():
        if flag in alias_helps:
            strays = {path: text for path, text in helps.items() if text not in alias_helps[flag]}
            assert strays == {}, f"{flag} defined outside options.py"
        elif len(helps) > 1:
            assert flag in LOCAL_MEANINGS, f"{flag} is taken by {sorted(helps)}: define it in options.py"
            assert len(set(helps.values())) == len(helps)


def test_commands_sharing_an_alias_agree_on_default_short_option_and_range():
    for name, paths in _alias_uses().items():
        params = [_param(path, param) for path, param in paths.items()]
        first = params[0]
        for other in params[1:]:
            assert (other.opts, other.secondary_opts, other.default, other.min, other.max) == \
                (first.opts, first.secondary_opts, first.default, first.min, first.max), name


@pytest.mark.parametrize("path, name, opts, default, required", [
    ("provision", "yes", ["--yes", "-y"], False, False),
    ("bench", "yes", ["--yes", "-y"], False, False),
    ("down", "yes", ["--yes", "-y"], False, False),
    ("provision", "disk", ["--disk"], 100, False),
    ("bench", "disk", ["--disk"], 100, False),
    ("run", "remote_python", ["--remote-python"], "python3", False),
    ("run", "timeout", ["--timeout"], 3600.0, False),
    ("down", "timeout", ["--timeout"], 180.0, False),
    ("ls", "fmt", ["--format"], "table", False),
    ("report", "fmt", ["--format"], "table", False),
    ("provision", "gpus", ["--gpus"], None, True),
    ("bench", "gpus", ["--gpus"], None, True),
    ("offers", "gpus", ["--gpus"], None, False),
    ("run", "gpus", ["--gpus"], None, False),
    ("provision", "provider", ["provider"], None, True),
    ("ssh", "name", ["name"], None, True),
    ("down", "name", ["name"], None, False),
])
def test_the_command_line_is_the_one_users_know(path, name, opts, default, required):
    param = _param(path, name)
    assert (sorted(param.opts + param.secondary_opts), param.default, param.required) == \
        (sorted(opts), default, required)


def test_one_flag_with_two_meanings_has_two_aliases():
    assert _param("run", "gpus").help == options.GPU_COUNTS_HELP
    assert _param("provision", "gpus").help == _param("bench", "gpus").help == options.MACHINE_GPUS_HELP
    assert _param("run", "timeout").min == _param("bench", "timeout").min == 1
    assert _param("down", "timeout").min is None
    assert _param("down", "timeout").help == options.GONE_TIMEOUT_HELP != options.RUN_TIMEOUT_HELP


def test_provider_help_comes_from_the_registry(cli):
    assert options.PROVIDER_HELP == f"{registry.help_names()}."
    assert registry.help_names() in options.PROVIDERS_HELP
    for command in ("provision", "bench", "offers"):
        code, out, _ = cli(command, "--help")
        assert code == 0 and registry.help_names() in _flat(out)


def test_gpubench_help_lists_every_command(cli):
    code, out, err = cli("--help")
    assert code == 0 and err == ""
    listed = set(re.findall(r"^  (\w+)", out.split("Commands:")[1], re.M))
    assert listed == {path.split()[0] for path in _click_commands()}


@pytest.mark.parametrize("path", ["mock", *sorted(_click_commands())])
def test_each_command_help_shows_its_options(cli, path):
    code, out, err = cli(*path.split(), "--help")
    assert code == 0 and err == "" and out.startswith(f"Usage: gpubench {path}")
    shown = _flat(out)
    for param in getattr(_click_commands().get(path), "params", []):
        if param.help:
            assert _flat(param.help) in shown, (path, param.name)


@pytest.mark.parametrize("argv, message", [
    (["run", "mnist-ddp", "--timeout", "0"], "error: Invalid value for '--timeout': "
     "Input should be greater than or equal to 1 (see 'gpubench run --help')"),
    (["bench", "lambda", "--gpus", "1", "--workload", "mnist-ddp", "--timeout", "0"],
     "error: Invalid value for '--timeout': Input should be greater than or equal to 1 "
     "(see 'gpubench bench --help')"),
    (["provision", "vast", "--gpus", "x"], "error: Invalid value for '--gpus': Input should be a "
     "valid integer, unable to parse string as an integer (see 'gpubench provision --help')"),
    (["bench", "lambda", "--workload", "mnist-ddp"], "error: Missing option '--gpus'. "
     "(see 'gpubench bench --help')"),
    (["offers", "--max-price", "cheap"], "error: Invalid value for '--max-price': Input should be "
     "a valid number, unable to parse string as a number (see 'gpubench offers --help')"),
    (["offers", "--format", "xml"], "error: --format: 'xml' is not one of table, csv, json, markdown"),
    (["report", "--format", "xml"], "error: --format: 'xml' is not one of table, markdown, csv, json"),
    (["bench", "lambda", "--gpus", "1", "--workload", ","],
     "error: --workload: name at least one workload (see 'gpubench workloads')"),
])
def test_bad_values_keep_their_exit_code_and_message(cli, argv, message):
    code, out, err = cli(*argv)
    assert (code, out, err) == (2, "", message + "\n")
