"""One HTTP session per provider: retries with backoff that honour Retry-After,
a timeout on every call, a client-side rate limit where the provider publishes
one, and every failure turned into a typed ProviderError.

Retries happen inside urllib3. Idempotent methods are retried on 429 and 5xx; a
POST only on 429 (the request was refused before doing anything), never on 5xx or a
lost connection, because a launch retried blindly can rent two machines. A launch
(`launch=True`, whatever its method: Vast rents with a PUT) is retried only on 429 and
on a connection that was never made; a 5xx, a lost answer or a garbled one is a
TransportError, since the machine may have been rented.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from gpubench.providers.common import (AuthError, InvalidRequestError, NotFoundError,
                                       PaymentError, ProviderError, RateLimitError,
                                       TransportError)

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
RETRY_STATUSES = (429, 500, 502, 503, 504)
MAX_RETRY_AFTER = 60.0   # seconds; a longer Retry-After (a daily quota) is not slept through


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


@dataclass(frozen=True)
class HttpSettings:
    timeout: float = 30.0            # seconds per request (connect and read)
    retries: int = 4
    backoff: float = 0.5             # urllib3 backoff_factor: 0.5, 1, 2, 4 ... seconds
    backoff_max: float = 30.0
    min_interval: float = 0.0        # seconds between any two requests (client-side limit)
    launch_interval: float = 0.0     # seconds between two launch requests

    @classmethod
    def from_env(cls, min_interval: float = 0.0, launch_interval: float = 0.0) -> "HttpSettings":
        """GPUBENCH_HTTP_TIMEOUT / _RETRIES / _BACKOFF tune the client; the published
        intervals are scaled by GPUBENCH_RATE_LIMIT_SCALE (0 turns them off, for tests)."""
        scale = max(_env_float("GPUBENCH_RATE_LIMIT_SCALE", 1.0), 0.0)
        return cls(timeout=_env_float("GPUBENCH_HTTP_TIMEOUT", 30.0),
                   retries=int(_env_float("GPUBENCH_HTTP_RETRIES", 4)),
                   backoff=_env_float("GPUBENCH_HTTP_BACKOFF", 0.5),
                   min_interval=min_interval * scale,
                   launch_interval=launch_interval * scale)


class _Retry(Retry):
    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        # A 429 means nothing happened, so even a POST may go again.
        if status_code == 429 and method.upper() not in IDEMPOTENT:
            return bool(self.total)
        return super().is_retry(method, status_code, has_retry_after)

    def get_retry_after(self, response) -> float | None:
        value = super().get_retry_after(response)
        return None if value is None else min(value, MAX_RETRY_AFTER)


class _LaunchRetry(_Retry):
    """Only a 429 says for sure that nothing was rented; a 5xx (even 503 with
    Retry-After) may come after the machine was."""

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        return status_code == 429 and bool(self.total)


class RateLimiter:
    """At most one call per `interval` seconds (thread-safe; sleeps, never drops)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if self.interval <= 0:
            return
        with self._lock:
            now = time.monotonic()
            delay = self._next - now
            self._next = max(now, self._next) + self.interval
        if delay > 0:
            time.sleep(delay)


_last = threading.local()   # the endpoint this thread called last
OPERATIONS = ("offers", "ensure_ssh_key", "launch", "get", "list", "terminate",
              "volume_places", "create_volume", "list_volumes", "delete_volume")
ANSWER_ERRORS = (KeyError, IndexError, TypeError, AttributeError, ValueError)


def checked_answers(cls):
    """Class decorator for an adapter: an answer of the wrong shape (a missing field, a
    list where an object belongs, "1.5" where an int belongs) met in one of its
    operations is a ProviderError naming the endpoint, not a traceback. In `launch` it
    is a TransportError: the machine may have been rented all the same."""
    for op in OPERATIONS:
        if op in vars(cls):
            setattr(cls, op, _checked(vars(cls)[op]))
    return cls


def _checked(method):
    error_cls = TransportError if method.__name__ == "launch" else ProviderError

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        _last.endpoint = ""
        try:
            return method(self, *args, **kwargs)
        except ANSWER_ERRORS as e:
            raise error_cls(self.name, getattr(_last, "endpoint", "") or method.__name__,
                            f"unexpected answer: {_what(e)}") from None

    return wrapper


def _what(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r} field" if exc.args else "a field is missing"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


# (response) -> (code, message): the provider's own words from an error body.
ErrorParser = Callable[[requests.Response], "tuple[str | None, str]"]


