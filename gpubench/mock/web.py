"""Request and response values passed between the HTTP server and the provider modules,
and the claims those modules make on a request (see apis.py)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from urllib.parse import parse_qs

# How surely a request is an API module's, as its claim(req) says: the server hands a
# request to the surest claim. BY_PATH: the path is of the API's, and another API may
# claim it surely (Lambda's /api/v1 paths, where Vast.ai also answers).
NOT_MINE, BY_PATH, SURELY = 0, 1, 2


@dataclass
class Request:
    method: str
    path: str                 # without the query string
    query: dict[str, str]     # first value of each parameter
    headers: dict[str, str]   # names in lower case
    body: bytes = b""

    @classmethod
    def build(cls, method: str, target: str, headers: dict[str, str], body: bytes) -> "Request":
        path, _, qs = target.partition("?")
        query = {k: v[0] for k, v in parse_qs(qs, keep_blank_values=True).items()}
        return cls(method.upper(), path, query, {k.lower(): v for k, v in headers.items()}, body)

    def json(self):
        """The body as JSON; None when empty. Raises ValueError on malformed JSON."""
        if not self.body.strip():
            return None
        return json.loads(self.body)

    def bearer(self) -> str | None:
        auth = self.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return auth[7:].strip()
        return None

    def basic_user(self) -> str | None:
        """Basic auth user: `base64(KEY:)` or, as Lambda also accepts, the bare key."""
        auth = self.headers.get("authorization", "")
        if auth[:6].lower() != "basic ":
            return None
        raw = auth[6:].strip()
        try:
            decoded = base64.b64decode(raw, validate=True).decode()
            return decoded.split(":", 1)[0] if ":" in decoded else raw
        except (ValueError, UnicodeDecodeError):
            return raw


@dataclass
class Response:
    status: int = 200
    body: object = None               # JSON-able value, bytes, or None for no body
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        return json.dumps(self.body).encode()

