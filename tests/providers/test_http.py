"""The shared HTTP client: what is retried, what is not, and what errors look like;
every adapter sends its launch as a launch (never retried on a 5xx)."""

import time

import pytest

from gpubench.providers import lambda_cloud, runpod, vast
from gpubench.providers.common import (AuthError, InvalidRequestError, LaunchSpec, Offer, ProviderError,
                                       RateLimitError, SshKeyRef, TransportError)
from gpubench.providers.http import HttpClient, HttpSettings, RateLimiter


def client(url, **kw):
    settings = HttpSettings(timeout=2, retries=3, backoff=0.01, **kw)
    return HttpClient("test", url, {"Authorization": "Bearer SECRET"},
                      lambda r: (None, r.json().get("msg", "")), settings)


def test_get_retries_429_with_retry_after_then_succeeds(fake_api):
    fake_api.route("GET", "/x", (429, {"msg": "slow down"}, {"Retry-After": "0"}), (200, {"ok": 1}))
    assert client(fake_api.url).json("GET", "/x") == {"ok": 1}
    assert len(fake_api.calls("GET", "/x")) == 2


def test_post_retried_on_429_but_never_on_5xx(fake_api):
    fake_api.route("POST", "/launch", (429, {"msg": "later"}), (200, {"ok": 1}))
    assert client(fake_api.url).json("POST", "/launch", json={}) == {"ok": 1}
    fake_api.route("POST", "/boom", (503, {"msg": "down"}), (200, {"ok": 1}))
    with pytest.raises(ProviderError) as e:
        client(fake_api.url).json("POST", "/boom", json={})
    assert e.value.status == 503 and len(fake_api.calls("POST", "/boom")) == 1


def test_get_retried_on_5xx(fake_api):
    fake_api.route("GET", "/flaky", (502, {"msg": "bad gateway"}), (500, {"msg": "x"}), (200, {"ok": 2}))
    assert client(fake_api.url).json("GET", "/flaky") == {"ok": 2}


def test_4xx_is_not_retried_and_carries_the_providers_words(fake_api):
    fake_api.route("GET", "/bad", (401, {"msg": "Invalid user key"}))
    with pytest.raises(AuthError) as e:
        client(fake_api.url).json("GET", "/bad")
    assert len(fake_api.calls("GET", "/bad")) == 1
    assert str(e.value) == "test GET /bad: authentication failed (HTTP 401): Invalid user key"
    assert "SECRET" not in str(e.value)
    fake_api.route("POST", "/invalid", (422, {"msg": "no"}))
    with pytest.raises(InvalidRequestError):
        client(fake_api.url).json("POST", "/invalid", json={})


def test_429_forever_ends_as_rate_limit_error(fake_api):
    fake_api.route("GET", "/busy", (429, {"msg": "too many"}, {"Retry-After": "0"}))
    with pytest.raises(RateLimitError):
        client(fake_api.url).json("GET", "/busy")
    assert len(fake_api.calls("GET", "/busy")) == 4   # first try + 3 retries


def test_connection_refused_is_a_transport_error():
    with pytest.raises(TransportError) as e:
        HttpClient("test", "http://127.0.0.1:9", {}, lambda r: (None, ""),
                   HttpSettings(timeout=1, retries=0)).json("GET", "/")
    assert "\n" not in str(e.value)


def test_not_json_is_reported(fake_api):
    fake_api.route("GET", "/html", (200, b"<html>"))
    with pytest.raises(ProviderError, match="not JSON"):
        client(fake_api.url).json("GET", "/html")


def test_rate_limiter_spaces_calls():
    limiter = RateLimiter(0.05)
    start = time.monotonic()
    for _ in range(4):
        limiter.wait()
    assert time.monotonic() - start >= 0.14


def test_launch_interval_applies_only_to_launches(fake_api):
    fake_api.route("POST", "/launch", (200, {}))
    c = client(fake_api.url, launch_interval=0.2)
    start = time.monotonic()
    c.request("POST", "/launch", launch=True)
    c.request("POST", "/launch")
    assert time.monotonic() - start < 0.15
    c.request("POST", "/launch", launch=True)
    assert time.monotonic() - start >= 0.2


