"""A scenario's fleet: its device classes (a profile, shipped name, file or inline, and
overrides) and the physical hosts that several ranks share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag

from edgetwin.availability_spec import Availability
from edgetwin.crowd_spec import member_names
from edgetwin.profile import DeviceProfile
from edgetwin.schema import FileName, NonNegativeFloat, PositiveFloat, Strict

# Upper bound past which a run would not fit one machine's memory: a value beyond it is a
# slip (an extra zero), refused with its field named before anything runs.
MAX_DEVICES = 1_024  # ranks of one split model: more than a ViT's 197 or BERT's 512 tokens


def _profile_kind(value: Any) -> str:
    return "profile_inline" if isinstance(value, dict | DeviceProfile) else "profile_name"


ProfileRef = Annotated[
    Annotated[Annotated[str, Field(min_length=1)], Tag("profile_name")]
    | Annotated[DeviceProfile, Tag("profile_inline")],
    Discriminator(_profile_kind),
]


class DeviceSpec(Strict):
    """One device class of the fleet: a profile (shipped name, file, or inline) and overrides."""

    name: str = Field(min_length=1)
    profile: ProfileRef
    count: Annotated[int, Field(gt=0, le=MAX_DEVICES)] = 1
    ram_mb: PositiveFloat | None = None
    battery_wh: PositiveFloat | None = None
    memory_bandwidth_gbps: PositiveFloat | None = None  # the twin's; real runs warn
    availability: Availability | None = None
    host: str | None = None  # a name in ``hosts``: its ranks share that physical device


class HostSpec(Strict):
    """A physical device that several ranks (or a rank and other load) run on
    (docs/twin.md, "Co-located ranks"). ``compute_slots``: how many ranks compute at once
    at full speed (a time-sliced GPU: 1; a CPU: its cores / each rank's threads);
    ``other_load``: other work sharing the compute as that many always-busy ranks
    (fair time-slicing; a fraction for work that is busy part of the time)."""

    name: FileName
    compute_slots: PositiveFloat = 1.0
    other_load: NonNegativeFloat = 0.0


def check_device_names(devices: Sequence[DeviceSpec]) -> None:
    """Every device of the fleet has a name of its own: the twin keys a device's link, its
    bytes and its trace track by its name, so two devices of one name would share a link."""
    classes: dict[str, int] = {}
    owner: dict[str, int] = {}
    for i, spec in enumerate(devices):
        j = classes.setdefault(spec.name, i)
        if j != i:
            raise ValueError(f"devices.{i}.name: '{spec.name}' is the name of devices.{j} too")
        for name in member_names(spec.name, spec.count):
            j = owner.setdefault(name, i)
            if j != i:
                problem = f"a device named '{name}' is in devices.{j} too"
                raise ValueError(
                    f"devices.{i}.name: {problem} (a class of count N names its devices "
                    "name-0 to name-(N-1))"
                )
