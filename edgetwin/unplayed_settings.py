"""Warnings for the settings of a scenario that a run in a given mode does not play."""

from __future__ import annotations

from collections.abc import Sequence

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.emulator_spec import JOB_TIMEOUT_S
from edgetwin.errors import MODE_EMU
from edgetwin.network_spec import BandwidthStep
from edgetwin.number_text import exact_text
from edgetwin.scenario import Scenario

# a device class's overrides of its profile, which real hardware has of its own
_DEVICE_OVERRIDES = {
    "ram_mb": "RAM",
    "battery_wh": "power supply",
    "memory_bandwidth_gbps": "memory bandwidth",
}
# those an encoder's twin runs play (its pieces take their FLOP time, whatever the memory)
_ENCODER_OVERRIDES = {k: v for k, v in _DEVICE_OVERRIDES.items() if k != "memory_bandwidth_gbps"}
# what only some modes play, by key: the modes that play it, and what a run of another
# mode plays instead (none); the warnings below and compare's sides (comparison.py) read it
PLAYED_ONLY_IN: dict[str, tuple[tuple[str, ...], object]] = {
    "network.loss_pct": (("emu",), 0.0),
    "emulator.faults": (("emu",), []),
    "emulator.host_cpu_cores": (("emu",), []),
    "emulator.task_delay_ms": (("local", "emu"), 0.0),
}


def plays(mode: str, key: str) -> bool:
    """Whether a run of ``mode`` plays the setting ``key`` (every mode plays one that
    ``PLAYED_ONLY_IN`` does not name)."""
    return key not in PLAYED_ONLY_IN or mode in PLAYED_ONLY_IN[key][0]


def unplayed_settings(scenario: Scenario, mode: str) -> list[str]:
    """Warnings for the settings a ``mode`` run does not play: packet loss is dropped packets
    under real TCP, which neither the twin nor loopback has (docs/twin.md); devices that
    come and go and a stream of crowd jobs are the twin's, a real run's devices stay and a
    real crowd run is one job; a real run's RAM, battery and memory bandwidth are its
    machine's, and only a decoder's runs use a memory bandwidth; loopback (``local``) has
    no latency, schedule or medium; only the emulator takes down links, kills workers,
    caps a host's cores and sets a congestion control (the twin's network is fitted per
    profile: it warns of none); a real run's warm-ups (``real_warmups``) are not the twin's
    (``warmup_batches``), nor the other way round, and a real crowd run has none; so an
    emulator run's schedule leaves out the warm-up batches a twin run's counts from."""
    network, warnings = scenario.network, []
    if not plays(mode, "network.loss_pct") and network.loss_pct > 0:
        warnings.append(
            f"network.loss_pct is {exact_text(network.loss_pct)} %, but only {MODE_EMU} drops "
            "packets: "
            f"a {mode} run has no loss"
        )
    emulated = {
        "emulator.faults": bool(scenario.emulator.faults),
        "emulator.host_cpu_cores": bool(scenario.emulator.host_cpu_cores),
    }
    emu_only = f"only {MODE_EMU} plays it: a {mode} run has none"
    warnings += [
        f"{field} is set, but {emu_only}"
        for field, on in emulated.items()
        if on and not plays(mode, field)
    ]
    warmups = scenario.real_warmups
    if warmups != Scenario.model_fields["real_warmups"].default:
        if mode == "twin":
            warnings.append(
                f"real_warmups is {warmups}, but only a local or emu run plays it: a twin run "
                f"plays warmup_batches ({scenario.warmup_batches})"
            )
        elif scenario.crowd is not None:
            warnings.append(f"real_warmups is {warmups}, but a {mode} crowd run has no warm-ups")
    if mode != "twin" and scenario.crowd is None and scenario.warmup_batches > 0:
        warnings.append(
            f"warmup_batches is {scenario.warmup_batches}, but only a twin run plays it: a "
            f"{mode} run plays real_warmups ({warmups})"
        )
        if mode == "emu":
            warnings += _schedule_from_other_starts(scenario)
    decoder = isinstance(scenario.model, DecoderSpec)
    overrides = _DEVICE_OVERRIDES if decoder else _ENCODER_OVERRIDES
    warnings += [
        f"devices.{k}.memory_bandwidth_gbps is set, but only a decoder's runs move bytes "
        "through memory: an encoder's pieces take their FLOP time, in every mode"
        for k, device in enumerate(scenario.devices)
        if device.memory_bandwidth_gbps is not None and not decoder
    ]
    if mode == "twin":
        return warnings
    warnings += [
        f"devices.{k}.{field} is set, but a real run's devices are its machine's: only the "
        f"twin plays it, a {mode} run has the machine's {what}"
        for k, device in enumerate(scenario.devices)
        for field, what in overrides.items()
        if getattr(device, field) is not None
    ]
    stay = f"only the twin plays availability: a {mode} run's devices stay"
    warnings += [f"{field} is set, but {stay}" for field in _availability_fields(scenario)]
    if scenario.crowd is not None and scenario.crowd.job.interarrival is not None:
        one_job = "jobs arriving over crowd.horizon_s play in the twin only"
        warnings.append(f"crowd.job.interarrival is set, but a {mode} run is one job: {one_job}")
    if scenario.crowd is not None and mode == "emu":
        warnings += _steps_after_the_job(scenario.network.schedule)
    if mode == "local":
        shaped = {
            "network.latency_ms": network.latency_ms > 0,
            "network.schedule": bool(network.schedule),
            "network.medium": network.medium == "shared",
        }
        unshaped = f"nothing shapes loopback: only {MODE_EMU} plays it"
        warnings += [f"{field} is set, but {unshaped}" for field, on in shaped.items() if on]
        if network.congestion_control is not None:
            warnings.append(
                f"network.congestion_control is {network.congestion_control}, but only "
                f"{MODE_EMU} sets it: a local run's connections use the machine's"
            )
    return warnings


