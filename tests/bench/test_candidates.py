"""Choosing the candidates of a bench across providers (bench/candidates.py): the
predicted Pareto front first, distinct GPU types before a second offer of one type,
--gpu-type and --max-price honoured; more asked for than match, and a budget that
cannot cover the candidates, each one line before anything is rented."""

from __future__ import annotations

import pytest

from gpubench.bench.candidates import (Candidate, CandidateError, choose, group_offers,
                                       refuse_over_budget)
from gpubench.lifecycle.budget import BudgetError
from gpubench.predict.advise import Config, Prediction, mark_pareto
from gpubench.providers.common import Offer


def offer(provider: str, gpu: str, price: float, oid: str = "") -> Offer:
    return Offer(provider, oid or f"{provider}-{gpu}-{price}", gpu, 1, price)


def candidates(*rows) -> list[Candidate]:
    """(provider, gpu, $/h, predicted seconds or None) -> candidates, the front marked."""
    preds = []
    for provider, gpu, price, seconds in rows:
        o = offer(provider, gpu, price)
        config = Config(o, 1, 1, price)
        preds.append(Prediction(config, throughput=1000.0, seconds=seconds, dollars=price * seconds / 3600)
                     if seconds is not None else Prediction(config, left_out="no basis"))
    return [Candidate(p, (p.config.offer,)) for p in mark_pareto(preds)]


FIELD = candidates(
    ("vast", "L40S", 0.55, 1100.0),       # cheapest: on the front
    ("vast", "H100 SXM", 2.05, 700.0),    # fastest: on the front
    ("runpod", "L40S", 0.86, 1100.0),     # a second L40S, dearer
    ("vast", "RTX 4090", 0.30, 2600.0),   # another type, off the front
    ("lambda", "H100 SXM", 3.29, 700.0),  # a second H100 SXM, dearest
    ("runpod", "B999", 0.10, None),       # nothing known of it
)


def labels(chosen) -> list[str]:
    return [c.label for c in chosen]


def test_the_front_first_then_new_types_then_second_offers_then_those_without_a_figure():
    assert labels(choose(FIELD, 2)) == ["1x L40S on vast", "1x H100 SXM on vast"]
    assert labels(choose(FIELD, 4)) == ["1x L40S on vast", "1x H100 SXM on vast",
                                        "1x RTX 4090 on vast", "1x B999 on runpod"]
    # every type once before any type twice; the second offers by predicted cost
    assert labels(choose(FIELD, 6))[4:] == ["1x L40S on runpod", "1x H100 SXM on lambda"]


def test_gpu_type_and_max_price_are_honoured():
    assert labels(choose(FIELD, 2, gpu_type="H100")) == ["1x H100 SXM on vast", "1x H100 SXM on lambda"]
    assert labels(choose(FIELD, 3, max_price=1.0)) == ["1x L40S on vast", "1x RTX 4090 on vast",
                                                       "1x B999 on runpod"]


def test_more_candidates_than_offers_match_is_one_line_naming_them():
    with pytest.raises(CandidateError) as e:
        choose(FIELD, 3, gpu_type="H100 SXM", nothing_else="runpod: no H100 SXM offered")
    said = str(e.value)
    assert "\n" not in said and said.startswith("--candidates 3: only 2 offer(s) match within --gpu-type")
    assert "1x H100 SXM on vast and 1x H100 SXM on lambda" in said and "(runpod: no H100 SXM" in said
    with pytest.raises(CandidateError, match="no offer matches within --max-price 0.05"):
        choose(FIELD, 1, max_price=0.05)
    with pytest.raises(CandidateError, match="--candidates must be 1 to 8"):
        choose(FIELD, 0)


def test_offers_are_grouped_by_provider_type_and_count_cheapest_first():
    groups = group_offers([offer("vast", "L40S", 0.60, "b"), offer("vast", "A10", 0.25),
                           offer("vast", "L40S", 0.55, "a"), offer("runpod", "L40S", 0.86)])
    assert [[o.offer_id for o in g] for g in groups] == [["vast-A10-0.25"], ["a", "b"], ["runpod-L40S-0.86"]]


def test_a_budget_below_the_cheapest_candidate_names_its_estimate():
    costs = [("1x H100 SXM on vast", 0.40), ("1x L40S on vast", 0.12)]
    with pytest.raises(BudgetError) as e:
        refuse_over_budget(costs, 0.10)
    assert str(e.value).startswith("the budget of $0.10 cannot cover even one candidate: the cheapest, "
                                   "1x L40S on vast, is expected to cost about $0.12")
    with pytest.raises(BudgetError, match=r"the 2 candidates are expected to cost about \$0.52 in all, "
                                          r"more than the budget of \$0.45: nothing rented \(--candidates 1"):
        refuse_over_budget(costs, 0.45)
    refuse_over_budget(costs, 0.52)
    refuse_over_budget(costs, None)


def test_a_card_the_memory_model_says_cannot_hold_the_workload_is_never_chosen():
    from gpubench.predict.advise import NO_FIT

    small = Prediction(Config(offer("vast", "RTX 3090", 0.01), 1, 1, 0.01), basis=NO_FIT,
                       left_out="needs about 30 GB a GPU; this card has 24 GB")
    field = FIELD + [Candidate(small, (small.config.offer,))]      # the cheapest offer of all
    assert "1x RTX 3090 on vast" not in labels(choose(field, 6))
    with pytest.raises(CandidateError) as raised:
        choose(field, 7, what_fits="batch 2 a GPU fits 1x 80 GB")
    assert str(raised.value).startswith("--candidates 7: only 6 offer(s) match and hold the workload: ")
    assert str(raised.value).endswith("; 1 more cannot hold it at its batch (RTX 3090): batch 2 a GPU fits 1x 80 GB")
    with pytest.raises(CandidateError) as raised:
        choose(field, 1, gpu_type="RTX 3090")
    assert str(raised.value) == ("--candidates 1: the memory model says none of the 1 offer(s) that match "
                                 "within --gpu-type RTX 3090 can hold the workload at its batch (RTX 3090)")
