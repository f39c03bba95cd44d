"""The hide-from-list fault: a provider's list that leaves out instances it still has
(for N list answers with @N), while a lookup by id still finds them."""

from __future__ import annotations

import pytest

import gpubench.mock as mock
from gpubench.mock.faults import FaultBoard, FaultSpecError, parse
from gpubench.providers import registry
from gpubench.providers.common import LaunchSpec


def test_hide_from_list_counts_list_answers():
    board = FaultBoard("vast:hide-from-list@2")
    assert [board.hides_list("vast") for _ in range(3)] == [True, True, False]
    assert not board.hides_list("lambda")
    assert FaultBoard("hide-from-list").hides_list("runpod") and FaultBoard("").hides_list("vast") is False
    with pytest.raises(FaultSpecError, match="takes no value"):
        parse("hide-from-list=1")


@pytest.mark.parametrize("provider", ["lambda", "vast", "runpod"])
def test_a_hidden_instance_is_left_out_of_one_list_and_found_by_id(tmp_path, monkeypatch, provider):
    with mock.MockCloud.start(state_dir=tmp_path / "mock") as cloud:
        for k, v in cloud.env().items():
            monkeypatch.setenv(k, v)
        prov = registry.get(provider)
        offer = prov.offers(gpus=1)[0]
        key = prov.ensure_ssh_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHidden hidden", "hidden")
        inst = prov.launch(offer, LaunchSpec(gpus=1, name="hidden", ssh_key=key))
        cloud.set_faults(f"{provider}:hide-from-list@1")
        assert prov.list() == []
        assert prov.get(inst.instance_id).instance_id == inst.instance_id
        assert [i.instance_id for i in prov.list()] == [inst.instance_id]
        prov.terminate(inst.instance_id)
