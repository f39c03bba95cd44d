"""`gpubench volume create|ls|rm`: storage that outlives a machine, on the provider's own
API, kept in the ledger like machines. It bills until `volume rm`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpubench.cli.confirm import confirm_or_stop
from gpubench.cli.options import DocumentFormatOpt, FormatOpt, GpuTypeOpt, ProviderArg, RegionOpt, YesOpt
from gpubench.cli.render import check_format, err, out, render_rows

app = typer.Typer(help="Volumes: storage that outlives a machine (it bills until 'volume rm').",
                  no_args_is_help=True)

VolumeNameArg = Annotated[str, typer.Argument(help="The volume's name (lower-case letters, digits, '-').")]
SizeOpt = Annotated[Optional[int], typer.Option(
    "--size", help="GB (RunPod: 10 to 4096; Vast.ai: fixed once made; Lambda: none, it bills what is used).")]
COLUMNS = [("name", "name"), ("provider", "provider"), ("place", "place"), ("size_gb", "GB"),
           ("used", "used"), ("monthly_cost", "$/month"), ("attached_to", "attached to"),
           ("status", "status")]


@app.command("create")
def create(provider: ProviderArg, name: VolumeNameArg, size: SizeOpt = None, region: RegionOpt = None,
           gpu_type: GpuTypeOpt = None, yes: YesOpt = False, fmt: DocumentFormatOpt = "table") -> None:
    """Make a volume on PROVIDER where --region says, or where the most offers of
    --gpu-type are now."""
    from gpubench.lifecycle import volumes
    from gpubench.providers import registry

    check_format(fmt, ("table", "json"))
    registry.check(provider)
    kind = registry.entry(provider).volumes
    noun = kind.noun if kind else "volume"
    with_size = f" of {size} GB" if size else ""
    confirm_or_stop(f"Make a {registry.display_name(provider)} {noun} '{name}'{with_size}? It bills until "
                    f"'gpubench volume rm {name}' ({kind.price_note if kind else 'see the provider'})",
                    "nothing made: pass --yes to make it without a terminal to confirm on",
                    said_on_no="nothing made", yes=yes)
    row, volume = volumes.create(provider, name, size, region, gpu_type, say=err)
    if fmt == "json":
        import json

        out(json.dumps({"name": row.name, "provider": row.provider, "volume_id": row.volume_id,
                        "place": row.place, "size_gb": volume.size_gb}, indent=2))
        return
    out(f"made {noun} {row.name} ({provider} {row.volume_id}) in {row.place}"
        + (f", {volume.size_gb:g} GB" if volume.size_gb else "")
        + f"; rent with it: gpubench provision {provider} --gpus N --volume {row.name}")


@app.command("ls")
def ls(fmt: FormatOpt = "table") -> None:
    """The volumes of the ledger beside the providers' own lists (one made outside
    gpubench is shown as not gpubench's), with their monthly cost."""
    from gpubench.lifecycle import volumes
    from gpubench.remote.pull import size_text

    check_format(fmt, ("table", "csv", "json", "markdown"))
    found = volumes.listing(say=err)
    if not found and fmt == "table":
        out("no volumes")
        return
    rows = [{"name": v.name, "provider": v.provider, "place": v.place, "size_gb": v.size_gb,
             "used_bytes": v.used_bytes,
             "used": size_text(v.used_bytes) if v.used_bytes is not None else None,
             "monthly_cost": None if v.monthly_cost is None else round(v.monthly_cost, 2),
             "attached_to": ", ".join(v.attached_to) or None, "status": v.status, "ours": v.ours,
             "volume_id": v.volume_id} for v in found]
    columns = COLUMNS if fmt in ("table", "markdown") else COLUMNS + [("used_bytes", "used_bytes"),
                                                                       ("ours", "ours"), ("volume_id", "volume_id")]
    out(render_rows(rows, columns, fmt, keep=("name", "provider", "place", "monthly_cost", "status")))
    if fmt == "table":
        priced = [v.monthly_cost for v in found if v.ours and v.monthly_cost is not None]
        out(f"gpubench's volumes bill ${sum(priced):,.2f} a month in all until 'gpubench volume rm'")


@app.command("rm")
def rm(name: VolumeNameArg, yes: YesOpt = False) -> None:
    """Delete a volume that no machine uses, and confirm its provider no longer has it."""
    from gpubench.lifecycle import volumes

    confirm_or_stop(f"Delete volume {name} and every file on it?",
                    f"would delete volume {name}: pass --yes to confirm", said_on_no="nothing deleted", yes=yes)
    row = volumes.remove(name, say=err)
    out(f"deleted volume {row.name} ({row.provider} {row.volume_id}); its provider no longer lists it")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="volume")
