"""Device profiles: the fitted, physical parameters of one kind of device.

A profile is a YAML file (schema: ``DeviceProfile``; documented in
docs/profiles.md). Shipped profiles live in ``edgetwin/calibration/profiles``
and are named by file stem; a scenario may also give a path. The cost
functions here are pure: the twin's event loop calls them, the calibration
fits their parameters.
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator

from edgetwin.errors import InputError, shown
from edgetwin.file_kinds import PROFILE_KIND_KEYS, ProfileKind, refuse_a_command_file
from edgetwin.schema import (
    NonNegativeFloat,
    PositiveFloat,
    Strict,
    check_regular_file,
    read_yaml_mapping,
    validate_model,
)

PROFILE_DIR = Path(__file__).parent / "calibration" / "profiles"
MB = 1e6
J_PER_WH = 3600.0  # joules in a watt-hour
LI_ION_NOMINAL_V = 3.85  # a phone battery's nominal voltage (one Li-ion cell)
PHONE_PROFILE_GLOB = "android_*.yaml"  # the shipped phone profiles; the others: devices'
# the field of a scenario that names a profile of each kind
_NAMED_BY: dict[ProfileKind, str] = {
    "device": "devices.N.profile",
    "phone": "crowd.fleet.N.profile",
}


class ComputeParams(Strict):
    """GPU kernel time and the host-side time that bounds a synchronised block.

    gpu_ms = launch_floor_ms + flops / throughput x (1 + rows_half_util / rows):
    a kernel group over few rows (a small batch, a short partition) under-uses
    the GPU; at ``rows_half_util`` rows it runs at half its throughput. When a
    device synchronises
    with its peers every block (any distributed strategy), the block's host
    side (dispatch plus handling of the received tensors) can no longer run
    ahead of the GPU: the block takes max(gpu_ms, host_ms).
    """

    throughput_gflops: PositiveFloat
    launch_floor_ms: NonNegativeFloat
    sync_host_ms: NonNegativeFloat
    sync_host_ms_per_mb: NonNegativeFloat
    rows_half_util: NonNegativeFloat = 0.0

    def gpu_ms(self, flops: float, rows: float) -> float:
        return self.launch_floor_ms + self.flop_ms(flops, rows)

    def flop_ms(self, flops: float, rows: float) -> float:
        """Arithmetic time of ``flops`` over ``rows`` rows (no launch floor)."""
        utilisation_penalty = 1.0 + self.rows_half_util / max(rows, 1.0)
        return flops / (self.throughput_gflops * 1e6) * utilisation_penalty

    def sync_host_ms_for(self, received_bytes: float) -> float:
        return self.sync_host_ms + self.sync_host_ms_per_mb * received_bytes / MB


class StagingParams(Strict):
    """GPU<->host copy of one tensor: fixed + cost_ms_per_mb * MB ** size_exponent.

    An exponent below 1 means the effective copy bandwidth grows with the
    transfer size (pinned DMA and host-side handling amortise better). A
    GPU->host copy of a tensor to send also waits for the kernel that builds it
    (``d2h_ms``).
    """

    fixed_ms: NonNegativeFloat
    ms_per_mb: NonNegativeFloat
    size_exponent: Annotated[float, Field(gt=0, le=1.5)] = 1.0
    # concatenating the gathered pieces on the host touches every byte again: the
    # host->GPU staging of a gathered tensor costs this multiple of a plain copy
    gathered_factor: Annotated[float, Field(ge=1, le=20)] = 1.0
    # pageable host buffers above a size are mapped fresh (glibc's mmap threshold):
    large_copy_kb: PositiveFloat | None = None
    large_copy_ms: NonNegativeFloat = 0.0
    # a blocking GPU->host copy first waits for the GPU work still queued on the rank's
    # rows (the kernel that builds the tensor to send from them); profilers book it as staging
    d2h_wait_ms_per_mb: NonNegativeFloat = 0.0

    def d2h_ms(self, nbytes: float, source_bytes: float) -> float:
        """Wait for the kernel that builds the tensor from ``source_bytes`` of the rank's
        rows, then copy its ``nbytes`` GPU->host."""
        if nbytes <= 0:
            return 0.0
        return self.d2h_wait_ms_per_mb * source_bytes / MB + self.copy_ms(nbytes)

    def gathered_ms(self, nbytes: float) -> float:
        """Concatenate gathered pieces on the host, then copy them host->GPU."""
        return self.gathered_factor * self.copy_ms(nbytes)

    def copy_ms(self, nbytes: float) -> float:
        if nbytes <= 0:
            return 0.0
        scaled: float = (nbytes / MB) ** self.size_exponent
        large = self.large_copy_kb is not None and nbytes > self.large_copy_kb * 1024
        return self.fixed_ms + self.ms_per_mb * scaled + (self.large_copy_ms if large else 0.0)


class NetworkParams(Strict):
    """The device's network stack: cost per message, achieved share of the link, limits.

    ``stack_mbps``: the most the stack sends whatever the link allows (and the
    rate a token bucket's burst runs at); ``loss_window_kb`` and
    ``loss_goodput``: beyond that many bytes of one message, only that share of
    the link time carries new data; ``duplex_efficiency``: the share a message
    gets while its receiver sends too (an AllGather step), since the
    acknowledgements of one direction queue behind the other's data.
    """

    message_overhead_ms: NonNegativeFloat
    bandwidth_efficiency: Annotated[float, Field(gt=0, le=2)] = 1.0
    duplex_efficiency: Annotated[float, Field(gt=0, le=1)] = 1.0
    stack_mbps: PositiveFloat | None = None
    loss_window_kb: PositiveFloat | None = None
    loss_goodput: Annotated[float, Field(gt=0, le=1)] = 1.0
    large_message_kb: PositiveFloat | None = None  # messages above this pay large_message_ms
    large_message_ms: NonNegativeFloat = 0.0

    def overhead_ms(self, nbytes: float) -> float:
        """Software cost of one message before its bits move."""
        large = self.large_message_kb is not None and nbytes > self.large_message_kb * 1024
        return self.message_overhead_ms + (self.large_message_ms if large else 0.0)


class PowerParams(Strict):
    """Power draw in each state the twin visits, in watts."""

    idle_w: NonNegativeFloat
    compute_w: NonNegativeFloat
    host_w: NonNegativeFloat
    staging_w: NonNegativeFloat
    comm_w: NonNegativeFloat
    load_w: NonNegativeFloat = 0

    def of(self, state: str) -> float:
        watts: float = getattr(self, f"{state}_w")
        return watts


POWER_STATES = tuple(name.removesuffix("_w") for name in PowerParams.model_fields)


class MemoryParams(Strict):
    """Device memory bandwidth: the time to move bytes between memory and the cores.

    ``fitted``: False when ``bandwidth_gbps`` is a vendor's figure, not fitted to traces;
    ``source`` says where it comes from.
    """

    bandwidth_gbps: PositiveFloat
    fitted: bool = False
    source: str = ""

    def traffic_ms(self, nbytes: float) -> float:
        return nbytes / (self.bandwidth_gbps * 1e6)


class DeviceProfile(Strict):
    """Everything the twin needs to know about one kind of device."""

    name: str
    description: str = ""
    ram_mb: PositiveFloat
    battery_wh: PositiveFloat | None = None
    compute: ComputeParams
    staging: StagingParams
    network: NetworkParams
    power: PowerParams
    memory: MemoryParams | None = None  # decoders need it (their decode is memory-bound)
    fit: dict[str, Any] = Field(default_factory=dict)

    @field_validator("fit")
    @classmethod
    def _check_held_out(cls, fit: dict[str, Any]) -> dict[str, Any]:
        """``fit.held_out.log_residuals`` (what prediction intervals read): metric ->
        value held out -> a list of numbers."""
        residuals = fit.get("held_out", {}).get("log_residuals", {})
        ok = isinstance(residuals, dict) and all(
            isinstance(groups, dict)
            and all(
                isinstance(values, list) and all(_is_number(v) for v in values)
                for values in groups.values()
            )
            for groups in residuals.values()
        )
        if not ok:
            raise ValueError("held_out.log_residuals: metric -> held-out value -> numbers")
        return fit

    def work_ms(self, flops: float, memory_bytes: float, rows: float) -> float:
        """A piece of work: launch floor + the larger of its FLOP and memory-traffic time."""
        if self.memory is None:
            raise ValueError(f"profile {self.name} has no memory bandwidth")
        return work_ms(self.compute, self.memory, flops, memory_bytes, rows)


def with_memory_bandwidth(profile: DeviceProfile, bandwidth_gbps: float | None) -> DeviceProfile:
    """The profile with a scenario's memory bandwidth (``devices.N.memory_bandwidth_gbps``)
    in place of its own, or as its memory section when it has none; unchanged for None."""
    if bandwidth_gbps is None:
        return profile
    memory = MemoryParams(bandwidth_gbps=bandwidth_gbps, source="the scenario's override")
    return profile.model_copy(update={"memory": memory})


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def work_ms(
    compute: ComputeParams, memory: MemoryParams, flops: float, memory_bytes: float, rows: float
) -> float:
    """A piece of work: launch floor + the larger of its FLOP and memory-traffic time."""
    flop_ms = compute.flop_ms(flops, rows)
    return compute.launch_floor_ms + max(flop_ms, memory.traffic_ms(memory_bytes))


def bootstrap_variant(profile: DeviceProfile, index: int) -> DeviceProfile:
    """The profile with every fitted section replaced by its ``index``-th bootstrap sample
    (cycling); unchanged when the fit kept no samples."""
    samples: dict[str, list[dict[str, float]]] = profile.fit.get("bootstrap_samples", {})
    update: dict[str, Any] = {}
    for section, sets in samples.items():
        if sets and section in DeviceProfile.model_fields:
            current = getattr(profile, section)
            update[section] = current.model_copy(update=sets[index % len(sets)])
    return profile.model_copy(update=update) if update else profile


def bootstrap_count(profile: DeviceProfile) -> int:
    """How many distinct bootstrap variants the profile has (0: the fit kept none)."""
    samples: dict[str, list[dict[str, float]]] = profile.fit.get("bootstrap_samples", {})
    return max((len(sets) for sets in samples.values()), default=0)


def profile_path(name_or_path: str, relative_to: Path | None, kind: ProfileKind = "device") -> Path:
    """A shipped profile file by name, else a path (relative to ``relative_to``) to a regular
    file; errors name the field ``profile`` (the caller adds the file and the full field):
    a missing path says its file does not exist, an unknown name lists the shipped
    profiles of ``kind``."""
    path = PROFILE_DIR / f"{name_or_path}.yaml"
    if _is_regular(path):
        return path
    candidate = Path(name_or_path)
    if relative_to is not None and not candidate.is_absolute():
        candidate = relative_to / candidate
    if not _exists(candidate):
        if not _looks_like_a_path(name_or_path):
            problem = f"no profile {shown(name_or_path)} (shipped: {shipped_profiles(kind)})"
            raise InputError(None, "profile", problem)
        problem = f"profile file {shown(name_or_path)} does not exist"
        elsewhere = _elsewhere_than_cwd(candidate, name_or_path)
        if elsewhere is not None:
            problem += (
                "; a path is relative to the folder of the file that names it: "
                f"no file {shown(str(elsewhere))}"
            )
        raise InputError(None, "profile", problem)
    return check_regular_file(candidate, None, "profile")


def _looks_like_a_path(name_or_path: str) -> bool:
    """A profile named by a path (a folder or a YAML suffix), not by a shipped name."""
    return "/" in name_or_path or name_or_path.endswith((".yaml", ".yml"))


def _elsewhere_than_cwd(candidate: Path, name_or_path: str) -> Path | None:
    """``candidate`` (relative to the current folder when it lies inside it) when it is not
    the file ``name_or_path`` names from the current folder, else None."""
    try:
        cwd = Path.cwd()
    except OSError:  # the current folder was removed
        return None
    if (cwd / candidate) == (cwd / name_or_path):
        return None
    return candidate.relative_to(cwd) if candidate.is_relative_to(cwd) else candidate


def shipped_profiles(kind: ProfileKind) -> list[str]:
    """The names of the shipped profiles of ``kind``."""
    paths = PROFILE_DIR.glob("*.yaml")
    return sorted(p.stem for p in paths if fnmatch(p.name, PHONE_PROFILE_GLOB) == (kind == "phone"))


def read_profile_mapping(path: Path, kind: ProfileKind) -> dict[str, Any]:
    """A profile file's top-level mapping; a command's input file (a calibration spec, a
    plan question), or a profile of the other kind (a phone profile where a device's is
    wanted), is refused as such, not as a profile with its own keys missing."""
    raw = read_yaml_mapping(path)
    refuse_a_command_file(raw, path, kind)
    other: ProfileKind = "phone" if kind == "device" else "device"
    if PROFILE_KIND_KEYS[other] in raw and PROFILE_KIND_KEYS[kind] not in raw:
        problem = f"{path.name} is a {other} profile ({_NAMED_BY[other]} names one)"
        raise InputError(None, "profile", f"{problem}, not a {kind} profile")
    return raw


def _is_regular(path: Path) -> bool:
    """Whether ``path`` is a regular file (False for a name the system refuses)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _exists(path: Path) -> bool:
    """Whether ``path`` names something, or a name the system refuses (too long, say: then
    ``check_regular_file`` says why)."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return False
    except OSError:
        pass
    return True


def load_profile(name_or_path: str, relative_to: Path | None = None) -> DeviceProfile:
    """A shipped profile by name, or a profile file (relative to ``relative_to``)."""
    path = profile_path(name_or_path, relative_to)
    return validate_model(DeviceProfile, read_profile_mapping(path, "device"), path)


def battery_wh(capacity_mah: float, voltage_v: float) -> float:
    """A battery's energy (Wh): its charge at its nominal voltage."""
    return capacity_mah * voltage_v / 1e3


def mah_from_joules(energy_j: float, voltage_v: float) -> float:
    """Charge drawn from a battery at its nominal voltage."""
    return energy_j / J_PER_WH / voltage_v * 1e3
