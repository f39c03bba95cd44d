"""The Slurm launcher's parts without a cluster: Slurm's answers (as Slurm 22.05
printed them on the test cluster) read into states, the sbatch scripts, the
options, the login node spec, the points of a node sweep, following a job
against a scripted Slurm (deadlines, Ctrl-C, where end states come from), the
node-scaling and GPU-hour columns of the report, and the run command's checks."""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from gpubench.launch.slurm import script, states
from gpubench.launch.slurm.commands import Result
from gpubench.launch.slurm.errors import PendingTimeoutError, SlurmError, SlurmUsageError
from gpubench.launch.slurm.follow import Follower
from gpubench.launch.slurm.login import login_target
from gpubench.launch.slurm.options import SlurmOptions
from gpubench.launch.slurm.states import JobState
from gpubench.remote.errors import BadTargetError


# ---------------------------------------------------------------------- states
def test_squeue_lines_read_into_job_states():
    done = states.parse_squeue("2|FAILED|2026-11-23T18:49:29|2026-11-23T18:49:30|2026-11-23T18:49:41|"
                               "0:11|gbn1|debug|(null)|1|1|NonZeroExitCode\n", "2")
    assert (done.state, done.finished, done.pending, done.reason) == ("FAILED", True, False, "NonZeroExitCode")
    assert (done.nodelist, done.partition, done.account, done.cpus, done.nodes) == ("gbn1", "debug", "", 1, 1)
    assert done.queue_wait_s == 1.0 and done.elapsed_s == 11.0 and done.source == states.FROM_SQUEUE
    waiting = states.parse_squeue("squeue: warning: something\n"
                                  "7|PENDING|2026-11-23T18:49:29|N/A|N/A|0:00||gpu|proj|8|2|"
                                  "ReqNodeNotAvail, UnavailableNodes:gpu[03-04]|x\n", "7")
    assert waiting.pending and not waiting.finished and waiting.start is None
    assert waiting.reason == "ReqNodeNotAvail, UnavailableNodes:gpu[03-04]|x"  # the reason is last
    assert states.parse_squeue("8|RUNNING|...", "7") is None


def test_sacct_and_the_completion_log_read_the_same():
    line = ("2|FAILED|3:0|12|2026-11-23T18:49:29|2026-11-23T18:49:31|2026-11-23T18:49:43|gbn1|debug||1|1|\n"
            "4|CANCELLED by 0|0:15|0|2026-11-23T18:49:31|Unknown|2026-11-23T18:49:31|None assigned|debug|"
            "proj|0|0|Resources\n")
    failed = states.parse_sacct(line, "2", states.FROM_JOBCOMP)
    assert (failed.state, failed.exit_code, failed.elapsed_s, failed.queue_wait_s) == ("FAILED", "3:0", 12.0, 2.0)
    assert not failed.ok and failed.source == states.FROM_JOBCOMP
    cancelled = states.parse_sacct(line, "4")
    assert (cancelled.state, cancelled.start, cancelled.account, cancelled.reason) == \
        ("CANCELLED", None, "proj", "Resources")
    assert states.parse_sacct(line, "9") is None
    assert states.accounting_off("Slurm accounting storage is disabled\n")
    assert JobState("1", "COMPLETED", exit_code="0:0").ok and not JobState("1", "COMPLETED", exit_code="1:0").ok


def test_sbatch_job_ids_partitions_and_gres():
    assert states.parse_job_id("12\n") == "12"
    assert states.parse_job_id("sbatch: warning: x\n34;cluster2\n") == "34"
    with pytest.raises(SlurmError, match="sbatch gave no job id: sbatch: error: nope"):
        states.parse_job_id("sbatch: error: nope\n")
    sinfo = "debug*|2|gpu:1|1|up\nbooster|10|gpu:a100:4(S:0-1)|96|up\nbooster|2|(null)|48|up\ncpu|4|(null)|64+|up\n"
    assert states.parse_sinfo(sinfo, None) == states.Partition("debug", 2, 1, "", 1, "up", True)
    assert states.parse_sinfo(sinfo, "booster") == states.Partition("booster", 12, 4, "a100", 96, "up", False)
    assert states.parse_sinfo(sinfo, "cpu").gpus_per_node == 0 and states.parse_sinfo(sinfo, "cpu").cpus_per_node == 64
    assert states.parse_sinfo(sinfo, "nope") is None
    assert states.gres_gpus("nic:1,gpu:h100:8(S:0-1)") == (8, "h100") and states.gres_gpus("gpu:2") == (2, "")


