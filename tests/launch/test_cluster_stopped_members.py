"""After one member of a cluster run fails, gpubench stops the others: what they
print as they stop (torch's SignalException traceback from torchrun's SIGTERM) is
not streamed as if it were the failure, and the failure is the member's that
failed first, even where the stopped member exits 1 too and comes first. A member's
GPU samples are streamed while it runs, dropped once it is stopped, never its tail."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from gpubench.launch.cluster import ClusterLauncher, ClusterOptions, Member, NodeRun
from gpubench.launch.gpu_sampling import live_line
from gpubench.remote.connection import StreamResult

STOPPED = [  # torchrun's words when SIGTERM reaches it (torch 2.13)
    "W1127 17:03:12.000000 812 torch/distributed/elastic/agent/server/api.py:719] Received "
    "Signals.SIGTERM death signal, shutting down workers",
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 905, in main',
    "    run(args)",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 812 got signal: 15",
]


class FakeNode:
    """One member's connection: it prints `lines`, then fails with `code`, or (when
    `until_stopped`) waits for gpubench to stop it and prints torch's traceback."""

    def __init__(self, lines: list[str], code: int, until_stopped: bool = False,
                 after: threading.Event | None = None) -> None:
        self.lines, self.code, self.until_stopped, self.after = lines, code, until_stopped, after
        self.stopped, self.said = threading.Event(), threading.Event()
        self._session = SimpleNamespace(conn=self)

    def shell_line(self, tag, command, env, timeout, cwd, watch_gpus=None) -> str:
        return "torchrun ..."

    def stream(self, line, sink, timeout, untailed=None) -> StreamResult:
        said = list(self.lines)
        if self.after is not None:  # another member has said its lines first
            assert self.after.wait(10)
        for text in self.lines:
            sink(text)
        self.said.set()
        if self.until_stopped:
            assert self.stopped.wait(10)
            for text in [live_line(0, 0.0, 1.0, 60.0), *STOPPED]:
                sink(text)
            said += STOPPED
        return StreamResult(self.code, tail=said)

    def kill(self, tags) -> None:
        self.stopped.set()


def member(index: int, node: FakeNode) -> Member:
    host = SimpleNamespace(target=SimpleNamespace(host=f"10.0.0.{index + 1}"))
    return Member(SimpleNamespace(index=index, host=host), node)


def test_stopped_members_are_not_streamed_as_the_failure():
    gpu = live_line(0, 97.0, 1024.0, 300.0)
    head = member(0, FakeNode(["step 1", gpu], 1, until_stopped=True))
    failing = member(1, FakeNode(["step 1", "Traceback (most recent call last):",
                                  '  File "/home/me/train.py", line 9, in <module>',
                                  "FileNotFoundError: /data/shard-1 is missing"], 1,
                                 after=head.launcher.said))
    parts = [NodeRun(head, 0, "t0", [], {}), NodeRun(failing, 1, "t1", [], {})]
    launcher = ClusterLauncher(None, [head, failing], None, ClusterOptions(), lambda _: None)
    said: list[str] = []
    tail: list[str] = []
    launcher._run_all(parts, 60, said.append, tail)
    assert not any("SignalException" in line or "SIGTERM" in line for line in said + tail)
    assert [line for line in said if "GPUBENCH_GPU" in line] == [f"[node0] {gpu}"]
    assert not any("GPUBENCH_GPU" in line for line in tail)
    assert "[node1] FileNotFoundError: /data/shard-1 is missing" in said
    assert said[-1] == ("node 0 (10.0.0.1) stopped by gpubench; the 5 line(s) it printed as it "
                        "stopped are not shown (torch's report of the stop signal, not the failure)")
    assert parts[0].stopped and not parts[1].stopped
    failure = launcher._failure(parts, 60)
    assert failure.error.startswith("node 1 (10.0.0.2): ")
    assert "FileNotFoundError: /data/shard-1 is missing" in failure.error
    assert launcher._code(parts) == 1
