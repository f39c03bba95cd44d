"""What `run` prints after a sweep, in words: only its own workload's notes, a
failed run's error under its row at the terminal's width with no snippet of code
cut in two, notes wrapped at the terminal's width, the fastest sentence comparing
only rows run with the same arguments, and a script's precision the same ("-")
for its ok and its failed runs."""

from __future__ import annotations

from pathlib import Path

from gpubench.format import TableFit
from gpubench.table_fit import fill, unbreakable
from gpubench.launch.base import Machine, RunOutcome, SweepPoint
from gpubench.report.compute import build_report
from gpubench.report.render import render, render_report
from gpubench.report.tables import workload_sections
from gpubench.suite import WorkloadRef
from gpubench.sweep.records import finish_record
from gpubench.sweep.run import SweepPlan

from .helpers import rec

CUDA_ERROR = ('the script asks for CUDA (torch.cuda.set_device(int(os.environ["LOCAL_RANK"])) at '
              "bad.py:3) and the torch it runs with is built without CUDA: AttributeError: module "
              "'torch._C' has no attribute '_cuda_setDevice'; on a CPU use torch.device(\"cpu\")")
SNIPPETS = ('(torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))', 'torch.device("cpu")')
LOCAL = dict(provider="local", instance_type="local-cpu-2c", gpu_name="cpu", device="cpu",
             throughput_unit="runs/s", epoch_samples=1)


def script(name: str, **fields) -> dict:
    return dict(LOCAL, workload=name, precision="-", script_sha256=f"{name}-sha", **fields)


def test_run_prints_only_its_own_scripts_notes():
    records = [rec(1, 1 / 20, 0.0, **script("/p/a.py"), machine_busy="100% of the cores busy"),
               rec(2, 1 / 12, 0.0, **script("/p/a.py")),
               rec(1, None, 0.0, **script("/p/b.py", status="failed", error="boom"))]
    text = render_report(records, "table", workload="/p/b.py")
    assert "boom" in text
    assert "a.py" not in text and "busy" not in text
    assert "speedup is relative" not in text  # b has no figures: no speedup to speak of
    mine = render_report(records, "table", workload="/p/a.py")
    assert "note: busy machine: /p/a.py" in mine and "b.py" not in mine


def _failed_section_lines(width: int) -> list[str]:
    records = [rec(1, None, 0.0, **script(TRAIN, status="failed", error=CUDA_ERROR,
                                          run_id="20261127-170241-188468"))]
    text = render(build_report(records), "table", TRAIN, fit=TableFit(width=width)).text
    return text.splitlines()


TRAIN = "/home/me/project/train.py"


