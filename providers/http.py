"""One HTTP session per provider: retries with backoff that honour Retry-After,
a timeout on every call, a client-side rate limit where the provider publishes
one, and every failure turned into a typed ProviderError.

Retries happen inside urllib3. Idempotent methods are retried on 429 and 5xx; a
POST only on 429 (the request was refused before doing anything), never on 5xx or a
lost connection, because a launch retried blindly can rent two machines.
"""

from __future__ import annotations

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
        retry = _Retry(total=self.settings.retries, connect=self.settings.retries, read=self.settings.retries,
                       status=self.settings.retries, backoff_factor=self.settings.backoff,
                       backoff_max=self.settings.backoff_max, status_forcelist=RETRY_STATUSES,
                       allowed_methods=IDEMPOTENT, respect_retry_after_header=True,
                       raise_on_status=False)
        self.session = requests.Session()
        self.session.headers.update({"User-Agent": "gpubench", "Accept": "application/json"})
        self.session.headers.update(headers)
        adapter = HTTPAdapter(max_retries=retry)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def request(self, method: str, path: str, *, json=None, params=None, launch: bool = False,
                ok: tuple[int, ...] = (200, 201, 202, 204)) -> requests.Response:
        """Send one call (retried inside urllib3) and return the response, or raise
        the ProviderError subclass that fits its status."""
        endpoint = f"{method.upper()} {path}"
        if launch:
            self._launch_limiter.wait()
        self._limiter.wait()
        try:
            resp = self.session.request(method, self.base_url + path, json=json, params=params,
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
        raise self.error_for(resp, endpoint)

    def json(self, method: str, path: str, **kw):
        resp = self.request(method, path, **kw)
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise ProviderError(self.provider, f"{method.upper()} {path}",
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
