"""RunPod's legacy GraphQL API (POST /graphql): the subset the official `runpod` 1.12 SDK uses.

get_gpus / get_gpu (gpuTypes, lowestPrice), create_pod (podFindAndDeployOnDemand), get_pods /
get_pod (myself.pods, pod), stop/resume/terminate (podStop, podResume, podTerminate), and the
account key (myself.pubKey, updateUserSettings); besides, the documented pod queries (runtime
gpus and container, containerRegistryAuthId) and the catalog fields other tools read (gpuhunt:
countryCodes, dataCenters, maxGpuCount*, lowestPrice.availableGpuCounts), which a request
without an API key may ask for as RunPod allows. Queries are parsed, validated and executed by
graphql-core against the schema below, on the same pods as REST v2.

RunPod turns GraphQL off in early 2027: this module is self-contained so that deleting it (and
its one import in server.py) removes it.
"""

from __future__ import annotations

import time

from graphql import GraphQLError, build_schema, graphql_sync, parse, validate

from gpubench.mock import catalog, runpod_api
from gpubench.mock import billing
from gpubench.mock.faults import listed
from gpubench.mock.state import DEAD, PENDING, RUNNING, STOPPED, MockInstance
from gpubench.mock.web import Request, Response

PROVIDER = "runpod"

