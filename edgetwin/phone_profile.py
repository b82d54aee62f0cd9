"""Phone profiles: the fitted parameters of one class of Android handset.

A phone profile is a YAML file (schema: ``PhoneProfile``; documented in
docs/crowd.md), written by ``fit_android_profiles`` into
``edgetwin/calibration/profiles/android_*.yaml``. A crowd scenario names one
per phone class, by file stem or by a path relative to the scenario file.
The twin drives each phone through the generic ``Device`` (power states,
battery, RAM), so ``device_profile`` maps a phone profile onto that schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from edgetwin.number_text import exact_text
from edgetwin.profile import (
    LI_ION_NOMINAL_V,
    DeviceProfile,
    battery_wh,
    profile_path,
    read_profile_mapping,
)
from edgetwin.schema import (
    NonNegativeFloat,
    PositiveFloat,
    Strict,
    validate_model,
)

MMAP_CEILING_MB = 32 * 2**20 / 1e6  # glibc's largest dynamic mmap threshold (64-bit), MB


class SessionParams(Strict):
    """Creating an ONNX Runtime session for a partition already on the phone's storage:
    ``floor_s + s_per_mb x`` its size, ``+ s_per_mapped_mb x`` its size when it is over
    ``mapped_above_mb`` (a buffer the allocator maps fresh on every load);
    ``load_cv`` its run-to-run variation."""

    floor_s: NonNegativeFloat
    s_per_mb: NonNegativeFloat = 0.0
    s_per_mapped_mb: NonNegativeFloat = 0.0
    mapped_above_mb: PositiveFloat = MMAP_CEILING_MB
    load_cv: Annotated[float, Field(ge=0, le=1)] = 0.0

    def load_s(self, size_mb: float) -> float:
        """Seconds to create the session of a partition of ``size_mb``."""
        mapped = self.s_per_mapped_mb * size_mb if size_mb > self.mapped_above_mb else 0.0
        return self.floor_s + self.s_per_mb * size_mb + mapped


class PhoneNetworkParams(Strict):
    """The phone's network stack: cost per message and achieved share of the WiFi rate."""

    message_overhead_ms: NonNegativeFloat
    bandwidth_efficiency: Annotated[float, Field(gt=0, le=2)]


class BatteryParams(Strict):
    capacity_mah: PositiveFloat
    voltage_v: PositiveFloat = LI_ION_NOMINAL_V


class PhonePowerParams(Strict):
    """Power drawn in each state of the worker app, in watts."""

    idle_w: NonNegativeFloat
    inference_w: NonNegativeFloat
    load_w: NonNegativeFloat
    transfer_w: NonNegativeFloat


class PhoneProfile(Strict):
    """Everything the crowd twin needs to know about one class of phone."""

    name: str
    description: str = ""
    ram_mb: PositiveFloat
    os_reserved_mb: NonNegativeFloat
    cpu_gflops: PositiveFloat
    inference_floor_ms: NonNegativeFloat
    has_gpu: bool = False
    cache_mb: PositiveFloat
    session: SessionParams
    network: PhoneNetworkParams
    battery: BatteryParams
    power: PhonePowerParams
    fit: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_reserve(self) -> PhoneProfile:
        if self.os_reserved_mb >= self.ram_mb:
            raise ValueError(
                f"os_reserved_mb: {exact_text(self.os_reserved_mb)} MB is all of ram_mb "
                f"({exact_text(self.ram_mb)} MB) or more: Android would leave the app no memory"
            )
        return self

    def session_budget_mb(self, ram_mb: float | None = None) -> float:
        """RAM the worker app can give a session: installed RAM less what Android keeps."""
        return max(0.0, (ram_mb or self.ram_mb) - self.os_reserved_mb)


def device_profile(phone: PhoneProfile, ram_mb: float | None = None) -> DeviceProfile:
    """The phone as a generic ``Device`` profile (its RAM is the session budget)."""
    power = phone.power
    budget_mb = phone.session_budget_mb(ram_mb)
    return DeviceProfile.model_validate(
        {
            "name": phone.name,
            "ram_mb": max(budget_mb, 1e-6),
            "battery_wh": battery_wh(phone.battery.capacity_mah, phone.battery.voltage_v),
            "compute": {
                "throughput_gflops": phone.cpu_gflops,
                "launch_floor_ms": phone.inference_floor_ms,
                "sync_host_ms": 0.0,
                "sync_host_ms_per_mb": 0.0,
            },
            "staging": {"fixed_ms": 0.0, "ms_per_mb": 0.0},
            "network": phone.network.model_dump(),
            "power": {
                "idle_w": power.idle_w,
                "compute_w": power.inference_w,
                "host_w": power.inference_w,
                "staging_w": power.load_w,
                "comm_w": power.transfer_w,
                "load_w": power.load_w,
            },
        }
    )


def load_phone_profile(name_or_path: str, relative_to: Path | None = None) -> PhoneProfile:
    """A shipped phone profile by name, or a profile file (relative to ``relative_to``)."""
    path = profile_path(name_or_path, relative_to, "phone")
    return validate_model(PhoneProfile, read_profile_mapping(path, "phone"), path)
