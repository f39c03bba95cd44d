"""`gpubench down`: terminate, confirm at the provider, say what it cost."""

from __future__ import annotations

from typing import Annotated

import typer

from gpubench.cli.confirm import confirm_or_stop
from gpubench.cli.options import DocumentFormatOpt, GoneTimeoutOpt, InstanceNameArg, YesOpt
from gpubench.cli.output import output_for
from gpubench.cli.render import err, format_dollars


def down(
    name: InstanceNameArg = None,
    all_: Annotated[bool, typer.Option("--all", help="Every instance in the ledger.")] = False,
    orphans: Annotated[bool, typer.Option(
        "--orphans", help="gpubench-* instances the ledger lacks.")] = False,
    yes: YesOpt = False,
    discard_outputs: Annotated[bool, typer.Option(
        "--discard-outputs", help="Terminate without pulling the files its runs left that were "
                                  "not brought back yet (they are lost).")] = False,
    timeout: GoneTimeoutOpt = 180.0,
    fmt: DocumentFormatOpt = "table",
) -> None:
    """Terminate NAME (or --all, or --orphans) and confirm the provider no longer has it.
    Files its runs left that were not brought back yet are named first, and pulled
    before it goes (asked; --yes pulls them; --discard-outputs gives them up)."""
    from gpubench.errors import GpubenchError
    from gpubench.lifecycle import keep_outputs
    from gpubench.lifecycle.down import DownRequest, plan_down, take_down
    from gpubench.lifecycle.fleet import settle_deadlines
    from gpubench.store.ledger import Ledger

    output = output_for(fmt)
    out = output.say
    request = DownRequest(name, all_, orphans, timeout).validate()
    with Ledger() as ledger:
        settle_deadlines(ledger, say=err)       # machines past their --max-hours deadline
        plan = plan_down(ledger, request, warn=err)
        if not plan.targets:
            out(plan.note)
            output.emit({"instances": [], "note": plan.note})
            return
        names = plan.describe()
        machines = [t.entry for t in plan.targets if t.entry is not None]
        held = [] if discard_outputs else keep_outputs.unpulled(machines)
        with output.prompts():
            if held:
                what = "; ".join(item.describe() for item in held)
                confirm_or_stop(f"{what}. Pull them into the results, then terminate {names}?",
                                f"would terminate {names}, but {what}: pass --yes to pull them first, "
                                "or --discard-outputs to give them up", yes=yes)
            else:
                confirm_or_stop(f"Terminate {names}?", f"would terminate {names}: pass --yes to confirm",
                                yes=yes)
        if held:   # before anything is terminated; a pull that fails keeps every machine
            keep_outputs.pull_unpulled(held, say=err)
        report = take_down(ledger, plan, say=err, on_result=lambda result: _say_result(result, out))
        if discard_outputs and (given_up := keep_outputs.discard(machines)):
            err(f"gave up the files of {given_up} count(s) that were not pulled (--discard-outputs)")
    if len(report.reached) > 1:
        billed = report.total_billed
        out(f"total cost {format_dollars(report.total_cost)}"
            + (f" (billed {format_dollars(billed)})" if billed is not None else ""))
    output.emit({"instances": [vars(r) for r in report.results], "all_gone": report.all_gone,
                 "total_cost": report.total_cost, "total_billed": report.total_billed})
    if not report.all_gone:
        raise GpubenchError("some instances may still be running: see 'gpubench ls'")


def _say_result(result, out) -> None:
    if not result.reached:
        err(f"error: {result.name}: {result.message}")
        return
    cost = f", cost {format_dollars(result.cost)} in total" if result.cost is not None else ""
    if result.billed is not None:
        cost += f" ({result.provider} billed {format_dollars(result.billed)})"
    if result.gone:
        out(f"{result.name}: {result.message} ({result.provider} {result.instance_id or '-'}){cost}")
    else:
        err(f"error: {result.name}: NOT confirmed gone: {result.message}{cost}")


def register(app: typer.Typer) -> None:
    app.command("down")(down)
