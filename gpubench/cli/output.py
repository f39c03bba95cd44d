"""What a command that prints data writes, for people or for programs.

With `--format json` stdout is one JSON document that parses, and everything said
on the way (progress, notes, questions) goes to stderr; with `--format table`
(the default) stdout is the text people read. A command takes an `Output` from
`output_for(fmt)`, says its progress through `say`, and hands its result to
`emit` once, at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from gpubench.cli.render import check_format, err, out

#: The formats of a command whose data is one document (not a table of rows).
DOCUMENT_FORMATS = ("table", "json")


def to_json(document) -> str:
    """`document` (dicts, lists, dataclasses, paths, enums) as indented JSON."""
    return json.dumps(document, indent=2, default=_plain)


def _plain(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


@dataclass(frozen=True)
class Output:
    fmt: str = "table"

    @property
    def as_json(self) -> bool:
        return self.fmt == "json"

    def say(self, message: str = "") -> None:
        """A line for people: stdout as a table, stderr beside JSON."""
        (err if self.as_json else out)(message)

    def emit(self, document) -> None:
        """The command's data as one JSON document on stdout (nothing as a table:
        the command has said it in words)."""
        if self.as_json:
            print(to_json(document), flush=True)

    @contextlib.contextmanager
    def prompts(self) -> Iterator[None]:
        """A question asked meanwhile goes to stderr beside JSON (click writes its
        prompt to stdout, which a program is reading)."""
        if not self.as_json:
            yield
            return
        with contextlib.redirect_stdout(sys.stderr):
            yield


def output_for(fmt: str, allowed: tuple[str, ...] = DOCUMENT_FORMATS) -> Output:
    return Output(check_format(fmt, allowed))


def say_load_warnings(warnings: list[str], say=err) -> None:
    """A results store's load warnings, then how many corrupt lines were skipped."""
    from gpubench.store.results import load_summary

    for warning in warnings:
        say(f"warning: {warning}")
    if (summary := load_summary(warnings)) is not None:
        say(f"warning: {summary}")


# -- documents: what the commands' JSON says of the things they handle ----------

def offer_document(offer) -> dict:
    """An Offer's common fields (not the provider's raw answer)."""
    return {"provider": offer.provider, "offer_id": offer.offer_id, "gpu_name": offer.gpu_name,
            "gpu_count": offer.gpu_count, "price_per_hour": offer.price_per_hour,
            "region": offer.region or None, "disk_gb": offer.disk_gb,
            "interruptible": offer.interruptible, "instance_type": offer.instance_type or None}


ENTRY_FIELDS = ("name", "provider", "instance_id", "status", "gpu_name", "gpu_count", "price_per_hour",
                "region", "disk_gb", "image", "ssh_host", "ssh_port", "ssh_user", "created_at",
                "ssh_ready_at", "deadline_at", "watchdog", "cluster", "node_index")


def entry_document(entry) -> dict:
    """A ledger row as programs see it: where the machine is and what it costs, with
    its ssh_config alias (no key paths, no account details)."""
    doc = {name: getattr(entry, name) for name in ENTRY_FIELDS}
    doc["status"] = str(entry.status)
    doc["ssh_alias"] = entry.ssh_alias
    return doc


def run_document(run_ids: list[str], records: list[dict], store, all_records: list[dict],
                 workloads: list[str], **extra) -> dict:
    """What a sweep (run) or several (bench) did: the runs, the records they appended,
    and the report of each workload's records in the store, as `report --format json`
    gives it. The report's notes go to stderr."""
    from gpubench.report.render import render_report

    report = {name: json.loads(render_report(all_records, "json", workload=name)) for name in workloads}
    return {"run_ids": run_ids, "results_dir": str(store.directory),
            "files": [str(store.directory / f"{run_id}.jsonl") for run_id in run_ids],
            **extra, "records": records, "report": report}
