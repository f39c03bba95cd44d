"""The launchers an --on value can name by a scheme (`--on slurm`, `--on
slurm:LOGIN`), and the command-line flags each takes.

Adding a way of launching is one module that opens its launchers
(`open_launcher(rest_of_the_on_value, LaunchOptions) -> Launcher`), a module of
its flags (FLAGS, a tuple of LauncherFlag, and `options_from(given, options)`
turning the flags the user gave into what the launcher reads as
LaunchOptions.scheme_options), and one line in SCHEMES. `gpubench run` gains its
flags from here; the flags module is imported when the CLI starts, so it keeps to
the standard library and its own options.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class LauncherFlag:
    """One command-line flag that only a scheme's launcher reads."""

    name: str            # the parameter, and the key of the given flags: "partition"
    flag: str            # "--partition"
    kind: type           # str, int, float, or list (repeatable, of str)
    default: object      # the value when not given; a flag left at it counts as not given
    help: str
    min: float | None = None


@dataclass(frozen=True)
class Scheme:
    name: str                        # what --on starts with: "slurm"
    module: str                      # opens its launchers: open_launcher(rest, options)
    flags_module: str | None = None  # FLAGS and options_from(given, price, results_dir); None: no flags
    title: str = ""                  # how messages name it: "Slurm"
    on_hint: str = ""                # how to ask for it: "--on slurm or --on slurm:[user@]LOGIN"
    dry_run: bool = False            # its launcher shows what it would run (Launcher.dry_run)

    @property
    def flags(self) -> tuple[LauncherFlag, ...]:
        if self.flags_module is None:
            return ()
        return importlib.import_module(self.flags_module).FLAGS


SCHEMES: dict[str, Scheme] = {
    "slurm": Scheme("slurm", "gpubench.launch.slurm", "gpubench.launch.slurm.options", "Slurm",
                    "--on slurm or --on slurm:[user@]LOGIN", dry_run=True),
}
