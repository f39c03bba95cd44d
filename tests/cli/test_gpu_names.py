"""The GPU names people type (`H100`, `A100`, `4090`, `rtx4090`, `h100 sxm`), read the
same way by every command that takes a GPU type (gpubench.providers.gpus): `predict
--gpu` takes the family's card the clouds rent most and says so in one note line (or
lists the candidates in one line); the offer filters of `offers`, `advise`, `bench` and
`provision` keep matching the whole family."""

from __future__ import annotations

import json
import re

import pytest

from gpubench.cli import confirm


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    from tests.helpers import mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch)


def test_predict_takes_a_family_as_its_most_rented_card_and_says_so(cli, tmp_path):
    code, out, err = cli("predict", "gpt-ddp", "--gpu", "H100", "--results", str(tmp_path), "--",
                         "--precision", "bf16")
    assert code == 0, err
    assert err == "note: H100 taken as H100 SXM; H100 PCIe and H100 NVL are the others\n"
    assert "prediction: gpt-ddp --precision bf16 on 1x H100 SXM" in out
    assert re.search(r"^ +step: \d+\.\d ms$", out, re.M), out       # a step below a second, in ms
    for typed, card, note in (("A100", "A100 SXM", "A100 taken as A100 SXM; A100 PCIe is the other"),
                              ("V100", "V100 SXM", "V100 taken as V100 SXM"), ("4090", "RTX 4090", ""),
                              ("rtx4090", "RTX 4090", ""), ("RTX 4090", "RTX 4090", ""),
                              ("h100 sxm", "H100 SXM", "")):
        code, out, err = cli("predict", "resnet-ddp", "--gpu", typed, "--format", "json",
                             "--results", str(tmp_path))
        assert code == 0 and json.loads(out)[0]["gpu"] == card, (typed, err)
        assert err == (f"note: {note}\n" if note else ""), typed
    code, out, err = cli("predict", "gpt-ddp", "--gpu", "RTX", "--results", str(tmp_path))
    assert code == 2 and out == ""
    assert err == "error: --gpu: 'RTX' could be RTX A6000, RTX 6000 Ada, RTX 5090, RTX 4090 or RTX 3090: name one\n"


def test_offers_lists_the_whole_family_a_name_covers(cloud, cli):
    for typed, cards in (("H100", {"H100 SXM", "H100 PCIe"}), ("A100", {"A100 SXM", "A100 PCIe"}),
                         ("4090", {"RTX 4090"}), ("RTX 4090", {"RTX 4090"}), ("h100 sxm", {"H100 SXM"})):
        code, out, err = cli("offers", "--gpu", typed, "--format", "json")
        assert code == 0 and {o["gpu"] for o in json.loads(out)} == cards, (typed, err)


def test_advise_predicts_every_offer_of_the_family(cloud, cli, tmp_path):
    code, out, err = cli("advise", "resnet-ddp", "--gpu", "H100", "--gpus", "1", "--format", "json",
                         "--results", str(tmp_path))
    assert code == 0, err
    assert {r["gpu"] for r in json.loads(out)["predictions"]} == {"H100 SXM", "H100 PCIe"}


def test_provision_rents_the_cheapest_of_the_family(cloud, cli):
    code, out, err = cli("provision", "vast", "--gpus", "1", "--gpu-type", "H100", "--dry-run")
    assert code == 0, err
    assert re.search(r"cheapest match: 1x H100 (SXM|PCIe) on vast", out), out


class _Tty:
    def isatty(self) -> bool:
        return True


def test_bench_asks_about_a_machine_of_the_family(cloud, cli, tmp_path, monkeypatch):
    questions = []
    monkeypatch.setattr(confirm.sys, "stdin", _Tty())
    monkeypatch.setattr(confirm.typer, "confirm", lambda q, default: questions.append(q) or False)
    code, out, err = cli("bench", "vast", "--gpus", "1", "--gpu-type", "a100", "--workload", "mnist-ddp",
                         "--results", str(tmp_path / "results"))
    assert code == 1 and len(questions) == 1                         # said no: nothing rented
    assert re.search(r"1x A100 (SXM|PCIe) .*at \$\d+\.\d\d/h", questions[0]), questions[0]
