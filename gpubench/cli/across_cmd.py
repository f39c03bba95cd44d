"""`gpubench bench all --candidates K` (or `bench lambda,vast ...`): the command's side
of a bench across providers. The plan (bench/shortlist.py) in one question listing
each candidate with its price, its predicted cost and this bench's estimate, and the
total (one line under --yes); the candidates rented and swept at once
(bench/across.py) under one live board (cli/board.py); then one report across them:
each workload's table of this bench's records (measured beside predicted, the cost
story saying which is cheapest per epoch and which fastest, by how much), what each
machine cost (billed where the provider says), and the candidates: measured or
dropped and why, the machines each took, the money thrown away on replaced ones, and
the total."""

from __future__ import annotations

from gpubench.cli.confirm import ask, confirm_or_stop
from gpubench.cli.render import err
from gpubench.errors import UsageError

DEFAULT_CANDIDATES = 3


def is_across(provider: str, candidates: int | None) -> bool:
    """`bench all`, `bench lambda,vast`, or any bench given --candidates."""
    return candidates is not None or provider.strip().lower() == "all" or "," in provider


def check_flags(hosts: int, nodes: str | None, parallel: bool, keep: bool) -> None:
    """What a bench of one machine type takes and a bench across candidates does not."""
    given = [flag for flag, on in (("--hosts", hosts != 1), ("--nodes", nodes is not None),
                                   ("--parallel", parallel), ("--keep", keep)) if on]
    if given:
        raise UsageError(f"{' and '.join(given)} do not go with a bench across candidates "
                         "(all, several providers, or --candidates): it rents one machine per "
                         "candidate, all at once, and gives every one back")


def bench_across_cli(output, req, provider: str, candidates: int | None, yes: bool, quiet: bool,
                     store, refs) -> None:
    """Plan, ask, rent and sweep every candidate at once, report across them."""
    import time

    from gpubench.bench.across import bench_across, spent_on
    from gpubench.bench.shortlist import check_name, names_for, parse_providers, plan_across
    from gpubench.cli.board import board_for
    from gpubench.lifecycle.provision import default_name

    base = req.name or default_name("bench")
    check_name(base)                       # before the providers are asked
    k = DEFAULT_CANDIDATES if candidates is None else candidates   # 0 is refused, not the default
    plan = plan_across(req, parse_providers(provider), k, err)
    with output.prompts():
        confirm_or_stop(question(plan), "nothing rented: pass --yes to rent without a terminal to "
                                        "confirm on", yes=yes)
    names = names_for(base, len(plan.chosen))
    spent = spent_on(names, time.time())
    with board_for(list(zip(names, [s.label for s in plan.chosen])), output.as_json, quiet, plan.budget,
                   spent) as board:
        if yes:
            board.say(plan.one_line())
        result = bench_across(plan, base, store, board.say, board.echo_for,
                              ask=None if yes else _asking(output, board))
    from gpubench.cli.across_report import report_across   # pandas: only once there is a report
    from gpubench.cli.trace_table import say_traces

    try:
        report_across(output, store, refs, plan, result)
    finally:  # --trace's table, the runs failed or not
        say_traces(output.say, store.directory, result.records, result.run_ids)


def question(plan) -> str:
    """Every candidate on a line of its own, then the total and what confirming agrees to."""
    n = len(plan.chosen)
    lines = [f"Rent {n} machines at once, one per candidate, for this bench?" if n > 1
             else "Rent 1 machine, the one candidate, for this bench?"]
    lines += [f"  {i}. {s.describe()}" for i, s in enumerate(plan.chosen, start=1)]
    lines.append(f"  {plan.summary()}; each terminated at the end")
    return "\n".join(lines)


def _asking(output, board):
    """A question about a machine other than the one confirmed, with the board paused."""
    def asked(text: str) -> bool:
        with board.paused(), output.prompts():
            return ask(text)
    return asked
