"""What each provider error means to the lifecycle, read from the error classes."""

from __future__ import annotations

import pytest

from gpubench.providers.common import (AuthError, CapacityError, InvalidRequestError,
                                       MissingKeyError, NotFoundError, PaymentError, ProviderError,
                                       RateLimitError, TransportError)

# class: (a launch ending here created nothing, no later call will do better, try the next offer)
MEANING = {
    AuthError: (True, True, False),
    PaymentError: (True, True, False),
    MissingKeyError: (True, True, False),
    CapacityError: (True, False, True),
    NotFoundError: (True, False, True),
    RateLimitError: (True, False, False),
    InvalidRequestError: (True, False, False),
    TransportError: (False, False, False),
}


def test_every_error_class_is_listed():
    assert set(MEANING) == set(ProviderError.__subclasses__())


@pytest.mark.parametrize("cls", MEANING, ids=lambda c: c.__name__)
@pytest.mark.parametrize("status", [None, 400, 404, 502])
def test_error_class_properties(cls, status):
    nothing_created, final, offer_unavailable = MEANING[cls]
    e = cls("p", "POST /x", "words", status=status)
    assert (cls.nothing_created, cls.final, cls.offer_unavailable) == MEANING[cls]
    # the class decides, whatever the status
    assert (e.launch_refused, e.final, e.offer_unavailable) == (nothing_created, final, offer_unavailable)


@pytest.mark.parametrize("status,refused", [(None, False), (200, False), (400, True), (418, True),
                                            (499, True), (500, False), (503, False)])
def test_a_plain_provider_error_is_a_refusal_when_the_answer_was_a_4xx(status, refused):
    e = ProviderError("p", "POST /x", "words", status=status)
    assert ProviderError.nothing_created is None
    assert e.launch_refused is refused and not e.final and not e.offer_unavailable