def test_end_states_from_the_files_a_job_leaves():
    limit = ["slurmstepd: error: *** JOB 5 ON gbn1 CANCELLED AT 2026-11-23T18:50:31 DUE TO TIME LIMIT ***"]
    assert states.state_from_files("5", None, limit) == ("TIMEOUT", None)
    assert states.state_from_files("6", None, limit) == ("UNKNOWN", None)  # another job's line
    cancel = ["slurmstepd: error: *** JOB 6 ON gbn2 CANCELLED AT 2026-11-23T18:50:31 ***"]
    assert states.state_from_files("6", "0\n", cancel) == ("CANCELLED", None)
    assert states.state_from_files("7", "3\n", []) == ("FAILED", "3:0")
    assert states.state_from_files("7", "0\n", []) == ("COMPLETED", "0:0")
    assert [states.duration_s(t) for t in ("05:06", "1:02:03", "1-00:00:01", "INVALID")] == \
        [306.0, 3723.0, 86401.0, None]
    assert states.one_line("sbatch: error: invalid partition specified: nope\n"
                           "allocation failure: Invalid partition name specified\n") == \
        "sbatch: error: invalid partition specified: nope; allocation failure: Invalid partition name specified"


# ---------------------------------------------------------------------- scripts
def _spec(nodes=2, per_node=4, gpus=True):
    return script.JobSpec("mnist-ddp", nodes, per_node, "/home/a/gb/slurm/j1", "/home/a/gb/workloads",
                          "/opt/venv/bin/python", "mnist_ddp.py",
                          ["--record-file", "/home/a/gb/slurm/j1/record.json", "--steps", "5"], gpus)


def _bash_ok(text: str) -> None:
    done = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr


def test_a_torchrun_script_has_one_task_per_node():
    options = SlurmOptions(partition="booster", account="training2324", reservation="day2",
                           time="00:15:00", cpus_per_gpu=24, mem="0", sbatch_args=("--exclusive",))
    text = script.render(_spec(), options)
    _bash_ok(text)
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --gres=gpu:4",
                 "#SBATCH --cpus-per-task=96", "#SBATCH --mem=0", "#SBATCH --time=00:15:00",
                 "#SBATCH --partition=booster", "#SBATCH --account=training2324",
                 "#SBATCH --reservation=day2", "#SBATCH --exclusive", "#SBATCH --job-name=gpubench-mnist-ddp",
                 "#SBATCH --output=/home/a/gb/slurm/j1/slurm-%j.out",
                 "#SBATCH --error=/home/a/gb/slurm/j1/slurm-%j.err",
                 'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
                 'srun --kill-on-bad-exit=1 bash -c "$gpu_watch" node \\',
                 "    /opt/venv/bin/python -m torch.distributed.run \\",
                 '    --nnodes="$SLURM_NNODES" --nproc_per_node=4 \\',
                 '    --rdzv_id="$SLURM_JOB_ID" --rdzv_backend=c10d --rdzv_endpoint="$head:$port" \\',
                 "export GPUBENCH_RECORD_FILE=/home/a/gb/slurm/j1/record.json",
                 "cd /home/a/gb/workloads || exit 1", "echo \"$code\" > /home/a/gb/slurm/j1/exit-code"):
        assert line in text.splitlines(), line
    assert text.index("#SBATCH --exclusive") > text.index("#SBATCH --error")  # the user's lines last
    assert "--qos" not in text and "--constraint" not in text  # only what was asked for


def test_an_srun_script_has_one_task_per_gpu_and_slurms_ranks():
    text = script.render(_spec(), SlurmOptions(launch="srun", gpu_flag="gpus-per-node", cpus_per_gpu=24,
                                               qos="normal", constraint="a100"))
    _bash_ok(text)
    lines = text.splitlines()
    for line in ("#SBATCH --ntasks-per-node=4", "#SBATCH --gpus-per-node=4", "#SBATCH --cpus-per-task=24",
                 "#SBATCH --qos=normal", "#SBATCH --constraint=a100",
                 'export MASTER_ADDR="$head" MASTER_PORT="$port"'):
        assert line in lines, line
    assert "RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS" in text
    assert "torch.distributed.run" not in text
    cpu_only = script.render(_spec(gpus=False), SlurmOptions(launch="srun"))
    assert "--gres" not in cpu_only and "--gpus-per-node" not in cpu_only
    assert "threads=$(( ${SLURM_CPUS_ON_NODE:-1} / 4 ))" in cpu_only
    odd = script.JobSpec("my train.py", 1, 1, "/d/j", "/d/my project", "conda run -n x python",
                         "train.py", ["--name", "it's"])
    _bash_ok(script.render(odd, SlurmOptions()))
    assert "#SBATCH --job-name=gpubench-my_train" in script.render(odd, SlurmOptions())


