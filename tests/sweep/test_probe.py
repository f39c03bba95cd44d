"""The probe's lines read back from a run's output, and the verdict on them: a run
whose processes did not form one group of the expected size is not a measurement."""

from __future__ import annotations

import json

from gpubench.launch.failures import last_words
from gpubench.sweep.probe import ProbeReports, verdict
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
