"""`gpubench pull NAME`: bring back what a rented machine's runs left that is not here
yet: their declared outputs and what they left undeclared, into the results directory
each run wrote to (<results>/<run id>/outputs/<count>/)."""

from __future__ import annotations

import typer

from gpubench.cli.options import DocumentFormatOpt, InstanceNameArg
from gpubench.cli.output import output_for
from gpubench.cli.render import err


def pull(name: InstanceNameArg = None, fmt: DocumentFormatOpt = "table") -> None:
    """Pull the files NAME's runs left there that were not brought back yet."""
    from gpubench.errors import UsageError
    from gpubench.lifecycle import keep_outputs
    from gpubench.store.ledger import Ledger

    if not name:
        raise UsageError("name the machine to pull from (see 'gpubench ls')")
    output = output_for(fmt)
    with Ledger() as ledger:
        machines = ledger.cluster_members(name) or [ledger.find(name)]
    machines = [m for m in machines if not m.termination_confirmed]
    if not machines:
        raise UsageError(f"{name} is terminated: what it held is gone")
    held = keep_outputs.unpulled(machines)
    if not held:
        output.say(f"{name}: nothing to pull (every run's outputs are here)")
        output.emit({"name": name, "pulled": 0, "runs": []})
        return
    for item in held:
        err(item.describe())
    count = keep_outputs.pull_unpulled(held, say=output.say)
    runs = sorted({row.run_id for item in held for row in item.rows})
    output.say(f"{name}: {count} file(s) pulled")
    output.emit({"name": name, "pulled": count, "runs": runs,
                 "dest": sorted({row.dest for item in held for row in item.rows})})


def register(app: typer.Typer) -> None:
    app.command("pull")(pull)