@pytest.mark.parametrize("kwargs, message", [
    ({"launch": "mpirun"}, "--launch: 'mpirun' is not one of torchrun, srun"),
    ({"gpu_flag": "gpus"}, "--gpu-flag: 'gpus' is not one of gres, gpus-per-node"),
    ({"time": "1h"}, "--time: '1h' is not a Slurm time limit (HH:MM:SS, MM, or D-HH:MM:SS)"),
    ({"price_per_gpu_hour": -1.0}, "--price-per-gpu-hour: -1.0 is negative"),
    ({"pending_timeout": 0}, "--pending-timeout: give a number of seconds above 0"),
    ({"partition": "a\nb"}, "--partition: 'a\nb' is not a value sbatch takes"),
    ({"sbatch_args": ("exclusive",)}, "--sbatch-arg: 'exclusive' is not one sbatch option"),
    ({"sbatch_args": ("--nodes=3",)}, "--sbatch-arg: gpubench sets --nodes itself from the sweep"),
    ({"sbatch_args": ("-N3",)}, "--sbatch-arg: gpubench sets -N3 itself"),
    ({"sbatch_args": ("--output=x",)}, "--sbatch-arg: gpubench sets --output itself"),
])
def test_options_that_cannot_be_right_are_refused(kwargs, message):
    with pytest.raises(SlurmUsageError) as e:
        SlurmOptions(**kwargs)
    assert str(e.value).startswith(message) and e.value.exit_code == 2
    for time in ("30", "00:15:00", "2-00", "1-12:00:00"):
        SlurmOptions(time=time, sbatch_args=("--exclusive", "--mem=0", "--comment=sweep"))


# ---------------------------------------------------------------------- login, points
def test_the_login_node_spec(tmp_path, monkeypatch):
    key = tmp_path / "id_ed25519"
    key.write_text("k")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host jsc\n  HostName login.example.org\n  User alice\n  Port 2222\n"
                      f"  IdentityFile {key}\n")
    target = login_target("jsc", None, config)
    assert (target.host, target.user, target.port, target.key_file) == ("login.example.org", "alice", 2222, key)
    target = login_target("bob@jsc:22", None, config)
    assert (target.user, target.port) == ("bob", 22)
    monkeypatch.setattr("getpass.getuser", lambda: "carol")
    target = login_target("10.0.0.5", key, tmp_path / "none")
    assert (target.host, target.user, target.port) == ("10.0.0.5", "carol", 22)
    with pytest.raises(BadTargetError, match="not \\[user@\\]LOGIN\\[:port\\]"):
        login_target("a b", key, config)
    monkeypatch.setattr("pathlib.Path.home", lambda: tmp_path / "nohome")
    with pytest.raises(BadTargetError, match="no SSH key found; give one with --key FILE"):
        login_target("elsewhere", None, tmp_path / "none")


# ---------------------------------------------------------------------- following
class ScriptedSlurm:
    """Answers squeue from a list of states, one per call (the last one repeats)."""

    def __init__(self, queue: list[JobState | None], sacct: dict[bool, tuple] | None = None,
                 on_sleep=None) -> None:
        self.answers = list(queue)
        self.sacct = sacct or {False: (False, None), True: (False, None)}
        self.cancelled: list[str] = []
        self.asked: list[bool] = []
        self.shell = self
        self.output = ""

    def queue(self, job_id):
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def place_in_queue(self, job_id, partition):
        return 3

    def accounting(self, job_id, completion_log):
        self.asked.append(completion_log)
        return self.sacct[completion_log]

    def cancel(self, job_id):
        self.cancelled.append(job_id)

    def read(self, path, offset=0):
        return self.output.encode()[offset:].decode()


class Clock:
    def __init__(self, interrupt_at: float | None = None) -> None:
        self.now = 0.0
        self.interrupt_at = interrupt_at

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.interrupt_at is not None and self.now >= self.interrupt_at:
            raise KeyboardInterrupt


PENDING = JobState("9", "PENDING", reason="QOSMaxNodePerUserLimit", partition="gpu")
RUNNING = JobState("9", "RUNNING", nodelist="g[1-2]", partition="gpu")
DONE = JobState("9", "COMPLETED", nodelist="g[1-2]", partition="gpu", cpus=8,
                submit=datetime(2026, 1, 1, 12, 0, 0), start=datetime(2026, 1, 1, 12, 0, 5))


