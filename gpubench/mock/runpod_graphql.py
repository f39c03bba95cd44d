"""RunPod's legacy GraphQL API (POST /graphql): the subset the official `runpod` 1.12 SDK uses.

get_gpus / get_gpu (gpuTypes, lowestPrice), create_pod (podFindAndDeployOnDemand; besides,
podRentInterruptable at a bid), get_pods /
get_pod (myself.pods, pod), stop/resume/terminate (podStop, podResume, podTerminate), and the
account key (myself.pubKey, updateUserSettings); besides, the documented pod queries (runtime
gpus and container, containerRegistryAuthId, clusterIp) and the catalog fields other tools read
(gpuhunt's daily catalog: countryCodes, dataCenters, maxGpuCount*, lowestPrice with its
minCudaVersion filter, gpuTypes(input: {cluster: true}) with clusterPrice and
nodeGroupDatacenters, cpuFlavors), which a request without an API key may ask for as RunPod
allows. Queries are parsed, validated and executed by
graphql-core against the schema below, on the same pods as REST v2.

A deploy lands only in a data center that meets its placement filters (country, data center,
cloud, vCPUs, memory, public IP, network speed, disk, CUDA versions, GPU count and free GPUs; see
Placement and catalog.RUNPOD_DC_SPECS); where none does, it is refused in the real API's words
(runpod_pods.NO_CAPACITY), as an `errors` entry beside a null pod.

RunPod turns GraphQL off in early 2027: this module is self-contained so that deleting it (and
its one import in server.py) removes it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from graphql import GraphQLError, build_schema, graphql_sync, parse, validate

from gpubench.mock import catalog, runpod_pods
from gpubench.mock import billing
from gpubench.mock.faults import listed
from gpubench.mock.state import DEAD, PENDING, RUNNING, STOPPED, MockInstance
from gpubench.mock.web import Request, Response

PROVIDER = "runpod"

SCHEMA = build_schema("""
enum CloudTypeEnum { ALL SECURE COMMUNITY }

input GpuTypeFilter { id: String, cluster: Boolean }
input GpuLowestPriceInput { gpuCount: Int, minMemoryInGb: Int, minVcpuCount: Int,
                            secureCloud: Boolean, totalDisk: Int, minDisk: Int, dataCenterId: String,
                            countryCode: String, compliance: [String], globalNetwork: Boolean,
                            minDownload: Int, minUpload: Int, supportPublicIp: Boolean,
                            minCudaVersion: String }
input PodFilter { podId: String! }
input EnvironmentVariableInput { key: String!, value: String! }
input PodFindAndDeployOnDemandInput {
  name: String, imageName: String, gpuTypeId: String, cloudType: CloudTypeEnum, gpuCount: Int,
  supportPublicIp: Boolean, startSsh: Boolean, startJupyter: Boolean, dataCenterId: String,
  countryCode: String, containerDiskInGb: Int, volumeInGb: Int, volumeMountPath: String,
  minVcpuCount: Int, minMemoryInGb: Int, dockerArgs: String, ports: String,
  env: [EnvironmentVariableInput], templateId: String, networkVolumeId: String,
  allowedCudaVersions: [String], minCudaVersion: String, minDownload: Int, minUpload: Int,
  containerRegistryAuthId: String, gpuTypeIdList: [String], dataCenterIds: [String],
  globalNetwork: Boolean
}
input PodRentInterruptableInput {
  bidPerGpu: Float!, name: String, imageName: String, gpuTypeId: String, cloudType: CloudTypeEnum,
  gpuCount: Int, supportPublicIp: Boolean, startSsh: Boolean, startJupyter: Boolean, dataCenterId: String,
  countryCode: String, containerDiskInGb: Int, volumeInGb: Int, volumeMountPath: String,
  minVcpuCount: Int, minMemoryInGb: Int, dockerArgs: String, ports: String,
  env: [EnvironmentVariableInput], templateId: String, networkVolumeId: String,
  allowedCudaVersions: [String], minCudaVersion: String, minDownload: Int, minUpload: Int,
  containerRegistryAuthId: String, volumeKey: String
}
input PodStopInput { podId: String! }
input PodResumeInput { podId: String!, gpuCount: Int }
input PodTerminateInput { podId: String! }
input UpdateUserSettingsInput { pubKey: String }

