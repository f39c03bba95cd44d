"""The report at the end of a bench across candidates: the report's own tables over
this bench's records alone (so its cost story compares the candidates: the cheapest
per epoch, the fastest, by how much; each row measured beside predicted), what each
machine cost, billed where the provider says (report/hosts.py), then the candidates
themselves: predicted, measured or dropped and why, and what each cost with the
machines thrown away on the way, and the total in one sentence."""

from __future__ import annotations

import typer

from gpubench.cli.output import run_document, say_load_warnings
from gpubench.cli.render import err
from gpubench.format import format_dollars
from gpubench.report.tables import Section

COLUMNS = [("rank", "#"), ("candidate", "candidate"), ("machine", "machine"),
           ("price_per_hour", "$/h"), ("predicted", "predicted epoch"), ("outcome", "outcome"),
           ("machines", "machines"), ("cost", "cost"), ("thrown_away", "thrown away"),
           ("billed", "billed"), ("why", "why")]


def report_across(output, store, refs, plan, result) -> None:
    """Each workload's table of this bench's records, the machines' costs, the
    candidates and the total; exit 1 if a candidate was dropped, a run failed or the
    budget stopped the bench."""
    from gpubench.report.hosts import host_sections
    from gpubench.report.render import render_report, render_section

    loaded = store.load()
    ours = [r for r in loaded.records if r.get("run_id") in set(result.run_ids)]
    for ref in refs:
        if any(r.get("workload") == ref.name for r in ours):
            output.say("")
            output.say(render_report(ours, "table", workload=ref.name))
    for section in host_sections(ours) + [candidates_section(result)]:
        output.say("")
        output.say(render_section(section, "table"))
    say_load_warnings(loaded.warnings)
    if output.as_json:
        output.emit(run_document(result.run_ids, result.records, store, ours, [r.name for r in refs],
                                 all_ok=result.all_ok, budget_stop=result.budget_stop,
                                 cost=result.cost, thrown_away=result.thrown_away, billed=result.billed,
                                 candidates=[candidate_row(i, o) for i, o in
                                             enumerate(result.outcomes, start=1)]))
    if result.budget_stop:
        err(f"error: {result.budget_stop}")
    if not result.measured:
        err("error: no candidate was measured: " + "; ".join(f"{o.label}: {o.dropped}"
                                                            for o in result.outcomes))
    if not result.all_ok or result.budget_stop:
        raise typer.Exit(1)


def candidate_row(rank: int, o) -> dict:
    """One candidate: what was predicted, what became of it, and what it cost."""
    p = o.shortlisted.candidate.prediction
    offer = o.shortlisted.candidate.offer
    return {"rank": rank, "candidate": o.label, "machine": o.name, "provider": offer.provider,
            "gpu": offer.gpu_name, "gpus": offer.gpu_count, "price_per_hour": offer.price_per_hour,
            "predicted_epoch_dollars": p.dollars, "predicted_epoch_seconds": p.seconds,
            "pareto": p.pareto, "measured": o.measured, "dropped": o.dropped, "machines": o.machines,
            "cost": o.cost, "thrown_away": o.thrown_away, "billed": o.billed}


def candidates_section(result) -> Section:
    """The candidates as a table, the total in a sentence under it."""
    rows = []
    for i, o in enumerate(result.outcomes, start=1):
        row = candidate_row(i, o)
        p = o.shortlisted.candidate.prediction
        rows.append({**row, "candidate": o.label, "price_per_hour": format_dollars(row["price_per_hour"]),
                     "predicted": format_dollars(p.dollars) if p.has_figure else "-",
                     "outcome": "measured" if o.measured else "dropped",
                     "cost": _money(o.cost) if o.machines else "-",
                     "thrown_away": format_dollars(o.thrown_away) if o.thrown_away else "-",
                     "billed": _money(o.billed) if o.machines else "-", "why": o.dropped})
    section = Section("the candidates: predicted, then measured", COLUMNS, rows, below="why",
                      keep=("candidate", "outcome", "cost"))
    section.footnotes.append(total_sentence(result))
    return section


def total_sentence(result) -> str:
    """'In all $0.42 for 5 machines of 3 candidates, $0.08 of it on 3 machines thrown away
    (replaced or dropped); the providers billed $0.40.'"""
    machines = sum(o.machines for o in result.outcomes)
    kept = len(result.measured)
    thrown = machines - kept
    said = (f"In all {_money(result.cost)} for {machines} machine(s) of {len(result.outcomes)} "
            f"candidate(s), {kept} measured")
    if thrown:
        said += (f"; {format_dollars(result.thrown_away)} of it on {thrown} machine(s) thrown away "
                 f"(replaced or dropped)")
    if result.billed is not None:
        said += f"; the providers billed {format_dollars(result.billed)}"
    return said + "."


def _money(dollars: float | None) -> str:
    return "unknown" if dollars is None else format_dollars(dollars)
