"""`gpubench logs RUN [COUNT]`: the whole output of a sweep's runs, kept beside
its records (results/logs/<run id>/<count>.log)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpubench.cli.options import ResultsOpt
from gpubench.cli.render import out


def logs(
    run: Annotated[str, typer.Argument(help="A run id (or a unique prefix of one), as "
                                            "'gpubench run' and 'gpubench report' show it.")],
    count: Annotated[Optional[int], typer.Argument(
        help="Only the runs at this GPU count [default: every count].")] = None,
    results: ResultsOpt = None,
) -> None:
    """Print the whole output of RUN's runs: each count (and each repeat) in turn."""
    from gpubench.sweep import runlogs
    from gpubench.errors import UsageError
    from gpubench.store.results import ResultsStore

    from gpubench.cli.settings import flag_or_default

    store = ResultsStore.existing(flag_or_default("results", results))
    run_id, files = runlogs.run_logs(store.directory, run)
    if count is not None:
        chosen = runlogs.for_count(files, count)
        if not chosen:
            counts = sorted({c for c in (runlogs.world_of(p) for p in files) if c is not None})
            raise UsageError(f"run {run_id} has no log at {count} GPU(s); its counts: "
                             f"{', '.join(map(str, counts)) or 'none'}")
        files = chosen
    for i, path in enumerate(files):
        if len(files) > 1:
            out(("\n" if i else "") + f"==> {path} <==")
        out(path.read_text(encoding="utf-8", errors="replace").rstrip("\n"))


def register(app: typer.Typer) -> None:
    app.command("logs")(logs)
