"""`gpubench providers stats`: how each provider's machines of each GPU type have
behaved, from the instance ledger (lifecycle/stats.py)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpubench.cli.options import FormatOpt, GpuTypeOpt
from gpubench.cli.render import check_format, out, render_rows

providers_app = typer.Typer(help="What gpubench has seen of each provider.", no_args_is_help=True)

# Short headings and cells: the table fits 80 columns; the legend below it says more.
COLUMNS = [("machine", "provider gpu"), ("launches", "launches"), ("ready_s", "ready s"),
           ("never_ready", "no ssh"), ("gate_failed", "gate x"), ("thrown_away", "thrown $")]
LEGEND = ("ready s: median/p90 seconds from asking to an SSH login; no ssh: share never\n"
          "ready; gate x: share that failed the preflight gate; thrown $: what the machines\n"
          "given back unused cost, estimated (billed, where the provider says)")


@providers_app.command("stats")
def stats(
    provider: Annotated[Optional[str], typer.Option("--provider", help="Only this provider.")] = None,
    gpu_type: GpuTypeOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """Per provider and GPU type: launches, median and p90 seconds to SSH-ready, the
    share never ready, the share that failed the preflight gate (and on which check),
    and what the machines thrown away cost (estimated; billed where the provider says)."""
    import time

    from gpubench.store.ledger import Ledger
    from gpubench.lifecycle.stats import provider_stats
    from gpubench.providers.gpus import gpu_matches

    check_format(fmt)
    with Ledger() as ledger:
        rows = ledger.entries(include_done=True)
    rows = [r for r in rows if (provider is None or r.provider == provider)
            and (gpu_type is None or gpu_matches(gpu_type, r.gpu_name or ""))]
    figures = provider_stats(rows, now=time.time())
    if fmt in ("json", "csv"):
        dicts = [s.as_dict() for s in figures]
        keys = list(dicts[0]) if dicts else [k for k, _ in COLUMNS]
        out(render_rows(dicts, [(k, k) for k in keys], fmt))
        return
    if not figures:
        out("no machines in the ledger" + (" matching these filters" if provider or gpu_type else ""))
        return
    out(render_rows([table_row(s) for s in figures], COLUMNS, fmt))
    out(LEGEND)
    for s in figures:
        if s.failed_checks:
            out(f"{s.provider} {s.gpu_name}: gate failures: {s.failed_checks_text()}")


def table_row(s) -> dict:
    """One ProviderStats as the table's short cells."""

    def share(part: int, whole: int) -> str:
        return f"{100.0 * part / whole:.0f}%" if whole else "-"

    thrown = f"{s.thrown_away_cost:.2f}" if s.thrown_away else "0"
    if s.thrown_away_billed is not None:
        thrown += f" ({s.thrown_away_billed:.2f})"
    ready = "-" if s.median_ready_s is None else f"{s.median_ready_s:.0f}/{s.p90_ready_s:.0f}"
    return {"machine": f"{s.provider} {s.gpu_name}", "launches": s.launches, "ready_s": ready,
            "never_ready": share(s.never_ready, s.settled),
            "gate_failed": share(s.gate_failed, s.gated), "thrown_away": thrown}


def register(app: typer.Typer) -> None:
    app.add_typer(providers_app, name="providers")
