"""The root of the command line: wires the command modules together, holds
--version, and turns every expected failure into one line on stderr."""

from __future__ import annotations

import gc
import sys

from gpubench.onhost import machine_load

# gpubench's start: a local run's check of other work on the machine counts its window
# from here (less gpubench's own CPU) instead of waiting it out before the run
machine_load.first_mark()

import typer  # noqa: E402

from gpubench import __version__  # noqa: E402
from gpubench.cli import (advise_cmd, bench_cmd, config_cmd, down_cmd, logs_cmd,  # noqa: E402
                          ls_cmd, mock_cmd, offers_cmd, predict_cmd, provision_cmd, providers_cmd,
                          pull_cmd, report_cmd, run_cmd, ssh_cmd, top_cmd, volume_cmd,
                          workloads_cmd)
from gpubench.cli.render import err  # noqa: E402
from gpubench.errors import GpubenchError  # noqa: E402

app = typer.Typer(
    name="gpubench",
    help="Benchmark PyTorch DDP workloads across GPU counts and cloud providers.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        print(f"gpubench {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Benchmark PyTorch DDP workloads across GPU counts and cloud providers."""


run_cmd.register(app)
report_cmd.register(app)
logs_cmd.register(app)
workloads_cmd.register(app)
mock_cmd.register(app)
offers_cmd.register(app)
advise_cmd.register(app)
predict_cmd.register(app)
provision_cmd.register(app)
ls_cmd.register(app)
down_cmd.register(app)
ssh_cmd.register(app)
top_cmd.register(app)
pull_cmd.register(app)
volume_cmd.register(app)
bench_cmd.register(app)
providers_cmd.register(app)
config_cmd.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: click's own usage errors and ours both end as one line."""
    try:
        code = app(args=argv, prog_name="gpubench", standalone_mode=False)
    except GpubenchError as e:  # ours, and a provider's refusal in its own words
        err(f"error: {e}")
        sys.exit(e.exit_code)
    except typer.TyperException as e:  # typer's own usage errors: bad option, missing argument
        if type(e).__name__ == "NoArgsIsHelpError":
            print(e.format_message())
            sys.exit(0)
        ctx = getattr(e, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        err(f"error: {e.format_message()}{hint}")
        sys.exit(2 if hint else e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err("interrupted")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    if code == 130:  # typer turns Ctrl-C into exit code 130
        err("interrupted")
    sys.exit(code if isinstance(code, int) else 0)


def entry() -> None:
    """The program (`gpubench`, `python -m gpubench`): main(), whose objects are then kept
    out of the interpreter's last garbage collection: at exit it would walk every object
    pandas, numpy and pydantic made, 0.15 s of a command on a 2-core machine
    (benchmarks/overhead.py command), to free what the process's end frees anyway."""
    try:
        main()
    finally:
        gc.freeze()
