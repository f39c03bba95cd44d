"""The probe's lines read back from a run's output, and the verdict on them: a run
whose processes did not form one group of the expected size is not a measurement."""

from __future__ import annotations

import json

from gpubench.launch.failures import last_words
import pytest

from gpubench.sweep.probe import ProbeReports, judge, verdict
from gpubench.workloads.script_probe import PREFIX


def line(rank: int, group=None, wrapped=(), frameworks=None, prefix: str = "") -> str:
    return prefix + PREFIX + json.dumps({"rank": rank, "world": 2, "group": group,
                                         "wrapped": list(wrapped), "frameworks": frameworks or {}})


def reports(*lines: str) -> ProbeReports:
    found = ProbeReports()
    for text in lines:
        assert found.take(text)
    return found


def test_probe_lines_are_taken_and_other_lines_are_not():
    found = ProbeReports()
    assert not found.take("epoch 1 loss 0.3")
    assert not found.take(PREFIX + "{not json")
    assert found.take(line(1, prefix="[rank1]: "))       # torch's prefix on a worker's line
    assert list(found.by_rank) == [1]


def test_two_processes_in_one_group_of_two_are_a_measurement():
    gloo = {"backend": "gloo", "size": 2}
    both = reports(line(0, gloo, ["DDP"]), line(1, gloo, ["DDP"]))
    assert verdict(both, 2) is None
    assert both.record_fields() == {"process_group": "gloo x 2", "wrapped_in": "DDP", "frameworks": None}


def test_processes_that_trained_alone_are_not():
    alone = reports(line(0), line(1))
    assert verdict(alone, 2) == ("each of the 2 processes trained alone: no process group was "
                                 "formed; it never called torch.distributed.init_process_group")
    assert verdict(alone, 1) is None                       # one process needs no group
    assert verdict(ProbeReports(), 2) is None              # no probe ran: nothing is proved
    assert alone.record_fields()["process_group"] == "none"


def test_the_reason_names_the_framework_or_the_scripts_last_words():
    lightning = reports(line(0, frameworks={"lightning": "2.5"}), line(1, frameworks={"lightning": "2.5"}))
    assert "Lightning's Trainer() needs strategy='ddp' and devices from torchrun" in verdict(lightning, 2)
    accelerate = reports(line(0, frameworks={"accelerate": "1.1", "accelerate_distributed_type": "NO"}))
    assert "Accelerator() ran as DistributedType.NO in each process" in verdict(accelerate, 2)
    assert "Accelerator(cpu=True)" in verdict(accelerate, 2)
    guard = verdict(reports(line(0), line(1)), 2, "Unable to locate sufficient 2 gpus to run this example. Exiting.")
    assert guard.endswith("it never called torch.distributed.init_process_group (its last words: "
                          "Unable to locate sufficient 2 gpus to run this example. Exiting.)")


def test_a_group_of_the_wrong_size_is_not_a_measurement():
    assert verdict(reports(line(0, {"backend": "gloo", "size": 1}), line(1, {"backend": "gloo", "size": 1})),
                   2) == "the 2 processes did not form one group of 2: group size 1"
    half = verdict(reports(line(0, {"backend": "gloo", "size": 2}), line(1)), 2)
    assert half == "the 2 processes did not form one group of 2: 1 of them formed none; group size 2"


def test_last_words_leave_out_the_probe_and_torchs_log():
    assert last_words(["Exiting.", line(0), "W1127 10:00:00.000000 1 torch/x.py:1] warn", ""]) == "Exiting."


# -- the steps: a measurement, a refusal, or whole-run timing ---------------------------

GLOO = {"backend": "gloo", "size": 2}


def steps(median_s=0.02, samples=64.0, tokens=0.0, count=50, kind="optimizer step", **more) -> dict:
    timed = max(count - 5, 0)
    return {"kind": kind if count else None, "count": count, "warmup": 5, "timed": timed,
            "median_s": median_s if timed else None, "p10_s": median_s * 0.9, "p90_s": median_s * 1.2,
            "samples_per_step": samples if timed else None, "tokens_per_step": tokens if timed else None,
            "backwards": count, "startup_s": 3.0, "wall_s": 5.0, "epoch_samples": None, **more}


def step_line(rank: int, world: int = 2, group=GLOO, wrapped=("DDP",), frameworks=None,
              collective=False, **step) -> str:
    return PREFIX + json.dumps({"rank": rank, "world": world, "group": group, "wrapped": list(wrapped),
                                "frameworks": frameworks or {}, "collective": collective,
                                "steps": steps(**step)})


