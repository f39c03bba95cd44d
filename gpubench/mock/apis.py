"""The provider APIs the mock speaks: one module per registry entry that names one
(ProviderEntry.mock_api), in the registry's order, and which of them a request is for.

An API module defines PROVIDER (the registry name), API_KEY (the test key it accepts),
claim(req) (how surely a request is its own: web.NOT_MINE, BY_PATH or SURELY),
authorized(req), unauthorized(), fault_response(status) and handle(req, engine); and
where it has them, self_removal(req, engine) (a machine's own key removing that
machine) and answered_by(req) (another module that answers some of its requests, as
RunPod's legacy GraphQL does; None: nothing can).
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from types import ModuleType

from gpubench.mock.web import NOT_MINE, Request


@lru_cache(maxsize=1)
def modules() -> tuple[ModuleType, ...]:
    from gpubench.providers import registry

    return tuple(importlib.import_module(e.mock_api) for e in registry.entries() if e.mock_api)


def for_request(req: Request) -> ModuleType | None:
    """The module that answers `req`: the API with the surest claim on it (the first in
    registry order on a tie), or the module it hands the request to; None for a path no
    API claims."""
    best, surest = None, NOT_MINE
    for module in modules():
        claim = module.claim(req)
        if claim > surest:
            best, surest = module, claim
    if best is None:
        return None
    answered_by = getattr(best, "answered_by", None)
    return best if answered_by is None else answered_by(req)
