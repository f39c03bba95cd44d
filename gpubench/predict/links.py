"""The slowest link a DDP all-reduce crosses on an offer, with where the figure comes from.

Inside one machine: the provider's own figure where it publishes one (Vast.ai's
`bw_nvlink`, else its measured `pcie_bw` host-to-GPU rate, which a PCIe ring between
GPUs does not beat), else what the machine type implies (SXM machines have NVLink:
the published all-reduce bus bandwidth of such machines), else the PCIe generation's
typical rate. Between machines: the link gpubench measured between a cluster's
members, else the offer's published internet rates, else an assumed 10 Gbit/s.
"""

from __future__ import annotations

from gpubench.predict.gpu_specs import PCIE_ALLREDUCE_GBS, PCIE_SOURCE, GpuSpec
from gpubench.predict.model import ASSUMED, MEASURED, PUBLISHED, Figure, Link
from gpubench.providers.common import Offer

NVLINK_LATENCY_S = 10e-6
PCIE_LATENCY_S = 15e-6
NETWORK_LATENCY_S = 200e-6          # a hop through a datacenter network, TCP sockets
ASSUMED_NETWORK_GBS = 10.0 / 8      # 10 Gbit/s: where nothing says what the machines have
ASSUMED_PCIE_GEN = 4


def _figure(offer: Offer, name: str) -> float | None:
    value = offer.extra.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def inside_machine(offer: Offer, spec: GpuSpec | None) -> Link:
    """The link between the GPUs of one machine of this offer."""
    where = f"{offer.provider} offer {offer.offer_id}"
    nvlink = _figure(offer, "bw_nvlink")
    if nvlink:
        return Link("nvlink", Figure(nvlink, PUBLISHED, f"{where}: bw_nvlink {nvlink:g} GB/s"),
                    NVLINK_LATENCY_S)
    if spec is not None and spec.nvlink and spec.allreduce_busbw_gbs:
        return Link("nvlink", Figure(spec.allreduce_busbw_gbs, PUBLISHED,
                                     f"{spec.name} machines' NVLink all-reduce: {spec.link_source}"),
                    NVLINK_LATENCY_S)
    pcie = _figure(offer, "pcie_bw")
    if pcie:
        return Link("pcie", Figure(pcie, PUBLISHED, f"{where}: pcie_bw {pcie:g} GB/s"), PCIE_LATENCY_S)
    gen = int(_figure(offer, "pci_gen") or (spec.pcie_gen if spec and spec.pcie_gen else 0))
    if gen in PCIE_ALLREDUCE_GBS:
        return Link("pcie", Figure(PCIE_ALLREDUCE_GBS[gen], ASSUMED,
                                   f"PCIe Gen{gen} typical all-reduce: {PCIE_SOURCE}"), PCIE_LATENCY_S)
    return Link("pcie", Figure(PCIE_ALLREDUCE_GBS[ASSUMED_PCIE_GEN], ASSUMED,
                               f"PCIe Gen{ASSUMED_PCIE_GEN} assumed (the offer does not say): "
                               f"{PCIE_SOURCE}"), PCIE_LATENCY_S)


def between_machines(offer: Offer, measured_mbit_s: float | None = None) -> Link:
    """The network between machines of this offer: measured where gpubench measured it."""
    if measured_mbit_s:
        return Link("network", Figure(measured_mbit_s / 8000.0, MEASURED,
                                      f"measured between the machines: {measured_mbit_s:g} Mb/s"),
                    NETWORK_LATENCY_S)
    up, down = _figure(offer, "inet_up"), _figure(offer, "inet_down")
    if up and down:
        rate = min(up, down)
        return Link("network", Figure(rate / 8000.0, PUBLISHED,
                                      f"{offer.provider} offer {offer.offer_id}: inet_up {up:g}, "
                                      f"inet_down {down:g} Mb/s"), NETWORK_LATENCY_S)
    return Link("network", Figure(ASSUMED_NETWORK_GBS, ASSUMED,
                                  "10 Gbit/s assumed between machines (the offer does not say)"),
                NETWORK_LATENCY_S)


def for_count(offer: Offer, spec: GpuSpec | None, gpus: int, nodes: int,
              measured_mbit_s: float | None = None) -> Link | None:
    """The slowest link at `gpus` GPUs over `nodes` machines: none for one GPU, the
    network once the ring leaves a machine."""
    if gpus <= 1:
        return None
    if nodes > 1:
        return between_machines(offer, measured_mbit_s)
    return inside_machine(offer, spec)
