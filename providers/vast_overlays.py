"""Vast.ai's physical clusters and overlay networks, as the official client calls them
(vast-ai/vast-cli, vast.py, and the SDK's vastai/api/clusters.py; `vastai` 2025+):

- `show clusters`: GET /api/v0/clusters/ (show__clusters) ->
  {"clusters": {"<id>": {"subnet": ..., "nodes": [{"machine_id", "is_cluster_manager",
  "local_ip"}]}}}: the clusters of a host's own machines; a renter needs none of it.
- `create overlay CLUSTER_ID NAME`: POST /api/v0/overlay/ {"cluster_id": int, "name": str}
  (create__overlay) -> {"success": true, "msg": text}: the answer carries no id, so the
  overlay is found by name in the list afterwards.
- `join overlay NAME INSTANCE_ID`: PUT /api/v0/overlay/ {"name": str, "instance_id": int}
  (join__overlay) -> {"msg": text}.
- `show overlays`: GET /api/v0/overlay/ (show__overlays) -> a bare list of {"overlay_id",
  "name", "internal_subnet" (may be null), "cluster_id", "instances": [instance ids]}.
  No member's own address is listed: the docs (multi-node training using torch and NCCL)
  have it read on the instance, the address it holds in internal_subnet.
- `delete overlay ID|NAME`: DELETE /api/v0/overlay/ {"overlay_id": int} or
  {"overlay_name": str} (delete__overlay) -> {"msg": text}.
- Offers carry `cluster_id` (vast.py's offer fields; null off a cluster); the docs search
  them with `cluster_id!=None`.
- The client shows errors only through raise_for_status: they come in the API's usual
  shape, {"success": false, "error": code, "msg": text} (parsed by vast.parse_error).
"""

from __future__ import annotations

from gpubench.providers.common import NotFoundError, ProviderError
from gpubench.providers.http import ANSWER_ERRORS
from gpubench.providers.overlays import Overlay

PATH = "/api/v0/overlay/"


class VastOverlays:
    """The overlay calls of the Vast.ai adapter (mixed into vast.Vast, which gives
    `name` and `_call`)."""

    def overlays(self) -> list[Overlay]:
        body = self._call("GET", PATH)
        if not isinstance(body, list):
            raise ProviderError(self.name, f"GET {PATH}", "unexpected answer: not a list of overlays")
        try:
            return [_overlay(row) for row in body]
        except ANSWER_ERRORS as e:
            raise ProviderError(self.name, f"GET {PATH}", f"unexpected answer: {e}") from None

    def create_overlay(self, cluster_id: str, name: str) -> Overlay:
        self._call("POST", PATH, json={"cluster_id": int(cluster_id), "name": name})
        for overlay in self.overlays():
            if overlay.name == name:
                return overlay
        raise ProviderError(self.name, f"POST {PATH}",
                            f"overlay '{name}' was accepted but is not listed")

    def join_overlay(self, name: str, instance_id: str) -> None:
        self._call("PUT", PATH, json={"name": name, "instance_id": int(instance_id)})

    def delete_overlay(self, overlay_id: str) -> None:
        try:
            self._call("DELETE", PATH, json={"overlay_id": int(overlay_id)})
        except ProviderError as e:
            if e.status == 404 or "not found" in e.message.lower():
                raise NotFoundError(self.name, e.endpoint, e.message, status=e.status, code=e.code) from None
            raise


def _overlay(row: dict) -> Overlay:
    subnet = row.get("internal_subnet")
    return Overlay(overlay_id=str(int(row["overlay_id"])), name=str(row["name"]),
                   cluster_id=str(row["cluster_id"]), subnet=str(subnet) if subnet else None,
                   instances=tuple(str(int(i)) for i in row.get("instances") or ()))