type LowestPrice { gpuName: String, gpuTypeId: String, minimumBidPrice: Float,
                   uninterruptablePrice: Float, minMemory: Int, minVcpu: Int, stockStatus: String,
                   availableGpuCounts: [Int], maxUnreservedGpuCount: Int, rentedCount: Int,
                   totalCount: Int, rentalPercentage: Float, compliance: [String], countryCode: String,
                   minDisk: Int, minDownload: Int, minUpload: Int, supportPublicIp: Boolean }
type GpuType {
  id: String, displayName: String, manufacturer: String, memoryInGb: Int, cudaCores: Int,
  secureCloud: Boolean, communityCloud: Boolean, securePrice: Float, communityPrice: Float,
  oneMonthPrice: Float, threeMonthPrice: Float, oneWeekPrice: Float, communitySpotPrice: Float,
  secureSpotPrice: Float, sixMonthPrice: Float, clusterPrice: Float, maxGpuCount: Int,
  maxGpuCountSecureCloud: Int, maxGpuCountCommunityCloud: Int, minPodGpuCount: Int,
  nodeGroupDatacenters: [DataCenter], lowestPrice(input: GpuLowestPriceInput): LowestPrice
}
type DataCenter { id: String, name: String, location: String, listed: Boolean,
                  storageSupport: Boolean, compliance: [String] }
input CpuFlavorSpecificsInput { dataCenterId: String }
type CpuFlavorSpecifics { stockStatus: String, securePrice: Float }
type CpuFlavor { id: String, displayName: String, groupId: String, minVcpu: Int, maxVcpu: Int,
                 ramMultiplier: Int, diskLimitPerVcpu: Int,
                 specifics(input: CpuFlavorSpecificsInput): CpuFlavorSpecifics }
type PodRuntimePort { ip: String, isIpPublic: Boolean, privatePort: Int, publicPort: Int, type: String }
type PodRuntimeGpu { id: String, gpuUtilPercent: Float, memoryUtilPercent: Float }
type PodRuntimeContainer { cpuPercent: Float, memoryPercent: Float }
type PodRuntime { uptimeInSeconds: Int, ports: [PodRuntimePort], gpus: [PodRuntimeGpu],
                  container: PodRuntimeContainer }
type Machine { podHostId: String, gpuDisplayName: String, location: String }
type Pod {
  id: String, name: String, containerDiskInGb: Int, costPerHr: Float, desiredStatus: String,
  dockerArgs: String, dockerId: String, env: [String], gpuCount: Int, imageName: String,
  lastStatusChange: String, machineId: String, memoryInGb: Float, podType: String, port: Int,
  ports: String, uptimeSeconds: Int, vcpuCount: Float, volumeInGb: Float, volumeMountPath: String,
  runtime: PodRuntime, machine: Machine, containerRegistryAuthId: String, templateId: String,
  gpuTypeId: String, dataCenterId: String, cloudType: String, clusterIp: String
}
type NetworkVolume { id: String, name: String, size: Int, dataCenterId: String }
type User { id: String, authId: String, email: String, pubKey: String, pods: [Pod],
            networkVolumes: [NetworkVolume] }

