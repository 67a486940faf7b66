"""The validated-site cache: a site config as :func:`hpclaunch.config.site.load_site`
returned it, pickled in ``<cache dir>/sites/<key>.pickle``, so that a command reading a
site it read before skips the YAML parse and the pydantic validation (the models' schemas
are built at their first validation: about 40 ms of each ``status`` and ``render``,
bench/RESULTS.md).

The key is the file's bytes and the code that validated them (the site models' modules,
pydantic's and Python's versions): an edit of either makes a new entry, so a cached object
is never one of an older class. The file is the user's own (mode 0600, in their
private cache directory), like the capability cache beside it; an entry that does not load
is ignored and written again.
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import sys
from collections.abc import Mapping
from pathlib import Path

import pydantic

from hpclaunch.config.paths import user_dir
from hpclaunch.config.site import SiteConfig, load_site, resolve_site_path
from hpclaunch.store.files import write_private

__all__ = ["load_site_cached"]

#: The modules whose code decides what a site file validates into.
_MODEL_MODULES = (
    "hpclaunch.config.site",
    "hpclaunch.jobspec.container",
    "hpclaunch.jobspec.tiers",
    "hpclaunch.slurm.times",
)


def load_site_cached(name_or_path: str | Path, env: Mapping[str, str] | None = None) -> SiteConfig:
    """:func:`~hpclaunch.config.site.load_site`, from the cache when this very file was
    validated before by this very code.

    Raises:
        ConfigError: As ``load_site`` (an unknown site, a file that is not a valid site).
    """
    path = resolve_site_path(name_or_path)
    try:
        text = path.read_bytes()
    except OSError:
        return load_site(path)  # its error names the file and what is wrong
    entry = user_dir("cache", env) / "sites" / f"{_key(text)}.pickle"
    with contextlib.suppress(Exception):  # missing, unreadable or from elsewhere: validate
        cached = pickle.loads(entry.read_bytes())  # the user's own private file
        if isinstance(cached, SiteConfig):
            return cached
    site = load_site(path)
    with contextlib.suppress(OSError):
        # Kept only when the file did not change while it was validated.
        if path.read_bytes() == text:
            write_private(entry, pickle.dumps(site, protocol=pickle.HIGHEST_PROTOCOL))
    return site


def _key(text: bytes) -> str:
    digest = hashlib.sha256(text)
    digest.update(f"{sys.version_info[:2]} {pydantic.VERSION}".encode())
    for name in _MODEL_MODULES:
        source = getattr(sys.modules.get(name), "__file__", None)
        digest.update(Path(source).read_bytes() if source else name.encode())
    return digest.hexdigest()[:32]