def test_a_failed_runs_error_goes_under_its_row_at_the_terminals_width():
    for width in (80, 100, 140):
        lines = _failed_section_lines(width)
        assert lines[0].strip() == f"failed runs of {TRAIN}"
        heading = next(line for line in lines if line.startswith("provider"))
        assert "error" not in heading.split() and "workload" not in heading.split()
        row = lines.index(next(line for line in lines if line.startswith("local")))
        error = []
        for line in lines[row + 1:]:
            if not line.startswith("  "):
                break
            error.append(line[2:])
        assert " ".join(error) == CUDA_ERROR  # whole, in order, only spaces turned to breaks
        assert all(len(line) <= width for line in lines)
        assert len(error) <= -(-len(CUDA_ERROR) // (width - 30))  # the width used, not a strip
        for snippet in SNIPPETS:  # never cut
            assert any(snippet in line for line in error), (width, snippet)


def test_the_whole_reports_failed_runs_name_their_workload():
    records = [rec(1, None, 0.0, **script(TRAIN, status="failed", error=CUDA_ERROR)),
               rec(1, None, 0.0, **script("/p/b.py", status="failed", error="boom"))]
    lines = render(build_report(records), "table", fit=TableFit(width=100)).text.splitlines()
    assert lines[0].strip() == "failed runs (not in the figures above)"
    assert lines[1].split()[0] == "workload"
    assert lines[-1] == "  boom" and any(line.startswith("/p/b.py") for line in lines)


def test_markdown_and_machine_formats_keep_the_error_column():
    records = [rec(1, None, 0.0, **script("/p/t.py", status="failed", error=CUDA_ERROR))]
    markdown = render(build_report(records), "markdown").text
    assert "| error" in markdown.replace("|  error", "| error") and CUDA_ERROR in markdown


def test_fill_never_breaks_inside_code():
    text = ('use init_process_group(backend="gloo", timeout=timedelta(seconds=30)) or set '
            '`devices=2, num_nodes=1` (as the docs say) in it')
    assert 'init_process_group(backend="gloo", timeout=timedelta(seconds=30))' in unbreakable(text)
    assert "`devices=2, num_nodes=1`" in unbreakable(text)
    assert "(as" in unbreakable(text)  # a prose parenthesis breaks as prose
    atoms = unbreakable(text)
    for width in range(10, 60, 7):
        lines = fill(text, width, "  ").splitlines()
        assert " ".join(line.strip() for line in lines) == text
        # a line is too long only where it holds one snippet that is longer by itself
        assert all(len(line) <= width or line.strip() in atoms for line in lines)
    assert unbreakable("an unclosed f(a b") == ["an", "unclosed", "f(a", "b"]


def test_notes_wrap_at_the_terminals_width():
    long_busy = "100% of the cores busy with other work as it started; " * 3
    records = [rec(1, 1 / 20, 0.0, **script("/p/a.py"), machine_busy=long_busy),
               rec(2, 1 / 12, 0.0, **script("/p/a.py"))]
    text = render(build_report(records), "table", fit=TableFit(width=80)).text
    notes = text[text.index("note: busy machine"):].splitlines()
    assert len(notes) > 2 and all(len(line) <= 80 for line in notes)
    assert notes[1].startswith("      ") and not notes[1].startswith("       ")  # under "note:"
    assert notes[-1] == "note: speedup is relative to 1 GPU of the same machine type"


def test_fastest_compares_only_rows_run_with_the_same_arguments():
    short = dict(workload_args="--steps 30")
    long = dict(workload_args="--steps 200")
    records = [rec(1, 100.0, 3.6, **short), rec(2, 190.0, 7.2, **short),
               rec(1, 300.0, 3.6, **long), rec(2, 500.0, 7.2, **long)]
    report = build_report(records)
    marked = report.rows.set_index(["workload_args", "gpu_count"])
    assert marked.loc[("--steps 30", 2), "fastest"] and marked.loc[("--steps 200", 2), "fastest"]
    assert marked.loc[("--steps 30", 1), "cheapest"] and marked.loc[("--steps 200", 1), "cheapest"]
    story = next(s for s in workload_sections(report) if s.workload == "w").story
    assert story.sentences == [
        "2x G100 [--steps 200] on p is 1.20x the cost of 1x G100 [--steps 200] on p for 1.67x "
        "the speed (an epoch in 2 s for $0.0040, against an epoch in 3.33 s for $0.0033).",
        "2x G100 [--steps 30] on p is 1.05x the cost of 1x G100 [--steps 30] on p for 1.90x "
        "the speed (an epoch in 5.26 s for $0.01, against an epoch in 10 s for $0.01)."]


def test_a_scripts_failed_run_has_the_precision_of_its_ok_runs(tmp_path):
    workload = WorkloadRef("/p/t.py", Path("/p/t.py"), False)
    plan = SweepPlan(workload, [SweepPoint(1, 1), SweepPoint(1, 2)], [], "r1", 60)
    machine = Machine("local", "local-cpu-2c", "cpu", 0, 0.0, "cpu")
    ok = finish_record(RunOutcome(0, None, ["torchrun"], 10.0), plan, machine, SweepPoint(1, 1))
    failed = finish_record(RunOutcome(1, None, ["torchrun"], 2.0, "RuntimeError: boom"), plan,
                           machine, SweepPoint(1, 2))
    assert (ok["status"], failed["status"]) == ("ok", "failed")
    assert ok["precision"] == failed["precision"] == "-"
    text = render_report([ok, failed], "table", workload="/p/t.py")
    failed_row = next(line for line in text.splitlines() if line.startswith("local"))
    assert " - " in failed_row and "fp32" not in text
    suite = SweepPlan(WorkloadRef("w", Path("w.py"), True), [SweepPoint(1, 1)], [], "r2", 60)
    suite_failed = finish_record(RunOutcome(1, None, ["torchrun"], 2.0, "boom"), suite, machine,
                                 SweepPoint(1, 1))
    assert "precision" not in suite_failed  # a suite workload's failure: the schema's default


def test_a_row_per_environment_with_the_variables_named_and_whole_runs_said():
    steps = dict(throughput_unit="samples/s", epoch_samples=6000, timing="training steps")
    records = [rec(1, 3000.0, 0.0, **script(TRAIN, **steps)),
               rec(2, 5900.0, 0.0, **script(TRAIN, **steps)),
               rec(1, 2800.0, 0.0, **script(TRAIN, **steps, script_env={"ACCELERATE_USE_CPU": "1"})),
               rec(2, 5500.0, 0.0, **script(TRAIN, **steps, script_env={"ACCELERATE_USE_CPU": "1"}))]
    report = build_report(records)
    assert sorted(zip(report.rows["script_env"].astype(str), report.rows["gpu_count"],
                      report.rows["speedup"].round(3))) == [
        ("", 1, 1.0), ("", 2, round(5900 / 3000, 3)),
        ("ACCELERATE_USE_CPU=1", 1, 1.0), ("ACCELERATE_USE_CPU=1", 2, round(5500 / 2800, 3))]
    text = render_report(records, "table", workload=TRAIN)
    assert "env" in text and "ACCELERATE_USE_CPU=1" in text and "samples/s" in text

    whole = [rec(1, 1 / 20, 0.0, **script("/p/loop.py", timing="whole process",
                                          timing_note="no optimizer step for the probe to time"))]
    (note,) = [n for n in build_report(whole).notes if "whole runs" in n]
    assert note == ("/p/loop.py at 1 process(es) is timed as whole runs (runs/s: start-up "
                    "included), not by its training steps: no optimizer step for the probe to time")