type Query {
  gpuTypes(input: GpuTypeFilter): [GpuType]
  countryCodes: [String]
  dataCenters: [DataCenter]
  cpuFlavors: [CpuFlavor]
  myself: User
  pod(input: PodFilter!): Pod
}
type Mutation {
  podFindAndDeployOnDemand(input: PodFindAndDeployOnDemandInput!): Pod
  podRentInterruptable(input: PodRentInterruptableInput!): Pod
  podStop(input: PodStopInput!): Pod
  podResume(input: PodResumeInput!): Pod
  podTerminate(input: PodTerminateInput!): Boolean
  updateUserSettings(input: UpdateUserSettingsInput!): User
}
""")


def unauthorized() -> Response:
    return Response(401, {"errors": [{"message": "Unauthorized"}]})


def fault_response(status: int) -> Response:
    """The body of an injected 429/500/503 (the server adds Retry-After)."""
    return Response(status, {"errors": [{"message": {429: "Too many requests", 503: "Service unavailable"}
                                         .get(status, "Internal server error")}]})


# What a request without an API key may ask: the public catalog (gpuhunt reads it so).
PUBLIC_FIELDS = {"gpuTypes", "countryCodes", "dataCenters", "cpuFlavors", "__typename"}


def authorized(req: Request) -> bool:
    # GraphQL also took ?api_key= (runpod-python did until 2025)
    key = req.bearer() or req.query.get("api_key")
    if key is None:
        return _catalog_only(req)
    return key == runpod_pods.API_KEY


def _catalog_only(req: Request) -> bool:
    """A query (not a mutation) whose every top-level field is a public catalog field."""
    try:
        document = parse((req.json() or {})["query"])
    except (ValueError, KeyError, TypeError, GraphQLError):
        return False
    for op in document.definitions:
        if getattr(op, "operation", None) is None:
            continue                                 # fragments are checked where spread
        if op.operation.value != "query":
            return False
        for sel in op.selection_set.selections:
            if getattr(sel, "name", None) is None or sel.name.value not in PUBLIC_FIELDS:
                return False
    return True


def _country(dc_id: str) -> str:
    return catalog.RUNPOD_DC_SPECS[dc_id].country


def _data_centers() -> list[dict]:
    return [{"id": k, "name": n, "location": n, "listed": True, "storageSupport": True, "compliance": []}
            for k, (n, _region) in catalog.RUNPOD_DATACENTERS.items()]


# ------------------------------------------------------------------ placement

_PORT = re.compile(r"^(\d{1,5})/(http|tcp|udp)$")


def _cuda(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        raise GraphQLError(f"invalid CUDA version {version!r}") from None


def _ports(text: str | None) -> list[str]:
    """"8888/http,22/tcp" -> ["8888/http", "22/tcp"]; a malformed entry is refused."""
    ports = [p for p in (text or "").replace(" ", "").split(",") if p]
    for p in ports:
        m = _PORT.match(p)
        if m is None or not 1 <= int(m.group(1)) <= 65535:
            raise GraphQLError(f"invalid port {p!r}: expected PORT/http or PORT/tcp, e.g. 22/tcp")
    return ports


@dataclass(frozen=True)
class Placement:
    """What a deploy input asks of the data center its pod lands in: the filters of
    podFindAndDeployOnDemand and podRentInterruptable that the released SDK sends."""
    gpus: int = 1
    data_center: str | None = None
    country: str | None = None
    min_vcpus: int = 0
    min_memory_gb: int = 0
    public_ip: bool = False
    min_download: int = 0
    min_upload: int = 0
    disk_gb: int = 0              # container disk plus volume
    cuda_allowed: tuple[str, ...] = ()
    min_cuda: str | None = None

    @classmethod
    def of(cls, input: dict, ports: list[str]) -> "Placement":
        gpus = input.get("gpuCount") or 1
        if gpus < 1:
            raise GraphQLError(f"gpuCount must be at least 1, not {gpus}")
        for version in [*(input.get("allowedCudaVersions") or []), input.get("minCudaVersion") or "0"]:
            _cuda(version)
        return cls(gpus=gpus, data_center=input.get("dataCenterId"), country=input.get("countryCode"),
                   min_vcpus=input.get("minVcpuCount") or 0, min_memory_gb=input.get("minMemoryInGb") or 0,
                   # TCP ports are reached on the host's public IP, so they need one as well
                   public_ip=bool(input.get("supportPublicIp")) or any(p.endswith("/tcp") for p in ports),
                   min_download=input.get("minDownload") or 0, min_upload=input.get("minUpload") or 0,
                   disk_gb=(input.get("containerDiskInGb") or 0) + (input.get("volumeInGb") or 0),
                   cuda_allowed=tuple(input.get("allowedCudaVersions") or ()),
                   min_cuda=input.get("minCudaVersion"))

    def fits(self, dc: catalog.RunPodDataCenter) -> bool:
        cuda = [_cuda(v) for v in dc.cuda]
        return (self.data_center in (None, dc.id) and self.country in (None, dc.country)
                and dc.pod_vcpus(self.gpus) >= self.min_vcpus
                and dc.pod_memory_gb(self.gpus) >= self.min_memory_gb
                and (dc.public_ip or not self.public_ip)
                and dc.download_mbps >= self.min_download and dc.upload_mbps >= self.min_upload
                and dc.disk_gb_per_gpu * self.gpus >= self.disk_gb
                and (not self.cuda_allowed or any(_cuda(v) in cuda for v in self.cuda_allowed))
                and (self.min_cuda is None or max(cuda) >= _cuda(self.min_cuda)))

    def data_centers(self, gpu: catalog.GpuModel, cloud: str) -> list[str]:
        """The data centers of `cloud` that offer `gpu` and meet every filter."""
        return [dc for dc in catalog.runpod_slots(gpu)[cloud] if self.fits(catalog.RUNPOD_DC_SPECS[dc])]


def min_bid(gpu: catalog.GpuModel) -> float:
    """The lowest interruptible bid per GPU-hour the mock accepts."""
    return round(gpu.runpod_community * 0.5, 2)


# ------------------------------------------------------------------ values

def _gpu_type(g: catalog.GpuModel, engine) -> dict:
    def lowest(info, input=None):
        input = input or {}
        count = input.get("gpuCount") or 1
        secure = input.get("secureCloud")
        clouds = ["SECURE"] if secure else ["COMMUNITY"] if secure is False else ["SECURE", "COMMUNITY"]
        want = Placement(gpus=count, data_center=input.get("dataCenterId"), country=input.get("countryCode"),
                         min_vcpus=input.get("minVcpuCount") or 0, min_memory_gb=input.get("minMemoryInGb") or 0,
                         public_ip=bool(input.get("supportPublicIp")), min_download=input.get("minDownload") or 0,
                         min_upload=input.get("minUpload") or 0,
                         disk_gb=input.get("totalDisk") or input.get("minDisk") or 0,
                         min_cuda=input.get("minCudaVersion"))
        slots = {(c, dc): n for c in clouds for dc, n in runpod_pods.free_gpus(engine, g, c).items()
                 if want.fits(catalog.RUNPOD_DC_SPECS[dc])}
        specs = [catalog.RUNPOD_DC_SPECS[dc] for _c, dc in slots]
        total = {(c, dc): n for c in clouds for dc, n in catalog.runpod_slots(g)[c].items()
                 if (c, dc) in slots}
        free = max(slots.values(), default=0)
        # the cheapest cloud that can place it (Romania, say, is in the 4090's secure cloud only)
        price = min((catalog.runpod_price(g, c) for (c, _dc), n in slots.items() if n >= count), default=None)
        rented, offered = sum(total.values()) - sum(slots.values()), sum(total.values())
        return {"gpuName": g.runpod_name, "gpuTypeId": g.runpod_id, "minimumBidPrice": min_bid(g),
                "uninterruptablePrice": price, "minMemory": min((d.pod_memory_gb(count) for d in specs), default=0),
                "minVcpu": min((d.pod_vcpus(count) for d in specs), default=0), "stockStatus": runpod_pods.availability_level(free, count).capitalize()
                if free >= count else None,
                "availableGpuCounts": [n for n in range(1, min(free, 8) + 1)],
                "maxUnreservedGpuCount": min(free, 8), "rentedCount": rented, "totalCount": offered,
                "rentalPercentage": round(rented / offered, 4) if offered else 0.0, "compliance": [],
                "countryCode": want.country, "minDisk": input.get("minDisk"),
                "minDownload": input.get("minDownload"), "minUpload": input.get("minUpload"),
                "supportPublicIp": all(d.public_ip for d in specs)}

    return {"id": g.runpod_id, "displayName": g.runpod_name, "manufacturer": "Nvidia",
            "memoryInGb": g.memory_gb, "cudaCores": 0, "secureCloud": True, "communityCloud": True,
            "securePrice": g.runpod_secure, "communityPrice": g.runpod_community,
            "oneWeekPrice": round(g.runpod_secure * 0.95, 2),
            "oneMonthPrice": round(g.runpod_secure * 0.9, 2),
            "threeMonthPrice": round(g.runpod_secure * 0.85, 2),
            # an Instant Cluster (runpod_clusters) is made of secure-cloud pods, at their price
            "sixMonthPrice": round(g.runpod_secure * 0.8, 2),
            "clusterPrice": g.runpod_secure if catalog.runpod_slots(g)["SECURE"] else None,
            "communitySpotPrice": None, "secureSpotPrice": None, "maxGpuCount": 8,
            "maxGpuCountSecureCloud": 8, "maxGpuCountCommunityCloud": 8, "minPodGpuCount": 1,
            "nodeGroupDatacenters": [d for d in _data_centers() if d["id"] in catalog.runpod_slots(g)["SECURE"]],
            "lowestPrice": lowest}


def _pod(inst: MockInstance, engine) -> dict:
    x = inst.extra
    dc = catalog.RUNPOD_DC_SPECS[inst.region]
    status = runpod_pods.status_of(inst)
    running = status == "RUNNING"
    ports = x.get("ports", [])
    runtime = None
    if running:
        runtime = {"uptimeInSeconds": int(time.time() - (inst.running_since or time.time())),
                   "ports": [{"ip": engine.address(inst), "isIpPublic": True, "privatePort": private,
                              "publicPort": public, "type": "tcp"}
                             for private, public in runpod_pods.tcp_ports(engine, inst)],
                   "gpus": [{"id": f"GPU-{inst.id}-{n}", "gpuUtilPercent": 0, "memoryUtilPercent": 0}
                            for n in range(inst.gpu_count)],
                   "container": {"cpuPercent": 0, "memoryPercent": 0}}
    desired = {PENDING: "RUNNING", RUNNING: "RUNNING", STOPPED: "EXITED", DEAD: "EXITED"}[inst.phase]
    env = {k: v for k, v in (x.get("env") or {}).items()}
    return {"id": inst.id, "name": inst.name, "containerDiskInGb": x.get("disk", 10),
            "costPerHr": 0.0 if inst.phase in (STOPPED, DEAD) else inst.price_per_hour,
            "desiredStatus": desired, "dockerArgs": x.get("args", ""), "dockerId": None,
            "env": [f"{k}={v}" for k, v in env.items()], "gpuCount": inst.gpu_count,
            "imageName": x.get("image", ""), "lastStatusChange": f"{status.capitalize()}: mock",
            "machineId": f"mock{inst.region.lower()}", "memoryInGb": float(dc.pod_memory_gb(inst.gpu_count)),
            "podType": "INTERRUPTABLE" if x.get("interruptible") else "RESERVED", "port": None,
            "ports": ",".join(ports),
            "uptimeSeconds": runtime["uptimeInSeconds"] if runtime else 0,
            "vcpuCount": float(dc.pod_vcpus(inst.gpu_count)), "volumeInGb": float(x.get("volume_gb", 0)),
            "volumeMountPath": x.get("volume_mount_path", "/runpod-volume"), "runtime": runtime,
            "machine": {"podHostId": f"{inst.id}-{inst.id.encode().hex()[:8]}",
                        "gpuDisplayName": engine.runpod_gpus[inst.gpu_name].runpod_name
                        if inst.gpu_name in engine.runpod_gpus else inst.gpu_name,
                        "location": inst.region},
            "containerRegistryAuthId": x.get("registry_auth"), "templateId": x.get("template_id"),
            "gpuTypeId": inst.gpu_name, "dataCenterId": inst.region, "cloudType": x.get("cloud", "SECURE"),
            "clusterIp": (x.get("cluster") or {}).get("ip") or None}


def _myself(engine) -> dict:
    keys = [k.public_key for k in engine.store.keys(PROVIDER)]
    return {"id": "user_gpubenchmock", "authId": "auth0|gpubenchmock", "email": "mock@gpubench.invalid",
            "pubKey": "\n\n".join(keys) if keys else None,
            "pods": lambda info: [_pod(i, engine) for i in listed(engine, PROVIDER)],
            "networkVolumes": []}


# ------------------------------------------------------------------ root resolvers

def _root(engine) -> dict:
    def gpu_types(info, input=None):
        want, cluster = (input or {}).get("id"), (input or {}).get("cluster")
        # cluster: true lists the types an Instant Cluster can be made of (secure cloud);
        # false or absent, every type, as pods
        return [_gpu_type(g, engine) for gid, g in engine.runpod_gpus.items() if want in (None, gid)
                and (not cluster or catalog.runpod_slots(g)["SECURE"])]

    def pod(info, input):
        inst = engine.store.get(PROVIDER, input["podId"])
        return _pod(inst, engine) if inst else None

    def deploy(info, input, bid: float | None = None):
        gpu_id = input.get("gpuTypeId")
        if not gpu_id:
            raise GraphQLError("gpuTypeId is required for podFindAndDeployOnDemand")
        g = engine.runpod_gpus.get(gpu_id)
        if g is None:
            raise GraphQLError(f"unknown GPU type id {gpu_id!r}")
        if bid is not None and bid < min_bid(g):
            raise GraphQLError(f"bidPerGpu {bid} is below the minimum bid of {min_bid(g)} for {gpu_id}")
        cloud = input.get("cloudType") or "ALL"
        env = {e["key"]: e["value"] for e in (input.get("env") or [])}
        ports = _ports(input.get("ports"))
        want = Placement.of(input, ports)
        for c in (["SECURE", "COMMUNITY"] if cloud == "ALL" else [cloud]):
            places = want.data_centers(g, c)
            if not places:
                continue
            inst, err = runpod_pods.create_pod(
                engine, name=input.get("name") or "", image=input.get("imageName") or "",
                gpu_id=gpu_id, count=want.gpus, cloud=c, data_centers=places,
                disk=input.get("containerDiskInGb") or 10, ports=ports, env=env,
                start_ssh=input.get("startSsh", True),
                extra={"args": input.get("dockerArgs") or "", "volume_gb": input.get("volumeInGb") or 0,
                       "registry_auth": input.get("containerRegistryAuthId"),
                       "template_id": input.get("templateId"),
                       "volume_mount_path": input.get("volumeMountPath") or "/runpod-volume",
                       **({"interruptible": True} if bid is not None else {})})
            if inst is not None:
                if bid is not None:
                    inst = _mutate(inst.id, lambda i: setattr(i, "price_per_hour", round(bid * i.gpu_count, 4)))
                return _pod(inst, engine)
            if err.body["detail"] != runpod_pods.NO_CAPACITY:
                raise GraphQLError(err.body["detail"])
        # the real API's words when no machine meets the request
        raise GraphQLError(runpod_pods.NO_CAPACITY)

    def rent_interruptible(info, input):
        return deploy(info, input, bid=input["bidPerGpu"])

    def _get(pod_id: str, message: str) -> MockInstance:
        inst = engine.store.get(PROVIDER, pod_id)
        if inst is None:
            raise GraphQLError(message)
        return inst

    def _mutate(pod_id: str, change) -> MockInstance:
        inst = engine.mutate(PROVIDER, pod_id, change)
        if inst is None:
            raise GraphQLError("pod not found")
        return inst

    def stop(info, input):
        return _pod(_mutate(input["podId"], engine.mark_stopped), engine)

    def resume(info, input):
        def boot(inst: MockInstance) -> bool | None:
            if inst.phase not in (STOPPED, DEAD):
                return False
            engine.mark_booting(inst)
            return None

        return _pod(_mutate(input["podId"], boot), engine)

    def terminate(info, input):
        billing.terminate(engine, _get(input["podId"], "pod not found to terminate"))
        return None

    def update_user(info, input):
        raw = input.get("pubKey") or ""
        keys = [k.strip() for k in raw.replace("\r", "").split("\n") if k.strip()]
        engine.store.replace_keys(PROVIDER, keys)
        return _myself(engine)

    return {"gpuTypes": gpu_types, "countryCodes": lambda info: sorted({_country(d) for d in
                                                                         catalog.RUNPOD_DATACENTERS}),
            "dataCenters": lambda info: _data_centers(),
            "cpuFlavors": lambda info: [],       # the mock rents no CPU pods: no flavor to offer
            "myself": lambda info: _myself(engine), "pod": pod,
            "podFindAndDeployOnDemand": deploy, "podRentInterruptable": rent_interruptible,
            "podStop": stop, "podResume": resume,
            "podTerminate": terminate, "updateUserSettings": update_user}


def handle(req: Request, engine) -> Response:
    if req.method != "POST":
        return Response(405, {"errors": [{"message": "GraphQL needs POST"}]})
    try:
        body = req.json() or {}
        query = body["query"]
    except (ValueError, KeyError, TypeError):
        return Response(400, {"errors": [{"message": "Must provide query string."}]})
    try:
        document = parse(query)
    except GraphQLError as e:
        return Response(400, {"errors": [e.formatted]})
    problems = validate(SCHEMA, document)
    if problems:
        return Response(400, {"errors": [p.formatted for p in problems]})
    result = graphql_sync(SCHEMA, query, root_value=_root(engine),
                          variable_values=body.get("variables"), operation_name=body.get("operationName"))
    out: dict = {"data": result.data}
    if result.errors:
        out["errors"] = [e.formatted for e in result.errors]
    return Response(200, out)
