"""`ls` speaks one status vocabulary (the ledger's), with each provider's own word
beside it; an instance the ledger lacks is named in the same words."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpubench.store.status import FROM_INSTANCE_STATE, LedgerStatus, listing_words
from gpubench.providers.common import InstanceState


def _instance(state: InstanceState, raw: str = ""):
    return SimpleNamespace(status=state, raw_status=raw)


@pytest.mark.parametrize("raw", ["active", "running", "RUNNING"])  # Lambda, Vast.ai, RunPod
def test_a_ledger_row_keeps_the_ledgers_word_and_shows_the_providers(raw):
    entry = SimpleNamespace(status=LedgerStatus.READY)
    assert listing_words(entry, _instance(InstanceState.RUNNING, raw)) == (LedgerStatus.READY, raw)


def test_a_row_the_provider_was_not_asked_about_has_no_provider_word():
    assert listing_words(SimpleNamespace(status=LedgerStatus.MISSING), None) == (LedgerStatus.MISSING, None)


def test_an_orphan_is_named_in_the_ledgers_words():
    assert set(FROM_INSTANCE_STATE) == {s.value for s in InstanceState}
    assert listing_words(None, _instance(InstanceState.RUNNING, "active")) == (LedgerStatus.RUNNING, "active")
    assert listing_words(None, _instance(InstanceState.PENDING, "booting"))[0] is LedgerStatus.LAUNCHED
    assert listing_words(None, _instance(InstanceState.TERMINATING))[0] is LedgerStatus.TERMINATING
    assert listing_words(None, _instance(InstanceState.TERMINATING))[1] == "terminating"