def test_published_intervals_scale_from_env(monkeypatch):
    monkeypatch.setenv("GPUBENCH_RATE_LIMIT_SCALE", "0.5")
    s = HttpSettings.from_env(1.0, 12.0)
    assert (s.min_interval, s.launch_interval) == (0.5, 6.0)


# -- launches: a retried launch can rent two machines --------------------------

@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_launch_is_never_retried_on_5xx_and_the_outcome_is_unclear(fake_api, method):
    fake_api.route(method, "/rent", (502, {"msg": "bad gateway"}), (200, {"id": 1}))
    with pytest.raises(TransportError) as e:
        client(fake_api.url).json(method, "/rent", json={}, launch=True)
    assert len(fake_api.calls(method, "/rent")) == 1
    assert e.value.status == 502 and "bad gateway" in str(e.value)
    # the same PUT, not a launch, is retried as an idempotent call
    fake_api.route("PUT", "/other", (503, {"msg": "x"}, {"Retry-After": "0"}), (200, {"ok": 1}))
    assert client(fake_api.url).json("PUT", "/other", json={}) == {"ok": 1}


@pytest.mark.parametrize("module,method,path", [
    (vast, "PUT", "/api/v0/asks/5/"),
    (lambda_cloud, "POST", "/api/v1/instance-operations/launch"),
    (runpod, "POST", "/v2/pods"),
])
def test_every_adapter_launch_is_sent_once_on_5xx(fake_api, module, method, path):
    fake_api.route(method, path, (503, {"msg": "busy"}, {"Retry-After": "0"}), (200, {"ok": 1}))
    offer_id = "gpu_1x_h100@us-east-1" if module is lambda_cloud else "5"
    with pytest.raises(TransportError):
        module.connect("KEY", fake_api.url).launch(Offer("x", offer_id, "H100", 1, 2.0),
                                                    LaunchSpec(gpus=1, name="x",
                                                               ssh_key=SshKeyRef("ssh-ed25519 A", name="k")))
    assert len(fake_api.calls(method, path)) == 1


def test_launch_is_retried_on_429(fake_api):
    fake_api.route("PUT", "/rent", (429, {"msg": "later"}, {"Retry-After": "0"}), (200, {"id": 1}))
    assert client(fake_api.url).json("PUT", "/rent", json={}, launch=True) == {"id": 1}
    assert len(fake_api.calls("PUT", "/rent")) == 2


def test_launch_read_timeout_is_not_retried(fake_api):
    fake_api.route("PUT", "/slow", (200, {"id": 1}, {"X-Fake-Delay": "1.2"}))
    c = HttpClient("test", fake_api.url, {}, lambda r: (None, ""),
                   HttpSettings(timeout=0.4, retries=3, backoff=0.01))
    with pytest.raises(TransportError, match="no answer within"):
        c.json("PUT", "/slow", json={}, launch=True)
    assert len(fake_api.calls("PUT", "/slow")) == 1


def test_a_late_answer_ends_with_its_server_and_prints_nothing(capsys):
    """The fake API's handler of a read timeout outlived its test and, answering a client
    long gone, printed socketserver's "Exception occurred during processing of request"
    into the next test's stderr (tests/cli/test_report_input.py, in the same worker)."""
    import threading

    from tests.providers.conftest import FakeApi

    before = set(threading.enumerate())
    api = FakeApi()
    api.route("PUT", "/slow", (200, {"id": 1}, {"X-Fake-Delay": "30"}))
    c = HttpClient("test", api.url, {}, lambda r: (None, ""), HttpSettings(timeout=0.2, retries=0))
    with pytest.raises(TransportError, match="no answer within"):
        c.json("PUT", "/slow", json={}, launch=True)
    started = time.monotonic()
    api.close()
    assert time.monotonic() - started < 2
    assert set(threading.enumerate()) <= before        # the loop and the late handler joined
    assert capsys.readouterr().err == ""


def test_launch_answer_that_is_not_json_is_unclear(fake_api):
    fake_api.route("POST", "/rent", (200, b"<html>oops"))
    with pytest.raises(TransportError, match="not JSON"):
        client(fake_api.url).json("POST", "/rent", json={}, launch=True)