SCHEMA = build_schema("""
enum CloudTypeEnum { ALL SECURE COMMUNITY }

input GpuTypeFilter { id: String }
input GpuLowestPriceInput { gpuCount: Int, minMemoryInGb: Int, minVcpuCount: Int,
                            secureCloud: Boolean, totalDisk: Int, minDisk: Int, dataCenterId: String,
                            countryCode: String, compliance: [String], globalNetwork: Boolean,
                            minDownload: Int, minUpload: Int, supportPublicIp: Boolean }
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
  gpuTypeId: String, dataCenterId: String, cloudType: String
}
type NetworkVolume { id: String, name: String, size: Int, dataCenterId: String }
type User { id: String, authId: String, email: String, pubKey: String, pods: [Pod],
            networkVolumes: [NetworkVolume] }

type Query {
  gpuTypes(input: GpuTypeFilter): [GpuType]
  countryCodes: [String]
  dataCenters: [DataCenter]
  myself: User
  pod(input: PodFilter!): Pod
}
type Mutation {
  podFindAndDeployOnDemand(input: PodFindAndDeployOnDemandInput!): Pod
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
PUBLIC_FIELDS = {"gpuTypes", "countryCodes", "dataCenters", "__typename"}


def authorized(req: Request) -> bool:
    # GraphQL also took ?api_key= (runpod-python did until 2025)
    key = req.bearer() or req.query.get("api_key")
    if key is None:
        return _catalog_only(req)
    return key == runpod_api.API_KEY


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
    """"US-KS-2" -> "US", "EU-RO-1" -> "RO": the country a data center id names."""
    parts = dc_id.split("-")
    return parts[1] if parts[0] == "EU" and len(parts) > 1 else parts[0]


def _data_centers() -> list[dict]:
    return [{"id": k, "name": n, "location": n, "listed": True, "storageSupport": True, "compliance": []}
            for k, (n, _region) in catalog.RUNPOD_DATACENTERS.items()]


# ------------------------------------------------------------------ values

def _gpu_type(g: catalog.GpuModel, engine) -> dict:
    def lowest(info, input=None):
        input = input or {}
        count = input.get("gpuCount") or 1
        secure = input.get("secureCloud")
        clouds = ["SECURE"] if secure else ["COMMUNITY"] if secure is False else ["SECURE", "COMMUNITY"]
        want_dc, want_country = input.get("dataCenterId"), input.get("countryCode")
        slots = {(c, dc): n for c in clouds for dc, n in runpod_api.free_gpus(engine, g, c).items()
                 if want_dc in (None, dc) and want_country in (None, _country(dc))}
        total = {(c, dc): n for c in clouds for dc, n in catalog.runpod_slots(g)[c].items()
                 if (c, dc) in slots}
        free = max(slots.values(), default=0)
        price = min(catalog.runpod_price(g, c) for c in clouds)
        rented, offered = sum(total.values()) - sum(slots.values()), sum(total.values())
        return {"gpuName": g.runpod_name, "gpuTypeId": g.runpod_id, "minimumBidPrice": None,
                "uninterruptablePrice": price if free >= count else None, "minMemory": 64 * count,
                "minVcpu": 16 * count, "stockStatus": runpod_api.availability_level(free, count).capitalize()
                if free >= count else None,
                "availableGpuCounts": [n for n in range(1, min(free, 8) + 1)],
                "maxUnreservedGpuCount": min(free, 8), "rentedCount": rented, "totalCount": offered,
                "rentalPercentage": round(rented / offered, 4) if offered else 0.0, "compliance": [],
                "countryCode": want_country, "minDisk": input.get("minDisk"),
                "minDownload": input.get("minDownload"), "minUpload": input.get("minUpload"),
                "supportPublicIp": True}

    return {"id": g.runpod_id, "displayName": g.runpod_name, "manufacturer": "Nvidia",
            "memoryInGb": g.memory_gb, "cudaCores": 0, "secureCloud": True, "communityCloud": True,
            "securePrice": g.runpod_secure, "communityPrice": g.runpod_community,
            "oneWeekPrice": round(g.runpod_secure * 0.95, 2),
            "oneMonthPrice": round(g.runpod_secure * 0.9, 2),
            "threeMonthPrice": round(g.runpod_secure * 0.85, 2),
            "sixMonthPrice": round(g.runpod_secure * 0.8, 2), "clusterPrice": None,
            "communitySpotPrice": None, "secureSpotPrice": None, "maxGpuCount": 8,
            "maxGpuCountSecureCloud": 8, "maxGpuCountCommunityCloud": 8, "minPodGpuCount": 1,
            "nodeGroupDatacenters": [d for d in _data_centers()
                                     if any(d["id"] in catalog.runpod_slots(g)[c] for c in ("SECURE", "COMMUNITY"))],
            "lowestPrice": lowest}


def _pod(inst: MockInstance, engine) -> dict:
    x = inst.extra
    status = runpod_api.status_of(inst)
    running = status == "RUNNING"
    ports = x.get("ports", [])
    runtime = None
    if running:
        runtime = {"uptimeInSeconds": int(time.time() - (inst.running_since or time.time())),
                   "ports": [{"ip": engine.address(inst), "isIpPublic": True, "privatePort": private,
                              "publicPort": public, "type": "tcp"}
                             for private, public in runpod_api.tcp_ports(engine, inst)],
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
            "machineId": f"mock{inst.region.lower()}", "memoryInGb": 64.0 * inst.gpu_count,
            "podType": "RESERVED", "port": None, "ports": ",".join(ports),
            "uptimeSeconds": runtime["uptimeInSeconds"] if runtime else 0,
            "vcpuCount": 16.0 * inst.gpu_count, "volumeInGb": float(x.get("volume_gb", 0)),
            "volumeMountPath": x.get("volume_mount_path", "/runpod-volume"), "runtime": runtime,
            "machine": {"podHostId": f"{inst.id}-{inst.id.encode().hex()[:8]}",
                        "gpuDisplayName": engine.runpod_gpus[inst.gpu_name].runpod_name
                        if inst.gpu_name in engine.runpod_gpus else inst.gpu_name,
                        "location": inst.region},
            "containerRegistryAuthId": x.get("registry_auth"), "templateId": x.get("template_id"),
            "gpuTypeId": inst.gpu_name, "dataCenterId": inst.region, "cloudType": x.get("cloud", "SECURE")}


def _myself(engine) -> dict:
    keys = [k.public_key for k in engine.store.keys(PROVIDER)]
    return {"id": "user_gpubenchmock", "authId": "auth0|gpubenchmock", "email": "mock@gpubench.invalid",
            "pubKey": "\n\n".join(keys) if keys else None,
            "pods": lambda info: [_pod(i, engine) for i in listed(engine, PROVIDER)],
            "networkVolumes": []}


# ------------------------------------------------------------------ root resolvers

def _root(engine) -> dict:
    def gpu_types(info, input=None):
        want = (input or {}).get("id")
        return [_gpu_type(g, engine) for gid, g in engine.runpod_gpus.items() if want in (None, gid)]

    def pod(info, input):
        inst = engine.store.get(PROVIDER, input["podId"])
        return _pod(inst, engine) if inst else None

    def deploy(info, input):
        gpu_id = input.get("gpuTypeId")
        if not gpu_id:
            raise GraphQLError("gpuTypeId is required for podFindAndDeployOnDemand")
        cloud = input.get("cloudType") or "ALL"
        env = {e["key"]: e["value"] for e in (input.get("env") or [])}
        ports = [p for p in (input.get("ports") or "").replace(" ", "").split(",") if p]
        last = None
        for c in (["SECURE", "COMMUNITY"] if cloud == "ALL" else [cloud]):
            inst, err = runpod_api.create_pod(
                engine, name=input.get("name") or "", image=input.get("imageName") or "",
                gpu_id=gpu_id, count=input.get("gpuCount") or 1, cloud=c,
                data_centers=[input["dataCenterId"]] if input.get("dataCenterId") else [],
                disk=input.get("containerDiskInGb") or 10, ports=ports, env=env,
                start_ssh=input.get("startSsh", True),
                extra={"args": input.get("dockerArgs") or "", "volume_gb": input.get("volumeInGb") or 0,
                       "registry_auth": input.get("containerRegistryAuthId"),
                       "template_id": input.get("templateId"),
                       "volume_mount_path": input.get("volumeMountPath") or "/runpod-volume"})
            if inst is not None:
                return _pod(inst, engine)
            last = err
        raise GraphQLError(last.body["detail"] if last else runpod_api.NO_CAPACITY)

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
            "dataCenters": lambda info: _data_centers(), "myself": lambda info: _myself(engine), "pod": pod,
            "podFindAndDeployOnDemand": deploy, "podStop": stop, "podResume": resume,
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
