"""What the two halves of the Vast.ai mock share (vast_api.py: the door, offers and
billing; vast_instances.py: instances and SSH keys): the provider's name and account,
the error shape, request bodies, times as the API writes them, and the query filter
that offer searches and instance lists both apply."""

from __future__ import annotations

from datetime import datetime, timezone

from gpubench.mock.web import Request, Response

PROVIDER = "vast"
USER_ID = 424242
# Vast.ai contract ids (instances and volumes alike: a volume is a contract too, "V.<id>")
# are 8-digit integers. Each mock starts at its own point in that range (from its
# mock_id), so two mocks side by side hand out different ids.
FIRST_INSTANCE_ID = 24_100_000
INSTANCE_ID_SPREAD = 800_000
# Query keys that are not conditions on a row's fields.
SPECIAL_KEYS = {"order", "type", "limit", "allocated_storage", "disable_bundling"}


def error(status: int, code: str, msg: str, **more) -> Response:
    return Response(status, {"success": False, "error": code, "msg": msg, **more})


def json_body(req: Request) -> dict | None:
    """The request's JSON object; {} when empty; None when malformed or not an object."""
    try:
        body = req.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else ({} if body is None else None)


def first_instance_id(mock_id: str) -> int:
    return FIRST_INSTANCE_ID + int(mock_id, 16) % INSTANCE_ID_SPREAD


def next_contract_id(engine) -> int:
    """A new contract id: an instance's or a volume's, from one counter."""
    return engine.store.next_counter("vast_instance_id", first_instance_id(engine.store.mock_id))


def iso(ts: float) -> str:
    """A time as the API document writes it: "2023-01-01T12:00:00Z"."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _num(v):
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        try:
            return float(low)
        except ValueError:
            return v
    return v


def _match(value, op: str, want) -> bool:
    a = _num(value)
    if op in ("in", "notin"):
        items = [_num(w) for w in (want if isinstance(want, list) else [want])]
        return (a in items) == (op == "in")
    b = _num(want)
    if op == "eq":
        return a == b
    if op == "neq":
        return a != b
    try:
        return {"gt": a > b, "gte": a >= b, "lt": a < b, "lte": a <= b}[op]
    except (TypeError, KeyError):
        return False


def search_answer(rows: list[dict], q: dict, order: list, limit: int) -> list[dict]:
    """A search's answer: the rows `q` selects, sorted by its "order" (`order` where it has
    none; a missing field last), at most its "limit" (`limit` where it has none; 0: all)."""
    rows = select(rows, q)
    for fld, direction in reversed(q.get("order") or order):
        rows.sort(key=lambda r: (r.get(fld) is None, r.get(fld) if r.get(fld) is not None else 0),
                  reverse=str(direction).lower() == "desc")
    try:
        limit = int(q.get("limit") or limit)
    except (TypeError, ValueError):
        pass
    return rows[:limit] if limit > 0 else rows


def select(rows: list[dict], q: dict) -> list[dict]:
    """The rows that meet every condition of query `q` ({field: {op: value}})."""
    out = []
    for row in rows:
        keep = True
        for fld, cond in q.items():
            if fld in SPECIAL_KEYS or fld not in row or not isinstance(cond, dict):
                continue       # unknown keys (chunked, georegion, ...) are ignored, as Vast does
            if not all(_match(row[fld], op, want) for op, want in cond.items()):
                keep = False
                break
        if keep:
            out.append(row)
    return out