class HttpClient:
    def __init__(self, provider: str, base_url: str, headers: dict[str, str],
                 parse_error: ErrorParser, settings: HttpSettings | None = None) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.settings = settings or HttpSettings()
        self.parse_error = parse_error
        self._limiter = RateLimiter(self.settings.min_interval)
        self._launch_limiter = RateLimiter(self.settings.launch_interval)
        n = self.settings.retries
        common = dict(total=n, connect=n, status=n, backoff_factor=self.settings.backoff,
                      backoff_max=self.settings.backoff_max, respect_retry_after_header=True,
                      raise_on_status=False)
        retry = _Retry(read=n, status_forcelist=RETRY_STATUSES, allowed_methods=IDEMPOTENT, **common)
        # read=False re-raises a read error at once; other=0 ends on any other error after
        # the connection was made (both: the request may have been acted on).
        launch_retry = _LaunchRetry(read=False, other=0, status_forcelist=(429,), **common)
        self.session = self._session(headers, retry)
        self._launch_session = self._session(headers, launch_retry)

    @staticmethod
    def _session(headers: dict[str, str], retry: Retry) -> requests.Session:
        session = requests.Session()
        session.headers.update({"User-Agent": "gpubench", "Accept": "application/json"})
        session.headers.update(headers)
        adapter = HTTPAdapter(max_retries=retry)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        return session

    def request(self, method: str, path: str, *, json=None, params=None, launch: bool = False,
                ok: tuple[int, ...] = (200, 201, 202, 204)) -> requests.Response:
        """Send one call (retried inside urllib3) and return the response, or raise
        the ProviderError subclass that fits its status."""
        endpoint = f"{method.upper()} {path}"
        _last.endpoint = endpoint   # named by errors about the answer (see checked_answers)
        if launch:
            self._launch_limiter.wait()
        self._limiter.wait()
        session = self._launch_session if launch else self.session
        try:
            resp = session.request(method, self.base_url + path, json=json, params=params,
                                   timeout=self.settings.timeout)
        except requests.exceptions.RetryError as e:
            raise RateLimitError(self.provider, endpoint, f"gave up after retries: {_reason(e)}") from None
        except requests.exceptions.Timeout:
            raise TransportError(self.provider, endpoint,
                                 f"no answer within {self.settings.timeout:g} s") from None
        except requests.exceptions.RequestException as e:
            raise TransportError(self.provider, endpoint, _reason(e)) from None
        if resp.status_code in ok:
            return resp
        error = self.error_for(resp, endpoint)
        if launch and resp.status_code >= 500:
            # A server error may come after the machine was rented.
            raise TransportError(self.provider, endpoint, error.message or "server error",
                                 status=error.status, code=error.code)
        raise error

    def json(self, method: str, path: str, *, launch: bool = False, **kw):
        resp = self.request(method, path, launch=launch, **kw)
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            # A garbled answer to a launch does not say whether it rented a machine.
            cls = TransportError if launch else ProviderError
            raise cls(self.provider, f"{method.upper()} {path}",
                      f"answered something that is not JSON: {resp.text[:120]!r}",
                      status=resp.status_code) from None

    def error_for(self, resp: requests.Response, endpoint: str) -> ProviderError:
        try:
            code, message = self.parse_error(resp)
        except Exception:  # a body the parser cannot read is still an error to report
            code, message = None, ""
        message = (message or resp.text[:200] or resp.reason or "").strip().replace("\n", " ")
        status = resp.status_code
        cls = {401: AuthError, 402: PaymentError, 403: AuthError, 404: NotFoundError,
               429: RateLimitError}.get(status)
        if cls is None:
            cls = InvalidRequestError if 400 <= status < 500 else ProviderError
        return cls(self.provider, endpoint, message, status=status, code=code)


def strip_suffix(url: str, *suffixes: str) -> str:
    """A base URL given with the API's version path (".../api/v1") or without it."""
    url = url.rstrip("/")
    for suffix in suffixes:
        if url.endswith(suffix):
            return url[: -len(suffix)]
    return url


def _reason(exc: Exception) -> str:
    """A short cause for a requests exception, without the URL's query (could hold a key)."""
    inner = exc
    while inner.__context__ is not None and inner.__context__ is not inner:
        inner = inner.__context__
        if "Connection refused" in str(inner):
            return "connection refused"
    text = str(exc).split("?")[0]
    if "Max retries exceeded" in text:
        text = text.split("(Caused by")[-1].strip(" ()") or text
    return text[:200]
