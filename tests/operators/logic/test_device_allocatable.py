"""Node allocatable and capacity from the node's Device (Koordinator's device resource plugins)."""

from __future__ import annotations

from apis.extension import device as ext
from apis.meta import ObjectMeta
from apis.scheduling.device import Device, DeviceInfo, DeviceSpec
from koordlet.devices.description import DeviceDescription
from koordlet.devices.device_object import build_device
from operators.logic.device_allocatable import device_resources, label_patch, status_patch

GPU_NODE = {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"}


def _device(doc: dict[str, object], name: str = "n") -> Device:
    return build_device(name, "uid", DeviceDescription.model_validate(doc).inventory(name))


def test_sums_over_healthy_gpus_and_rdma_nics() -> None:
    device = _device(
        {
            "gpus": {"count": 8, "memory": "80Gi", "unhealthy": [3]},
            "rdma": {"count": 4, "vfs": 2, "unhealthy": [0]},
        }
    )
    assert {k: str(v) for k, v in device_resources(device).items()} == {
        ext.RESOURCE_GPU: "700",
        ext.RESOURCE_GPU_SHARED: "700",
        ext.RESOURCE_GPU_CORE: "700",
        ext.RESOURCE_GPU_MEMORY: "560Gi",
        ext.RESOURCE_GPU_MEMORY_RATIO: "700",
        ext.RESOURCE_RDMA: "300",
    }


def test_npu_and_mlu_resources() -> None:
    npus = _device(
        {
            "accelerators": {
                "vendor": "huawei",
                "model": "Ascend-910B3",
                "count": 8,
                "memory": "64Gi",
                "aiCore": 20,
                "aiCPU": 7,
            }
        }
    )
    # no gpu-core on an NPU: koordinator.sh/gpu sums to 0, as Koordinator writes it
    assert {k: str(v) for k, v in device_resources(npus).items()} == {
        ext.RESOURCE_GPU: "0",
        ext.RESOURCE_GPU_SHARED: "800",
        ext.RESOURCE_GPU_MEMORY: "512Gi",
        ext.RESOURCE_GPU_MEMORY_RATIO: "800",
        ext.RESOURCE_HUAWEI_NPU_CORE: "160",
        ext.RESOURCE_HUAWEI_NPU_CPU: "56",
        ext.RESOURCE_HUAWEI_NPU_DVPP: "800",
    }
    mlus = _device(
        {"accelerators": {"vendor": "cambricon", "model": "MLU370-X8", "count": 4, "memory": "48Gi"}}
    )
    assert {k: str(v) for k, v in device_resources(mlus).items()} == {
        ext.RESOURCE_GPU: "400",
        ext.RESOURCE_GPU_SHARED: "400",
        ext.RESOURCE_GPU_CORE: "400",
        ext.RESOURCE_GPU_MEMORY: "192Gi",
        ext.RESOURCE_GPU_MEMORY_RATIO: "400",
    }


def test_a_new_device_is_patched_into_capacity_and_allocatable() -> None:
    device = _device({"gpus": {"count": 8, "memory": "80Gi"}, "rdma": {"count": 2}})
    patch = status_patch(device, GPU_NODE, GPU_NODE)
    wanted = {
        ext.RESOURCE_GPU: "800",
        ext.RESOURCE_GPU_SHARED: "800",
        ext.RESOURCE_GPU_CORE: "800",
        ext.RESOURCE_GPU_MEMORY: "640Gi",
        ext.RESOURCE_GPU_MEMORY_RATIO: "800",
        ext.RESOURCE_RDMA: "200",
    }
    assert patch == {"status": {"capacity": wanted, "allocatable": wanted}}
    synced = {**GPU_NODE, **wanted}
    assert status_patch(device, synced, synced) is None
    # the same amount written another way is no change
    assert status_patch(device, synced, {**synced, ext.RESOURCE_GPU_MEMORY: str(640 << 30)}) is None


def test_an_unhealthy_gpu_lowers_allocatable_and_the_last_nic_removes_rdma() -> None:
    before = {
        **GPU_NODE,
        ext.RESOURCE_GPU: "800",
        ext.RESOURCE_GPU_SHARED: "800",
        ext.RESOURCE_GPU_CORE: "800",
        ext.RESOURCE_GPU_MEMORY: "640Gi",
        ext.RESOURCE_GPU_MEMORY_RATIO: "800",
        ext.RESOURCE_RDMA: "100",
    }
    device = _device(
        {"gpus": {"count": 8, "memory": "80Gi", "unhealthy": [5]}, "rdma": {"count": 1, "unhealthy": [0]}}
    )
    changes = {
        ext.RESOURCE_GPU: "700",
        ext.RESOURCE_GPU_SHARED: "700",
        ext.RESOURCE_GPU_CORE: "700",
        ext.RESOURCE_GPU_MEMORY: "560Gi",
        ext.RESOURCE_GPU_MEMORY_RATIO: "700",
        ext.RESOURCE_RDMA: None,
    }
    assert status_patch(device, before, before) == {"status": {"capacity": changes, "allocatable": changes}}


def test_a_node_whose_device_is_gone_loses_the_device_resources_only() -> None:
    before = {
        **GPU_NODE,
        ext.RESOURCE_GPU: "800",
        ext.RESOURCE_GPU_SHARED: "800",
        ext.RESOURCE_GPU_CORE: "800",
        ext.RESOURCE_GPU_MEMORY: "640Gi",
    }
    removal = {
        ext.RESOURCE_GPU: None,
        ext.RESOURCE_GPU_SHARED: None,
        ext.RESOURCE_GPU_CORE: None,
        ext.RESOURCE_GPU_MEMORY: None,
    }
    assert status_patch(None, before, before) == {"status": {"capacity": removal, "allocatable": removal}}
    assert status_patch(None, GPU_NODE, GPU_NODE) is None  # nvidia.com/gpu is the device plugin's
    empty = Device(
        metadata=ObjectMeta(name="n"), spec=DeviceSpec(devices=[DeviceInfo(type="fpga", health=True)])
    )
    assert status_patch(empty, GPU_NODE, None) is None


def test_vendor_model_and_driver_labels_go_to_the_node() -> None:
    device = _device({"driverVersion": "550.54.15", "gpus": {"count": 8, "memory": "80Gi"}})
    assert label_patch(device, {"kubernetes.io/hostname": "n"}) == {
        "metadata": {
            "labels": {
                ext.LABEL_GPU_VENDOR: "nvidia",
                ext.LABEL_GPU_MODEL: "NVIDIA-H100-80GB-HBM3",
                ext.LABEL_GPU_DRIVER_VERSION: "550.54.15",
            }
        }
    }
    assert label_patch(device, device.metadata.labels) is None
    assert label_patch(None, {ext.LABEL_GPU_MODEL: "x"}) is None
