"""Whose word counts for a ledger row: the account it was launched under beside the
account a provider is connected to.

A provider's list and its lookups speak only for one account (one API key at one
endpoint): another account's list simply lacks the row's machine, and its lookup by id
says "not found". So a row is checked only against its own account (SAME), left as it
is under another (OTHER), and never written off on absence when either side records
no account (UNKNOWN: a row from before accounts were recorded, or an adapter built
by hand).
"""

from __future__ import annotations

import enum
from dataclasses import replace

from gpubench.store.ledger import LedgerEntry, account_columns
from gpubench.providers.common import Account, Provider, ProviderError


class Relation(enum.Enum):
    SAME = "same"
    OTHER = "other"
    UNKNOWN = "unknown"


def connected(provider: Provider) -> Account | None:
    """The account `provider` is connected to; None when it does not say (an adapter
    built by hand rather than by registry.get)."""
    return getattr(provider, "account", None)


def identified(provider: Provider) -> Account | None:
    """The connected account with the provider's own account id, where the adapter can
    look it up (one call, remembered by the adapter). A failed lookup leaves the id
    unknown: it only helps to recognise a rotated key, so it is never worth an error."""
    account = connected(provider)
    if account is None or account.account_id is not None:
        return account
    lookup = getattr(provider, "lookup_account_id", None)
    if lookup is None:
        return account
    try:
        account_id = lookup()
    except ProviderError:
        return account
    return replace(account, account_id=account_id) if account_id else account


def relation(entry: LedgerEntry, provider: Provider) -> Relation:
    mine, current = entry.account, connected(provider)
    if mine is None or current is None:
        return Relation.UNKNOWN
    if mine.same_as(current):
        return Relation.SAME
    if mine.account_id and mine.endpoint == current.endpoint:
        # Another key at the same endpoint: a rotated key of the same account, if the
        # provider names the account.
        current = identified(provider)
        if current is not None and mine.same_as(current):
            return Relation.SAME
    return Relation.OTHER


def same_endpoint(entry: LedgerEntry, provider: Provider) -> bool:
    mine, current = entry.account, connected(provider)
    return mine is not None and current is not None and mine.endpoint == current.endpoint


def adopt(entry: LedgerEntry, provider: Provider) -> dict:
    """The columns that record the connected account on a row its provider has just
    shown to be its own (listed, or found by id), when the row does not record that
    account yet; {} when there is nothing to write."""
    current = connected(provider)
    if current is None or (entry.account is not None and entry.account.same_as(current)):
        return {}
    return account_columns(identified(provider))


def in_use(entry: LedgerEntry, provider: Provider) -> str:
    """What differs on the connected side: "the API key in use (fingerprint ...)", or
    the endpoint when that is what differs."""
    mine, current = entry.account, connected(provider)
    if current is None:
        return "the API key in use"
    if mine is not None and mine.endpoint != current.endpoint:
        return f"the endpoint in use ({current.endpoint})"
    return f"the API key in use (fingerprint {current.key_fingerprint})"


def fingerprint(provider: Provider) -> str:
    current = connected(provider)
    return current.key_fingerprint if current is not None else "unknown"


def describe_other(entry: LedgerEntry, provider: Provider) -> str:
    """"launched with another API key (fingerprint abc123def456)", with the endpoint
    when that differs too."""
    mine, current = entry.account, connected(provider)
    if mine is None:
        return "launched with an API key gpubench did not record"
    where = "" if current is not None and current.endpoint == mine.endpoint else f" at {mine.endpoint}"
    return f"launched with another API key (fingerprint {mine.key_fingerprint}{where})"