def _follower(slurm, clock, pending_timeout=30.0) -> Follower:
    return Follower(slurm, 1.0, pending_timeout, clock=clock, sleep=clock.sleep)


def test_a_job_pending_past_its_deadline_is_cancelled_with_slurms_reason():
    slurm, clock, lines = ScriptedSlurm([PENDING]), Clock(), []
    with pytest.raises(PendingTimeoutError) as e:
        _follower(slurm, clock).follow("9", "out", lines.append, 600)
    assert str(e.value) == ("job 9 still pending after 30s (--pending-timeout); Slurm's reason: "
                            "QOSMaxNodePerUserLimit; cancelled it with scancel")
    assert slurm.cancelled == ["9"]
    assert lines == ["job 9 pending: QOSMaxNodePerUserLimit (3rd in the gpu queue)"]  # said once


def test_ctrl_c_cancels_the_job_and_says_so():
    slurm, clock, lines = ScriptedSlurm([PENDING, RUNNING]), Clock(interrupt_at=3), []
    with pytest.raises(KeyboardInterrupt):
        _follower(slurm, clock).follow("9", "out", lines.append, 600)
    assert slurm.cancelled == ["9"] and lines[-1] == "cancelled job 9 with scancel"
    assert "job 9 running on g[1-2]" in lines


def test_a_job_past_its_run_deadline_is_cancelled_and_its_output_passed_on():
    cancelled = JobState("9", "CANCELLED", partition="gpu")
    slurm, clock, lines = ScriptedSlurm([RUNNING] * 8 + [cancelled]), Clock(), []
    slurm.output = "step 1\nstep 2\npartial"
    followed = _follower(slurm, clock).follow("9", "out", lines.append, 5)
    assert followed.timed_out and slurm.cancelled == ["9"] and followed.state.state == "CANCELLED"
    assert lines[:3] == ["job 9 running on g[1-2]", "step 1", "step 2"]  # the partial line waits
    assert "job 9 ran past --timeout 5s; cancelled it with scancel" in lines


def test_end_states_come_from_the_first_source_that_answers():
    # (sacct's answer, the completion log's), the source used, the questions asked over two jobs
    for sacct, source, asked in [({False: (True, DONE), True: (False, None)}, "sacct", [False, False]),
                                 ({False: (False, None), True: (True, DONE)}, states.FROM_JOBCOMP,
                                  [False, True, True]),
                                 ({False: (False, None), True: (False, None)}, states.FROM_SQUEUE,
                                  [False, True])]:
        done = JobState("9", "COMPLETED", nodelist="g[1-2]", partition="gpu")
        if source != states.FROM_SQUEUE:
            sacct = {k: (ok, state and JobState(**{**state.__dict__, "source": source}))
                     for k, (ok, state) in sacct.items()}
        slurm = ScriptedSlurm([PENDING, RUNNING, done], sacct)
        follower = _follower(slurm, Clock())
        followed = follower.follow("9", "out", lambda _: None, 600)
        assert followed.state.source == source and followed.state.finished
        again = follower.follow("9", "out", lambda _: None, 600)  # a later job: known sources only
        assert again.state.source == source and slurm.asked == asked, source


# ---------------------------------------------------------------------- report
def _record(nodes: int, gpus: int, throughput: float, **extra) -> dict:
    return {"workload": "mnist-ddp", "provider": "slurm", "instance_type": "login:gpu (2x a100 nodes)",
            "gpu_name": "a100", "gpu_count": gpus, "nodes": nodes, "status": "ok", "throughput": throughput,
            "throughput_unit": "images/s", "epoch_samples": 60000, "time": f"2026-01-01T00:00:0{gpus}Z",
            "price_per_hour": None, **extra}


def test_node_scaling_against_one_node_with_the_same_gpus_per_node():
    from gpubench.report.compute import build_report

    records = [_record(1, 1, 100.0), _record(1, 2, 190.0), _record(2, 2, 180.0), _record(2, 4, 342.0)]
    rows = build_report(records).rows
    got = {(r.nodes, r.gpu_count): (round(r.speedup, 3), round(r.node_speedup, 3), round(r.node_efficiency, 3))
           for r in rows.itertuples()}
    assert got == {(1, 1): (1.0, 1.0, 1.0), (1, 2): (1.9, 1.0, 1.0),
                   (2, 2): (1.8, 1.8, 0.9),  # 2 nodes x 1 against 1 node x 1
                   (2, 4): (3.42, 1.8, 0.9)}  # 2 nodes x 2 against 1 node x 2


