"""The pyslurm package itself: imported here or refused with how to build it for the
cluster's Slurm."""

from __future__ import annotations

import importlib
from types import ModuleType

from hpclaunch.errors import BackendUnavailable

__all__ = ["INSTALL_HINT", "load_pyslurm", "pyslurm_release"]

INSTALL_HINT = (
    "build pyslurm for the cluster's Slurm: SLURM_INCLUDE_DIR=<slurm>/include "
    "SLURM_LIB_DIR=<slurm>/lib pip install 'hpclaunch[pyslurm]' 'pyslurm==<major.minor>.*' "
    "(e.g. pyslurm==25.11.* for Slurm 25.11); or use the cli backend (--backend cli)"
)


def load_pyslurm() -> ModuleType:
    """Import pyslurm, or say why it cannot be used.

    Raises:
        BackendUnavailable: Not installed, or its libslurm is not on this machine.
    """
    try:
        pyslurm = importlib.import_module("pyslurm")
    except ImportError as exc:
        if exc.name == "pyslurm":
            raise BackendUnavailable(
                "the pyslurm backend needs the Python package 'pyslurm', which is not installed",
                hint=INSTALL_HINT,
            ) from exc
        # pyslurm is there but its libslurm is not (another Slurm release runs here, or
        # the library directory is not known to the loader: ldconfig or LD_LIBRARY_PATH).
        raise BackendUnavailable(
            f"pyslurm is installed but cannot load Slurm's library: {exc}",
            hint="pyslurm runs only with the libslurm of the release it was built for: "
            "put that release's lib/ on the loader's path, or rebuild pyslurm for the "
            f"cluster's Slurm ({INSTALL_HINT})",
        ) from exc
    return pyslurm


def pyslurm_release(pyslurm: ModuleType) -> str:
    """The Slurm major.minor pyslurm was built for (its version is ``25.11.2``: 25.11)."""
    return ".".join(str(pyslurm.__version__).split(".")[:2])
