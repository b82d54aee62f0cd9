"""User-facing errors: bad input is reported as one clear message, exit 2."""

from __future__ import annotations

from pathlib import Path


class RunFailed(RuntimeError):
    """A run that started but could not finish (a process died, a deadline passed): exit 1."""

    exit_code = 1


class LaunchError(RunFailed):
    """A process of a run (a rank, the foreman, a worker) did not start or stopped early;
    the others have been stopped and the message shows the end of its log."""


class InputError(Exception):
    """Bad user input: names the file and the field, and says what is wrong."""

    exit_code = 2

    def __init__(self, path: Path | str | None, field: str | None, problem: str) -> None:
        self.path = None if path is None else str(path)
        self.field = field
        self.problem = problem
        super().__init__(self.message)

    def __reduce__(self) -> tuple[type[InputError], tuple[str | None, str | None, str]]:
        """Pickles with its fields, so that it crosses from a pool or Dask worker intact."""
        return (type(self), (self.path, self.field, self.problem))

    @property
    def message(self) -> str:
        where = self.path or "<input>"
        if self.field:
            where += f": field '{self.field}'"
        return f"{where}: {self.problem}"
