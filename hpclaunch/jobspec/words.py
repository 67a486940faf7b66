"""The words a spec passes to programs: argv words and environment variables.

Every one reaches a program as it is written (the batch script quotes it): what no program
can receive (NUL) and what YAML would silently change (``yes`` read as a boolean, ``1.10``
as a number) is refused here, where the spec is read.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

__all__ = ["ENV_NAME", "ArgvWord", "EnvVars", "argv_word", "no_nul"]

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Env names that belong to Slurm or hpclaunch inside the job; overriding them breaks srun
# or the sidecar, so a spec may not set them.
_RESERVED_ENV_PREFIXES = ("SLURM_", "SBATCH_", "HPCLAUNCH_")


def argv_word(value: Any) -> Any:
    """Accept YAML ints in argv/env (``--epochs, 10``); refuse floats and booleans."""
    if isinstance(value, bool):
        raise ValueError(f"YAML read {value!r} as a boolean; quote it (e.g. 'yes', 'true', 'on')")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        raise ValueError(f"YAML read {value!r} as a number; quote it to keep it exactly as written")
    return value


def no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains a NUL character, which no program can receive")
    return value


ArgvWord = Annotated[str, BeforeValidator(argv_word, json_schema_input_type=str | int)]


def _check_env(value: dict[str, str]) -> dict[str, str]:
    for key, val in value.items():
        if not ENV_NAME.match(key):
            raise ValueError(
                f"{key!r} is not a valid environment variable name "
                "(letters, digits and _, not starting with a digit)"
            )
        if key.upper().startswith(_RESERVED_ENV_PREFIXES):
            raise ValueError(
                f"{key!r}: SLURM_*, SBATCH_* and HPCLAUNCH_* are set by "
                "Slurm and hpclaunch inside the job"
            )
        no_nul(val)
    return value


#: Environment variables a spec sets: valid names, not Slurm's or hpclaunch's, no NUL.
EnvVars = Annotated[dict[str, ArgvWord], AfterValidator(_check_env)]
