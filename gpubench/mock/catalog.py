"""What the mock rents out: GPU models, and each provider's offers built from them.

Prices are per GPU-hour in USD, in the published late-2026 ranges, with Vast cheapest and
Lambda dearest; Vast interruptible bids start well below on-demand. Each offer has a small
capacity (machines or GPUs) so that launching enough instances runs it out: live instances
hold capacity through their `offer_key` (see state.Store.used).
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuModel:
    key: str
    memory_gb: int
    lambda_type: str | None      # Lambda instance-type stem, e.g. "h100_sxm5"; None: not offered
    lambda_desc: str
    vast_name: str | None
    runpod_id: str | None
    runpod_name: str
    lambda_price: float = 0.0
    vast_price: float = 0.0
    runpod_secure: float = 0.0
    runpod_community: float = 0.0
    lambda_counts: tuple[int, ...] = (1, 2, 4, 8)
    vast_counts: tuple[int, ...] = (1, 2, 4, 8)
    cuda: str = "12.8"


GPUS: tuple[GpuModel, ...] = (
    GpuModel("h100-sxm", 80, "h100_sxm5", "H100 (80 GB SXM5)", "H100 SXM", "NVIDIA H100 80GB HBM3",
             "H100 SXM", lambda_price=3.29, vast_price=2.05, runpod_secure=2.69, runpod_community=2.39),
    GpuModel("h100-pcie", 80, "h100_pcie", "H100 (80 GB PCIe)", "H100 PCIE", "NVIDIA H100 PCIe",
             "H100 PCIe", lambda_price=2.49, vast_price=2.00, runpod_secure=2.39, runpod_community=2.19,
             lambda_counts=(1,)),
    GpuModel("a100-80", 80, "a100_80gb_sxm4", "A100 (80 GB SXM4)", "A100 SXM4", "NVIDIA A100-SXM4-80GB",
             "A100 SXM", lambda_price=1.79, vast_price=1.25, runpod_secure=1.64, runpod_community=1.39),
    GpuModel("a100-40", 40, "a100", "A100 (40 GB PCIe)", "A100 PCIE", "NVIDIA A100-PCIE-40GB",
             "A100 PCIe 40GB", lambda_price=1.29, vast_price=0.79, runpod_secure=1.19, runpod_community=0.99),
    GpuModel("l40s", 48, None, "", "L40S", "NVIDIA L40S", "L40S",
             vast_price=0.55, runpod_secure=0.86, runpod_community=0.79),
    GpuModel("a10", 24, "a10", "A10 (24 GB PCIe)", "A10", None, "A10",
             lambda_price=0.75, vast_price=0.25, lambda_counts=(1,), vast_counts=(1, 2, 4)),
    GpuModel("rtx4090", 24, None, "", "RTX 4090", "NVIDIA GeForce RTX 4090", "RTX 4090",
             vast_price=0.30, runpod_secure=0.44, runpod_community=0.34),
    GpuModel("rtx3090", 24, None, "", "RTX 3090", "NVIDIA GeForce RTX 3090", "RTX 3090",
             vast_price=0.16, runpod_secure=0.43, runpod_community=0.22),
)

# ---------------------------------------------------------------- Lambda

LAMBDA_REGIONS = {
    "us-east-1": "Virginia, USA",
    "us-west-1": "California, USA",
    "us-south-1": "Texas, USA",
    "europe-central-1": "Germany",
}


@dataclass(frozen=True)
class LambdaType:
    name: str
    gpu: GpuModel
    count: int
    regions: tuple[str, ...]
    capacity_per_region: int

    @property
    def price_cents(self) -> int:
        return round(self.gpu.lambda_price * self.count * 100)

    def instance_type(self) -> dict:
        g = self.gpu
        return {
            "name": self.name,
            "description": f"{self.count}x {g.lambda_desc}",
            "gpu_description": g.lambda_desc,
            "price_cents_per_hour": self.price_cents,
            "specs": {"vcpus": 26 * self.count, "memory_gib": 225 * self.count,
                      "storage_gib": 512 * self.count, "gpus": self.count},
        }


def lambda_types() -> dict[str, LambdaType]:
    regions = list(LAMBDA_REGIONS)
    out = {}
    n = 0
    for g in GPUS:
        if not g.lambda_type:
            continue
        for count in g.lambda_counts:
            name = f"gpu_{count}x_{g.lambda_type}"
            picked = (regions[n % len(regions)], regions[(n + 1) % len(regions)])
            out[name] = LambdaType(name, g, count, picked, 2 if count < 8 else 1)
            n += 1
    return out


# ---------------------------------------------------------------- Vast.ai

VAST_PLACES = ("Texas, US", "Quebec, CA", "Oslo, NO", "Bavaria, DE", "Oregon, US", "Taiwan, TW")


@dataclass(frozen=True)
class VastOffer:
    id: int
    machine_id: int
    host_id: int
    gpu: GpuModel
    count: int
    dph: float            # on-demand, whole machine
    min_bid: float        # lowest interruptible bid, whole machine
    geolocation: str
    reliability: float
    capacity: int
    cluster_id: int | None = None   # the physical cluster (a host's LAN) the machine is in

    def row(self, rented: int, bid: bool, storage_gb: float = 5.0, now: float | None = None) -> dict:
        """One offer as POST /api/v0/bundles/ lists it, priced for `storage_gb` of disk
        (the search's allocated_storage): the fields and JSON types of the live answers."""
        g = self.gpu
        price = self.min_bid if bid else self.dph
        storage_cost = 0.15                                # $ per GB-month
        disk_hour = storage_gb * storage_cost / 720
        total = round(price + disk_hour, 4)
        now = time.time() if now is None else now
        costs = {"gpuCostPerHour": round(price, 6), "diskHour": round(disk_hour, 6), "totalHour": total,
                 "discountTotalHour": 0, "discountedTotalPerHour": total}
        return {
            "id": self.id, "ask_contract_id": self.id, "bundle_id": self.id + 700000000,
            "machine_id": self.machine_id, "host_id": self.host_id,
            "gpu_name": g.vast_name, "num_gpus": self.count, "gpu_ram": g.memory_gb * 1024,
            "gpu_total_ram": g.memory_gb * 1024 * self.count, "gpu_arch": "nvidia", "gpu_frac": 1.0,
            "gpu_display_active": False, "gpu_mem_bw": 2000.0, "gpu_max_power": 400.0,
            "gpu_max_temp": 85.0, "gpu_lanes": 16, "bw_nvlink": 0.0, "compute_cap": 800,
            "cpu_name": "AMD EPYC 7B13", "cpu_arch": "amd64", "cpu_cores": 16 * self.count,
            "cpu_cores_effective": 16.0 * self.count, "cpu_ghz": 3.0,
            "cpu_ram": max(64000, 2 * g.memory_gb * 1024) * self.count,  # >= the GPUs' memory, as real hosts
            "disk_space": 500.0, "disk_bw": 2000.0, "disk_name": "nvme",
            "cuda_max_good": float(g.cuda), "driver_version": "570.86.15", "driver_vers": 570086015,
            "dph_base": round(price, 4), "dph_total": total, "dph_total_adj": total,
            "discounted_dph_total": total, "discount_rate": 0.0, "discounted_hourly": 0.0,
            "credit_discount_max": 0.4, "search": costs, "instance": dict(costs),
            "storage_total_cost": round(disk_hour, 6),
            "vram_costperhour": round(price / max(g.memory_gb * self.count, 1), 6),
            "min_bid": round(self.min_bid, 4), "storage_cost": storage_cost,
            "inet_up": 800.0, "inet_down": 1500.0, "inet_up_cost": 0.0, "inet_down_cost": 0.0,
            "internet_up_cost_per_tb": 0.0, "internet_down_cost_per_tb": 0.0,
            "inet_up_billed": None, "inet_down_billed": None,
            "gpu_ids": [self.machine_id * 10 + n for n in range(self.count)],
            "reliability_mult": round(self.reliability ** 4, 6), "rn": 1, "vericode": 1,
            "geolocode": 100_000 + self.host_id % 1000, "hostname": None, "bundled_results": 1,
            "pending_count": 0, "time_remaining": "", "time_remaining_isbid": "",
            "reliability": self.reliability, "reliability2": self.reliability,
            "geolocation": self.geolocation, "public_ipaddr": "127.0.0.1",
            "direct_port_count": 64, "pci_gen": 4.0, "pcie_bw": 25.0, "has_avx": 1,
            "mobo_name": "H12SSL-i", "os_version": "22.04", "ubuntu_version": "22.04",
            "dlperf": 30.0 * self.count, "dlperf_per_dphtotal": round(30.0 * self.count / price, 2),
            "flops_per_dphtotal": round(80.0 * self.count / price, 2), "total_flops": 80.0 * self.count,
            "score": round(100.0 * self.reliability * self.count / price, 2),
            # the host listed this machine a week ago until 30 days from now
            "duration": 30 * 86400.0, "start_date": round(now - 7 * 86400.0, 3),
            "end_date": round(now + 30 * 86400.0, 3),
            "rentable": rented < self.capacity, "rented": rented >= self.capacity,
            "verified": True, "verification": "verified", "external": False, "hosting_type": 0,
            "vms_enabled": False, "static_ip": False, "is_bid": bid, "resource_type": "gpu",
            "cluster_id": self.cluster_id, "webpage": None, "logo": "/static/logos/vastai_small2.png",
        }


def vast_offers() -> dict[int, VastOffer]:
    out = {}
    n = 0
    for g in GPUS:
        if not g.vast_name:
            continue
        for count in g.vast_counts:
            for variant in range(2):
                oid = 6_000_000 + 37 * n + variant
                dph = g.vast_price * count * (1.0 + 0.08 * variant)
                out[oid] = VastOffer(
                    id=oid, machine_id=20_000 + n * 2 + variant, host_id=100_000 + n,
                    gpu=g, count=count, dph=dph, min_bid=dph * 0.55,
                    geolocation=VAST_PLACES[(n + variant) % len(VAST_PLACES)],
                    reliability=0.995 - 0.01 * variant, capacity=max(1, 8 // count // 2))
            n += 1
    out.update(vast_cluster_offers())
    return out


# Physical clusters: machines of one host on one LAN, each offer one machine, with the
# cluster's id as the real marketplace lists it (search `cluster_id!=None`). Priced a
# little above the lone machines of their type, so the cheapest offer of a type stays one.
VAST_CLUSTERS = (   # (cluster id, GPU key, GPUs per machine, machines, place)
    (7001, "rtx4090", 4, 3, "Texas, US"),
    (7002, "a100-80", 8, 4, "Oslo, NO"),
    (7003, "h100-pcie", 4, 2, "Quebec, CA"),
)


def vast_cluster_offers() -> dict[int, VastOffer]:
    by_key = {g.key: g for g in GPUS}
    out = {}
    for c, (cluster_id, key, count, machines, place) in enumerate(VAST_CLUSTERS):
        g = by_key[key]
        for m in range(machines):
            oid = 6_500_000 + 100 * c + m
            dph = g.vast_price * count * (1.10 + 0.01 * m)
            out[oid] = VastOffer(id=oid, machine_id=40_000 + 100 * c + m, host_id=200_000 + c, gpu=g,
                                 count=count, dph=dph, min_bid=dph * 0.55, geolocation=place,
                                 reliability=0.995, capacity=1, cluster_id=cluster_id)
    return out


# ---------------------------------------------------------------- RunPod

RUNPOD_DATACENTERS = {
    "US-KS-2": ("US Kansas 2", "NORTH_AMERICA"),
    "US-TX-3": ("US Texas 3", "NORTH_AMERICA"),
    "EU-RO-1": ("Europe Romania 1", "EUROPE"),
    "CA-MTL-1": ("Canada Montreal 1", "NORTH_AMERICA"),
}


def runpod_gpus() -> dict[str, GpuModel]:
    return {g.runpod_id: g for g in GPUS if g.runpod_id}


def runpod_slots(gpu: GpuModel) -> dict[str, dict[str, int]]:
    """cloud -> {data center id: GPUs on offer}: two data centers per cloud."""
    dcs = list(RUNPOD_DATACENTERS)
    i = [g.key for g in GPUS].index(gpu.key)
    return {
        "SECURE": {dcs[i % 4]: 16, dcs[(i + 1) % 4]: 8},
        "COMMUNITY": {dcs[(i + 2) % 4]: 8, dcs[(i + 3) % 4]: 4},
    }


def runpod_price(gpu: GpuModel, cloud: str) -> float:
    return gpu.runpod_secure if cloud == "SECURE" else gpu.runpod_community


@dataclass(frozen=True)
class RunPodDataCenter:
    """What the machines of one RunPod data center offer a pod: where a deploy's placement
    filters (country, vCPUs, memory, public IP, CUDA, network speed, disk) are checked."""
    id: str
    country: str                  # ISO 3166 alpha-2, as countryCode filters it
    vcpus_per_gpu: int
    memory_gb_per_gpu: int
    public_ip: bool               # whether its hosts give pods a public IP (TCP ports need one)
    cuda: tuple[str, ...]         # CUDA versions its hosts' drivers support
    download_mbps: int
    upload_mbps: int
    disk_gb_per_gpu: int          # container disk plus volume a pod may take, per GPU

    def pod_vcpus(self, gpus: int) -> int:
        return self.vcpus_per_gpu * gpus

    def pod_memory_gb(self, gpus: int) -> int:
        return self.memory_gb_per_gpu * gpus


# Differ enough that every filter picks out some data centers and not others.
RUNPOD_DC_SPECS = {dc.id: dc for dc in (
    RunPodDataCenter("US-KS-2", "US", 16, 125, True, ("12.4", "12.6", "12.8"), 5000, 2000, 1000),
    RunPodDataCenter("US-TX-3", "US", 12, 94, True, ("12.4", "12.6", "12.8", "12.9"), 2000, 1000, 500),
    RunPodDataCenter("EU-RO-1", "RO", 8, 62, True, ("12.2", "12.4", "12.6", "12.8"), 1000, 800, 400),
    RunPodDataCenter("CA-MTL-1", "CA", 6, 46, False, ("11.8", "12.0", "12.1", "12.2"), 500, 300, 200),
)}
