"""The API's types for a type checker: ``edgetwin/__init__.py`` imports the API on first use
(by name, which a type checker cannot follow)."""

from edgetwin.workbench import *  # noqa: F403
from edgetwin.workbench import __all__ as __all__

__version__: str  # what ``edgetwin --version`` says
