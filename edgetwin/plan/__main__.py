"""``python -m edgetwin.plan QUESTION.yaml --out DIR``: the ``edgetwin plan`` command."""

from __future__ import annotations

import argparse
import sys

from edgetwin.errors import InputError
from edgetwin.plan.command import add_plan_arguments, plan_command


def main() -> int:
    parser = argparse.ArgumentParser(prog="edgetwin plan", description=__doc__)
    add_plan_arguments(parser)
    try:
        return plan_command(parser.parse_args())
    except InputError as exc:
        print(f"edgetwin: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(
            "edgetwin: interrupted; finished configurations are kept for a rerun", file=sys.stderr
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