def _steps_after_the_job(schedule: Sequence[BandwidthStep]) -> list[str]:
    """Bandwidth steps a real crowd job never reaches: its deadline comes first (the twin
    plays them over ``crowd.horizon_s``)."""
    deadline_ms = JOB_TIMEOUT_S * 1e3
    return [
        f"network.schedule.{k}.at_ms is {exact_text(step.at_ms)} ms, but the emulator runs one "
        "crowd "
        f"job, which its {exact_text(JOB_TIMEOUT_S)} s deadline ends: the step never plays"
        for k, step in enumerate(schedule)
        if step.at_ms >= deadline_ms
    ]


def _availability_fields(scenario: Scenario) -> list[str]:
    """The fields that make devices or phones come and go."""
    if scenario.crowd is None:
        classes = [("devices", d.availability) for d in scenario.devices]
        trace = None
    else:
        classes = [("crowd.fleet", c.availability) for c in scenario.crowd.fleet]
        trace = scenario.crowd.availability_trace
    fields = [f"{group}.{k}.availability" for k, (group, a) in enumerate(classes) if a]
    return fields + (["crowd.availability_trace"] if trace is not None else [])


def _schedule_from_other_starts(scenario: Scenario) -> list[str]:
    """The schedule's steps past 0 ms, which a twin run with ``warmup_batches`` counts from
    its first warm-up batch and an emulator run from each timed forward (docs/emulator.md):
    the same step meets the two at other points of their work."""
    later = [step.at_ms / 1e3 for step in scenario.network.schedule if step.at_ms > 0]
    if not later:
        return []
    at = ", ".join(f"{exact_text(at_s)} s" for at_s in later)
    return [
        "network.schedule counts from each run's start: a twin run's first warm-up batch "
        f"(warmup_batches {scenario.warmup_batches}), an emu run's timed forward (its "
        f"real_warmups come before a configuration's first, in no run): its "
        f"{'step' if len(later) == 1 else 'steps'} at {at} meets the two at other points "
        "of their work"
    ]
