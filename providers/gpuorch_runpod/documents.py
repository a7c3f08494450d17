"""The GraphQL documents the adapter sends, every value a variable (api.py says why).

Operations and fields as RunPod documents them: https://docs.runpod.io/sdks/graphql/manage-pods
(``podFindAndDeployOnDemand``, ``podRentInterruptable`` with ``bidPerGpu``, ``podTerminate``,
``pod(input: {podId})``, ``myself { pods }``, ``gpuTypes``) and the schema at
https://graphql-spec.runpod.io/; network volumes under ``myself { networkVolumes }``, made by
``createNetworkVolume(input: {name, size, dataCenterId})`` and removed by
``deleteNetworkVolume(input: {id})`` (the fields of the REST reference,
https://docs.runpod.io/api-reference/network-volumes/POST/networkvolumes: size 1-4000 GB). The pod
fields are those the official client queries (runpod/api/queries/pods.py) plus ``name``. Registry
auths (registry.py): ``saveRegistryAuth``/``updateRegistryAuth`` as the official client sends them
(runpod/api/mutations/container_register_auth.py), listed under ``myself { containerRegistryCreds }``.
"""

from __future__ import annotations

_POD_FIELDS = """
      id name desiredStatus lastStatusChange podType costPerHr gpuCount vcpuCount memoryInGb imageName env
      machineId uptimeSeconds
      runtime { uptimeInSeconds ports { ip isIpPublic privatePort publicPort type } }
      machine { gpuDisplayName }
"""

PODS = "query Pods { myself { pods {" + _POD_FIELDS + "} } }"
POD = "query Pod($input: PodFilter) { pod(input: $input) {" + _POD_FIELDS + "} }"
DEPLOY_ON_DEMAND = ("mutation Deploy($input: PodFindAndDeployOnDemandInput) { podFindAndDeployOnDemand(input: $input) {"
                    + _POD_FIELDS + "} }")
DEPLOY_INTERRUPTIBLE = ("mutation DeploySpot($input: PodRentInterruptableInput!) {"
                        " podRentInterruptable(input: $input) {" + _POD_FIELDS + "} }")
TERMINATE = "mutation Terminate($input: PodTerminateInput!) { podTerminate(input: $input) }"
GPU_TYPES = """query GpuTypes {
  gpuTypes {
    id displayName memoryInGb maxGpuCount secureCloud communityCloud
    securePrice communityPrice secureSpotPrice communitySpotPrice
    lowestPrice(input: {gpuCount: 1}) { minVcpu minMemory stockStatus }
  }
}"""
MYSELF = "query Myself { myself { id } }"
NETWORK_VOLUMES = "query NetworkVolumes { myself { networkVolumes { id name size dataCenterId } } }"
CREATE_VOLUME = ("mutation CreateVolume($input: CreateNetworkVolumeInput!) {"
                 " createNetworkVolume(input: $input) { id name size dataCenterId } }")
DELETE_VOLUME = "mutation DeleteVolume($input: DeleteNetworkVolumeInput!) { deleteNetworkVolume(input: $input) }"
REGISTRY_AUTHS = "query RegistryAuths { myself { containerRegistryCreds { id name } } }"
SAVE_REGISTRY_AUTH = ("mutation SaveRegistryAuth($input: SaveRegistryAuthInput!) {"
                      " saveRegistryAuth(input: $input) { id name } }")
UPDATE_REGISTRY_AUTH = ("mutation UpdateRegistryAuth($input: UpdateRegistryAuthInput!) {"
                        " updateRegistryAuth(input: $input) { id name } }")
