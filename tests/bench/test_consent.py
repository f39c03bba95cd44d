"""`bench` spends money only on what its confirmation showed: the question names the
machine, its price and the plan's estimate (price x expected time); when the machine
confirmed never boots, another type or a higher price is asked about, allowed by
--any-gpu / --max-price, and under --yes stops the bench in one line."""

from __future__ import annotations

import re

import pytest

from gpubench.bench import plan as bench_plan
from gpubench.bench.request import BenchRequest
from gpubench.cli import confirm
from gpubench.lifecycle.budget import Estimate
from gpubench.store.ledger import Ledger
from gpubench.providers.common import Offer


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    from tests.helpers import mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch)


def _bench(cli, tmp_path, *flags):
    return cli("bench", "vast", "--gpus", "1", "--workload", "mnist-ddp", "--boot-timeout", "0.1",
               "--results", str(tmp_path / "results"), *flags)


class _Tty:
    def isatty(self) -> bool:
        return True


def test_the_confirmation_shows_price_times_expected_time(cloud, cli, tmp_path, monkeypatch):
    questions = []
    monkeypatch.setattr(confirm.sys, "stdin", _Tty())
    monkeypatch.setattr(confirm.typer, "confirm", lambda q, default: questions.append(q) or False)
    code, out, err = _bench(cli, tmp_path)
    assert code == 1 and Ledger().entries(include_done=True) == []      # said no: nothing rented
    said = re.search(r"1x RTX 3090 at \$0\.16/h: (\d+) run\(s\), about (\d+) min expected "
                     r"\(predicted from (\w+) figures\), about \$(\d+\.\d+) at \$0\.16/h", questions[0])
    assert said, questions[0]
    assert float(said[4]) == pytest.approx(0.16 * int(said[2]) / 60, abs=0.006)
    # no record of mnist-ddp on an RTX 3090: the step model's figure (its operations at the
    # card's datasheet rates, constants fitted on measured runs)
    assert said[3] == "modelled"


def test_under_yes_a_replacement_goes_up_to_the_stated_ceiling_and_no_further(cloud, cli, tmp_path):
    cloud.set_faults("vast:never-boots")
    code, out, err = _bench(cli, tmp_path, "--yes")      # the plan: $0.16/h, replacements up to $0.18
    assert code == 1
    rows = Ledger().entries(include_done=True)
    assert [(r.price_per_hour, r.status.value) for r in rows] == [(0.161, "terminated"), (0.1738, "terminated")]
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: nothing more rented: the next offer is 1x A10 (24 GB) at $0.25/h")
    assert last.endswith("(another GPU type and a higher price); pass --any-gpu and --max-price to allow it")


def test_under_yes_another_type_needs_any_gpu(cloud, cli, tmp_path):
    cloud.set_faults("vast:never-boots")
    code, out, err = _bench(cli, tmp_path, "--yes", "--max-price", "0.3", "--attempts", "3")
    last = err.strip().splitlines()[-1]
    assert code == 1 and "the next offer is 1x A10 (24 GB)" in last and "pass --any-gpu" in last
    code, out, err = _bench(cli, tmp_path, "--yes", "--max-price", "0.3", "--attempts", "3",
                            "--any-gpu", "--name", "anyone")
    assert code == 1 and "nothing more rented" not in err
    rows = [r for r in Ledger().entries(include_done=True) if r.name == "anyone"]
    assert [r.gpu_name for r in rows] == ["RTX 3090", "RTX 3090", "A10"]
    assert {r.status for r in rows} == {"terminated"}


def test_asked_at_the_terminal_and_declined(cloud, cli, tmp_path, monkeypatch):
    questions = []

    def reply(question, default):
        questions.append(question)
        return len(questions) == 1                    # yes to the bench, no to the other machine
    monkeypatch.setattr(confirm.sys, "stdin", _Tty())
    monkeypatch.setattr(confirm.typer, "confirm", reply)
    cloud.set_faults("vast:never-boots")
    code, out, err = _bench(cli, tmp_path)
    assert code == 1
    assert "a replacement up to $0.18/h" in questions[0]      # what a yes agrees to
    assert questions[1] == ("1x RTX 3090 (24 GB) at $0.16/h did not work out. "
                            "Rent 1x A10 (24 GB) at $0.25/h instead?")
    assert err.strip().endswith("nothing more rented: 1x A10 (24 GB) at $0.25/h was declined")


def _host(oid: str, machine: int | None, price: float) -> Offer:
    extra = {"machine_id": machine} if machine is not None else {}
    return Offer("vast", oid, "RTX 3090", 1, price, available=1, extra=extra)


def test_with_hosts_the_agreement_reaches_the_dearest_host_the_plan_named():
    offers = [_host("a", 1, 0.16), _host("b", 1, 0.18), _host("c", 2, 0.17), _host("d", 3, 0.40)]
    plan = bench_plan.BenchPlan(None, offers, Estimate(1, 3600.0, 0.16), 2.0, None, hosts=2)
    assert plan.highest_price == pytest.approx(0.17)
    assert "each at $0.16 to $0.17/h" in plan.describe()
    req = BenchRequest("vast", 1, [], hosts=2)
    consent = bench_plan.plan_consent(req, plan)
    consent.check(offers[2])                              # the second host: agreed
    with pytest.raises(Exception, match="a higher price"):
        consent.check(offers[3])
    one = bench_plan.BenchPlan(None, offers, Estimate(1, 3600.0, 0.16), 2.0, None)
    assert one.highest_price == 0.16 and "at $0.16/h:" in one.describe()
    endless = bench_plan.BenchPlan(None, [_host("x", None, 1.0), _host("y", 5, 2.0)],
                                  Estimate(1, 3600.0, 1.0), 2.0, None, hosts=3)
    assert endless.highest_price == 1.0                   # a machine per launch: enough of them