def test_each_processs_samples_a_step_over_its_median_step_are_summed():
    # a fixed number of steps a process: two processes do twice the work in the same time
    two = reports(step_line(0, median_s=0.02), step_line(1, median_s=0.025))
    fields = two.step_fields()
    assert fields["timing"] == "training steps" and fields["throughput_unit"] == "samples/s"
    assert fields["throughput"] == pytest.approx(64 / 0.02 + 64 / 0.025)
    assert (fields["steps"], fields["warmup_steps"], fields["global_batch"]) == (45, 5, 128)
    assert fields["median_step_s"] == 0.025 and fields["p90_step_s"] == pytest.approx(0.03)
    assert fields["samples"] == 128 * 45 and fields["startup_s"] == 3.0
    assert verdict(two, 2) is None


def test_integer_token_inputs_make_it_tokens_and_the_epoch_tokens_too():
    one = reports(step_line(0, world=1, group=None, wrapped=(), samples=12.0, tokens=12 * 1024.0,
                            epoch_samples=1000))
    fields = one.step_fields()
    assert fields["throughput_unit"] == "tokens/s"
    assert fields["throughput"] == pytest.approx(12 * 1024 / 0.02)
    assert fields["epoch_samples"] == 1000 * 1024


def test_no_step_it_can_time_falls_back_to_whole_runs_and_says_why():
    custom = reports(step_line(0, world=1, group=None, wrapped=(), count=0, backwards=40))
    assert custom.step_fields() == {"timing": "whole process", "timing_note": (
        "no optimizer step, nor a backward pass through a model wrapped in DDP or FSDP, for the "
        "probe to time")}
    assert verdict(custom, 1) is None                 # it trained: a backward pass is a step taken
    short = reports(step_line(0, world=1, group=None, count=2))
    assert "2 step(s): too few to time after the warm-up" in short.step_fields()["timing_note"]


def test_a_run_that_took_no_training_step_is_refused_with_its_last_words():
    guard = reports(step_line(0, world=1, group=None, wrapped=(), count=0, backwards=0))
    words = "Unable to locate sufficient 1 gpus to run this example. Exiting."
    assert verdict(guard, 1, words) == ("the process took no training step; its last words: "
                                        f"{words}")
    assert judge(guard, 1, words)[0] == "no step"
    assert verdict(guard, 1, words, own_figure=True) is None   # its own figure is its measurement
    idle = reports(*(step_line(r, count=0, backwards=0, collective=True) for r in (0, 1)))
    assert verdict(idle, 2) == "none of the 2 processes took a training step; it printed nothing"


def test_a_group_that_did_not_train_together_is_refused_with_the_fix():
    plain = {"accelerate": "1.15", "accelerate_distributed_type": "NO"}
    accelerate = reports(*(step_line(r, wrapped=(), frameworks=plain) for r in (0, 1)))
    why = verdict(accelerate, 2)
    assert why.startswith("the 2 processes formed a group of 2 but did not train together: "
                          "Accelerate ran as DistributedType.NO")
    assert "Accelerator(cpu=True) or ACCELERATE_USE_CPU=1" in why
    assert judge(accelerate, 2)[0] == "alone"
    unwrapped = reports(*(step_line(r, wrapped=()) for r in (0, 1)))
    assert "the model was used unwrapped and no process called a collective" in verdict(unwrapped, 2)
    by_hand = reports(*(step_line(r, wrapped=(), collective=True) for r in (0, 1)))  # all-reduced
    assert verdict(by_hand, 2) is None


def test_the_record_carries_the_step_throughput_unless_the_script_reports_its_own():
    from gpubench.launch.base import RunOutcome
    from gpubench.sweep.records import script_record

    timed = reports(step_line(0), step_line(1)).step_fields()
    record = script_record(RunOutcome(0, None, ["torchrun"], 12.0, steps=timed), 2)
    assert (record["timing"], record["throughput_unit"], record["wall_seconds"]) == (
        "training steps", "samples/s", 12.0)
    assert record["throughput"] == pytest.approx(2 * 64 / 0.02) and record["median_step_s"] == 0.02
    own = script_record(RunOutcome(0, {"throughput": 5000.0}, ["torchrun"], 12.0, steps=timed), 2)
    assert (own["timing"], own["throughput"]) == ("script", 5000.0)
    assert own["step_throughput"] == pytest.approx(2 * 64 / 0.02) and own["steps"] == 45
    whole = script_record(RunOutcome(0, None, ["torchrun"], 8.0, steps={
        "timing": "whole process", "timing_note": "why"}), 1)
    assert (whole["timing"], whole["throughput"], whole["throughput_unit"], whole["timing_note"]) == (
        "whole process", 1 / 8.0, "runs/s", "why")
