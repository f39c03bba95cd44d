"""Money is spent only on what the user agreed to: when the confirmed machine never
boots, another GPU type or a higher price is asked about first, allowed up front by
--any-gpu (or a --gpu-type) and --max-price, and refused under --yes without them."""

from __future__ import annotations

import pytest

from gpubench.cli import confirm
from gpubench.lifecycle.consent import Agreed, Consent, ConsentRefused, departures, describe_machine
from gpubench.store.ledger import Ledger
from gpubench.providers.common import Offer

CONFIRMED = Offer("vast", "1", "RTX 3090", 1, 0.16, extra={"gpu_ram": 24576})
SAME = Offer("vast", "2", "RTX 3090", 1, 0.16)
DEARER = Offer("vast", "3", "RTX 3090", 1, 0.17)
OTHER_TYPE = Offer("vast", "4", "RTX 4090", 1, 0.16)
BIGGER = Offer("vast", "5", "A100 SXM", 1, 0.16, extra={"gpu_ram": 81920})
SMALLER = Offer("vast", "6", "A100 SXM", 1, 0.16, extra={"gpu_ram": 40960})


def test_what_counts_as_a_departure():
    agreed = Agreed.offer(CONFIRMED)
    assert departures(agreed, SAME) == [] and departures(agreed, CONFIRMED) == []
    assert departures(agreed, DEARER) == ["a higher price"]
    assert departures(agreed, OTHER_TYPE) == ["another GPU type"]
    assert departures(agreed, Offer("vast", "7", "RTX 4090", 1, 0.5)) == ["another GPU type", "a higher price"]
    assert departures(agreed, Offer("vast", "8", "RTX 3090", 1, 0.10)) == []          # cheaper is fine
    assert departures(Agreed.offer(BIGGER), SMALLER) == ["another GPU type"]          # 80 GB -> 40 GB


def test_flags_given_up_front_allow_it():
    assert departures(Agreed.offer(CONFIRMED, any_gpu=True), OTHER_TYPE) == []
    assert departures(Agreed.offer(CONFIRMED, max_price=0.2), DEARER) == []
    assert departures(Agreed.offer(CONFIRMED, max_price=0.2), Offer("vast", "9", "RTX 3090", 1, 0.3)) == \
        ["a higher price"]


def test_without_anyone_to_ask_it_stops_in_one_line_naming_the_flag():
    consent = Consent(Agreed.offer(CONFIRMED))
    consent.check(SAME)
    with pytest.raises(ConsentRefused) as e:
        consent.check(OTHER_TYPE)
    assert str(e.value) == ("nothing more rented: the next offer is 1x RTX 4090 (24 GB) at $0.16/h, not the "
                            "1x RTX 3090 (24 GB) at $0.16/h agreed to (another GPU type); pass --any-gpu "
                            "to allow it")
    with pytest.raises(ConsentRefused, match=r"\(a higher price\); pass --max-price to allow it$"):
        consent.check(DEARER)


def test_asked_interactively_and_the_answer_becomes_the_agreement():
    asked = []
    consent = Consent(Agreed.offer(CONFIRMED), ask=lambda q: asked.append(q) or True)
    consent.check(OTHER_TYPE)
    assert asked == ["1x RTX 3090 (24 GB) at $0.16/h did not work out. Rent 1x RTX 4090 (24 GB) at $0.16/h instead?"]
    consent.check(Offer("vast", "10", "RTX 4090", 1, 0.16))     # what was agreed now: not asked again
    assert len(asked) == 1
    no = Consent(Agreed.offer(CONFIRMED), ask=lambda q: False)
    with pytest.raises(ConsentRefused, match="declined"):
        no.check(DEARER)


def test_the_confirmation_names_type_count_and_price():
    assert confirm.rent_question(CONFIRMED, "vast", ", stopping itself after 2 h") == \
        "Rent 1x RTX 3090 (24 GB) at $0.16/h on vast, stopping itself after 2 h?"
    assert describe_machine(8, "H100 SXM", 23.92) == "8x H100 SXM at $23.92/h"


# -- provision on the mock cloud: the confirmed machine never boots -----------

@pytest.fixture
def cloud(tmp_path, monkeypatch):
    from tests.helpers import mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch)


def _never_boots(cloud, cli, *flags):
    cloud.set_faults("vast:never-boots")
    return cli("provision", "vast", "--gpus", "1", "--yes", "--boot-timeout", "0.1", *flags)


def test_under_yes_a_higher_price_is_refused_without_max_price(cloud, cli):
    code, out, err = _never_boots(cloud, cli)
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("error: nothing more rented: the next offer is 1x RTX 3090")
    assert "(a higher price); pass --max-price to allow it" in err
    assert [r.status for r in Ledger().entries(include_done=True)] == ["terminated"]


def test_under_yes_another_type_is_refused_without_any_gpu(cloud, cli):
    code, out, err = _never_boots(cloud, cli, "--max-price", "0.3")
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert "the next offer is 1x A10 (24 GB)" in last and "pass --any-gpu to allow it" in last
    rows = Ledger().entries(include_done=True)
    assert [(r.gpu_name, r.status) for r in rows] == [("RTX 3090", "terminated")] * 2


@pytest.mark.slow
def test_any_gpu_allows_another_type(cloud, cli):
    code, out, err = _never_boots(cloud, cli, "--max-price", "0.3", "--any-gpu")
    assert code == 1 and "nothing more rented" not in err and "3 launched" in err
    assert [r.gpu_name for r in Ledger().entries(include_done=True)] == ["RTX 3090", "RTX 3090", "A10"]


@pytest.mark.slow
def test_a_gpu_type_covers_the_types_it_names(cloud, cli):
    cloud.set_faults("vast:never-boots")
    code, out, err = cli("provision", "vast", "--gpus", "1", "--yes", "--boot-timeout", "0.1",
                         "--gpu-type", "h100", "--max-price", "9")
    assert code == 1 and "nothing more rented" not in err and "3 launched" in err
    assert {r.gpu_name for r in Ledger().entries(include_done=True)} == {"H100 PCIe", "H100 SXM"}


class _Tty:
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("answer", [pytest.param(True, marks=pytest.mark.slow), False])
def test_asked_again_at_the_terminal(cloud, cli, monkeypatch, answer):
    questions = []

    def reply(question, default):
        questions.append(question)
        return len(questions) == 1 or answer       # yes to the first confirmation
    monkeypatch.setattr(confirm.sys, "stdin", _Tty())
    monkeypatch.setattr(confirm.typer, "confirm", reply)
    cloud.set_faults("vast:never-boots")
    code, out, err = cli("provision", "vast", "--gpus", "1", "--boot-timeout", "0.1", "--attempts", "2")
    assert code == 1
    assert questions[0].startswith("Rent 1x RTX 3090 (24 GB) at $0.16/h on vast")
    assert questions[1] == ("1x RTX 3090 (24 GB) at $0.16/h did not work out. "
                            "Rent 1x RTX 3090 (24 GB) at $0.17/h instead?")
    rows = Ledger().entries(include_done=True)
    if answer:
        assert len(rows) == 2 and "2 launched" in err
    else:
        assert len(rows) == 1 and err.strip().endswith("nothing more rented: 1x RTX 3090 (24 GB) at $0.17/h was declined")
