"""A scenario's strategies: a registered name and the parameters its definition takes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from edgetwin.models import registry
from edgetwin.schema import PositiveInt, Strict


class StrategySpec(Strict):
    """A registered strategy and the parameters its definition takes (prism: ``cr`` or
    ``segments``; lists sweep). ``layers``: layers per device of a strategy that splits
    them (pipeline; empty: balanced on the devices' speed and RAM, in the twin and the real
    runs alike)."""

    name: str
    # CR = N / (L P) is at least 1: a partition of N / P rows has at most that many segments
    cr: tuple[Annotated[float, Field(ge=1)], ...] = ()
    segments: tuple[PositiveInt, ...] = ()
    layers: tuple[PositiveInt, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _listify(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key in ("cr", "segments"):
                if isinstance(data.get(key), int | float):
                    data[key] = [data[key]]
        return data

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        registry.strategy(name)
        return name

    @model_validator(mode="after")
    def _check_params(self) -> StrategySpec:
        given = [key for key in ("cr", "segments") if getattr(self, key)]
        takes = registry.strategy(self.name).params
        if takes:
            if len(given) != 1 or given[0] not in takes:
                raise ValueError(f"{self.name} needs exactly one of {_quoted(takes)}")
        elif given:
            raise ValueError(f"{self.name} takes no 'cr' or 'segments'")
        if self.layers and not registry.strategy(self.name).splits_layers:
            raise ValueError(f"{self.name} takes no 'layers' (it does not split layers)")
        return self


def _quoted(keys: Sequence[str]) -> str:
    return " or ".join(f"'{key}'" for key in keys)
