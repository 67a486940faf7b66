"""A job spec's ``container:``: the image the command runs in, and with which runtime.

::

    container:
      image: /shared/images/torch.sif     # a file or directory, or docker://..., an enroot ref
      runtime: auto                       # the site's default; or apptainer, singularity,
                                          # pyxis, charliecloud, oci
      mounts: [/data, "/scratch/me:/scratch:ro"]   # SRC[:DST[:ro]]
      workdir: /workspace                 # inside; default: the job's working directory
      env: {HF_HOME: /data/hf}            # inside only, over the image's own values
      gpus: true                          # apptainer/singularity --nv

The sidecar stays outside (the node's python); the command (and its launcher) runs inside.
The job directory, its control and checkpoint directories are mounted at the same paths, so
:mod:`hpclaunch.runtime` works inside. The spec's ``env`` reaches the command inside too.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from hpclaunch.jobspec.words import EnvVars

__all__ = ["RUNTIMES", "Container", "Mount", "Mounts", "RuntimeName", "parse_mount"]

RuntimeName = Literal["apptainer", "singularity", "pyxis", "charliecloud", "oci"]
RUNTIMES: tuple[RuntimeName, ...] = ("apptainer", "singularity", "pyxis", "charliecloud", "oci")

#: One mount: host path, container path, read-only.
Mount = tuple[str, str, bool]

# Paths in a mount may not hold the characters the runtimes use as separators (``:`` in
# every SRC:DST form, ``,`` in pyxis' list) or NUL.
_MOUNT_PATH = re.compile(r"^(/|~/|~$)[^:,\x00]*$")


def parse_mount(text: str) -> Mount:
    """``SRC``, ``SRC:DST`` or ``SRC:DST:ro`` → (SRC, DST, read-only).

    Raises:
        ValueError: Not of that form, or a path is not absolute (``~`` allowed on the host
            side), or holds ``:`` or ``,``.
    """
    parts = text.split(":")
    if len(parts) > 3 or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        raise ValueError(f"{text!r}: a mount is SRC, SRC:DST or SRC:DST:ro")
    src = parts[0]
    dst = parts[1] if len(parts) > 1 else src
    for path, side in ((src, "host"), (dst, "container")):
        if not _MOUNT_PATH.match(path) or (side == "container" and path.startswith("~")):
            raise ValueError(
                f"{text!r}: the {side} path must be absolute"
                + (" (or start with ~/)" if side == "host" else "")
                + " and hold no ':' or ','"
            )
    return src, dst, len(parts) == 3 and parts[2] == "ro"


def _check_mounts(value: tuple[str, ...]) -> tuple[str, ...]:
    for mount in value:
        parse_mount(mount)
    return value


#: Bind mounts as written (``SRC[:DST[:ro]]``), each checked by :func:`parse_mount`.
Mounts = Annotated[tuple[str, ...], AfterValidator(_check_mounts)]


class Container(BaseModel):
    """The container a job's command runs in.

    Attributes:
        image: The image: a path on the cluster (``.sif``, SquashFS, a Charliecloud
            directory, an OCI bundle; relative to the site's ``containers.image_dir``) or a
            reference (``docker://...`` for Apptainer, an enroot URI for pyxis).
        runtime: ``auto`` (the site's default) or one of the site's runtimes.
        mounts: Extra bind mounts, ``SRC[:DST[:ro]]``.
        workdir: Where the command starts inside (default: the job's working directory,
            mounted at the same path).
        env: Variables set inside the container, over the image's own (Apptainer's
            ``APPTAINERENV_*``, ``ch-run --set-env``, pyxis ``--container-env``; with Slurm's
            OCI support the step's environment is the container's).
        gpus: Make the node's GPUs visible inside (Apptainer/Singularity ``--nv``; the other
            runtimes expose the job's GPUs as the site configures them).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    image: str = Field(min_length=1, description="Image path or reference.")
    runtime: Literal["auto", "apptainer", "singularity", "pyxis", "charliecloud", "oci"] = Field(
        "auto", description="Container runtime; auto: the site's default."
    )
    mounts: Mounts = Field((), description="Bind mounts, SRC[:DST[:ro]].")
    workdir: str | None = Field(
        None, pattern=r"^/[^\x00]*$", description="Working directory inside the container."
    )
    env: EnvVars = Field(
        default_factory=dict, description="Variables set inside the container, over the image's."
    )
    gpus: bool = Field(True, description="Expose the job's GPUs inside.")

    @field_validator("image")
    @classmethod
    def _printable(cls, value: str) -> str:
        if "\x00" in value or "\n" in value:
            raise ValueError("contains a NUL or newline character")
        return value