def test_gpu_hours_and_the_queue_show_where_slurm_recorded_them_and_never_a_fake_dollar():
    from gpubench.report.compute import build_report
    from gpubench.report.render import render

    plain = render(build_report([_record(1, 1, 100.0), _record(1, 2, 190.0)]), "markdown").text
    for heading in ("GPU-h", "core-h", "queue s", "run s", "node speedup"):
        assert heading not in plain
    slurm = [_record(1, 2, 190.0, gpu_hours=0.01, core_hours=0.1, queue_wait_s=30.0, slurm_elapsed_s=18.0),
             _record(2, 4, 342.0, gpu_hours=0.02, core_hours=0.2, queue_wait_s=120.0, slurm_elapsed_s=18.0)]
    text = render(build_report(slurm), "markdown").text
    header = next(line for line in text.splitlines() if line.startswith("| provider"))
    for heading in ("node speedup", "node eff", "GPU-h/epoch", "GPU-h", "core-h", "queue s", "run s"):
        assert f" {heading} " in header, heading
    row = next(line for line in text.splitlines() if line.startswith("| slurm") and "| 4 " in line)
    assert "$" not in row and "unknown" in row  # cost in GPU-hours, the dollars unknown
    hours = build_report(slurm).rows.set_index("gpu_count")["gpu_hours_per_epoch"]
    assert hours[4] == pytest.approx(4 * 60000 / 342.0 / 3600)


# ---------------------------------------------------------------------- the run command
@pytest.mark.parametrize("argv, message", [
    (["--partition", "gpu"], "error: --partition is for Slurm: add --on slurm or --on slurm:[user@]LOGIN"),
    (["--on", "box", "--dry-run"], "error: --dry-run is for Slurm: add --on slurm"),
    (["--on", "slurm", "--gpus", "1,2", "--nodes", "2"],
     "error: --gpus is the counts on one machine; with --nodes give --gpus-per-node"),
    (["--on", "slurm", "--price", "3"], "error: --price is a machine's $/h; on Slurm give --price-per-gpu-hour"),
    (["--on", "slurm", "--launch", "mpirun"], "error: --launch: 'mpirun' is not one of torchrun, srun"),
    (["--on", "slurm", "--nodes", "1,x"], "error: --nodes: 'x' is not a whole number"),
    (["--on", "slurm:a b"], "error: --on slurm:a b: not [user@]LOGIN[:port]"),
])
def test_the_run_command_refuses_slurm_options_that_cannot_work(cli, tmp_path, argv, message):
    code, _, err = cli("run", "mnist-ddp", "--results", str(tmp_path), *argv)
    assert code == 2 and err.startswith(message) and err.count("\n") == 1
    assert list(Path(tmp_path).iterdir()) == []


def test_slurm_commands_over_a_shell_pick_their_lines_out_of_mixed_output():
    from gpubench.launch.slurm.commands import Slurm

    class Shell:
        where = "login"

        def __init__(self, answer: Result) -> None:
            self.answer = answer
            self.argv = None

        def run(self, argv, timeout=60, cwd=None, retry=True):
            self.argv = argv
            return self.answer

    shell = Shell(Result(0, "sbatch: warning: the partition has no GPUs of that type\n42\n"))
    assert Slurm(shell).submit("/d/job.sbatch", "/d") == "42" and shell.argv[:2] == ["sbatch", "--parsable"]
    shell = Shell(Result(1, "sbatch: error: Batch job submission failed: Invalid account or "
                            "account/partition combination specified\n"))
    with pytest.raises(SlurmError) as e:
        Slurm(shell).submit("/d/job.sbatch", "/d")
    assert str(e.value) == ("sbatch refused the job: sbatch: error: Batch job submission failed: "
                            "Invalid account or account/partition combination specified")
    gone = Shell(Result(1, "slurm_load_jobs error: Invalid job id specified\n"))
    assert Slurm(gone).queue("77") is None
    off = Shell(Result(1, "Slurm accounting storage is disabled\n"))
    assert Slurm(off).accounting("77", completion_log=False) == (False, None)
    missing = Shell(Result(127, "bash: sinfo: command not found\n"))
    with pytest.raises(SlurmError, match="sinfo is not installed on login"):
        Slurm(missing).partition(None)
