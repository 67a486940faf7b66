"""Load a YAML file into a pydantic model, turning every failure into one clear error.

Used by :func:`hpclaunch.spec.load_spec` and :func:`hpclaunch.config.site.load_site`. No raw
``yaml`` or ``pydantic`` exception leaves this module: each becomes the caller's error class
(a :class:`~hpclaunch.errors.ConfigError`) naming the file, the field path (``resources.
gpus_per_node``), what is wrong and a hint. Unknown keys list the valid keys at that level.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml

from hpclaunch.errors import ConfigError

__all__ = ["format_validation_error", "load_model", "read_yaml_mapping"]

M = TypeVar("M", bound=pydantic.BaseModel)

# libyaml's parser when PyYAML was built with it (the wheels are): a 1,000-point sweep spec
# loads several times faster. The constructor and resolver are the same Python classes as
# SafeLoader's, so the data is the same.
_FAST_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml_mapping(path: Path, error_cls: type[ConfigError], what: str) -> dict[str, Any]:
    """Read ``path`` as a YAML mapping.

    Raises:
        ConfigError: ``error_cls`` when the file is missing, unreadable, not YAML or not a
            mapping; the message names the file (and the line for syntax errors).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise error_cls(
            f"{what} file {path} does not exist",
            hint="check the path (relative paths start from the current directory)",
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise error_cls(f"cannot read {what} file {path}: {exc}") from exc
    try:
        data = _load_yaml(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f", line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise error_cls(
            f"{path}{where}: YAML syntax error: {problem}",
            hint="check indentation and quoting; quote values containing ': ' or '#'",
        ) from exc
    except yaml.YAMLError as exc:
        raise error_cls(f"{path}: YAML error: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise error_cls(
            f"{path}: expected a mapping of keys at the top level, got {type(data).__name__}",
            hint=f"a {what} file looks like 'name: ...' lines, one key per line",
        )
    return data


def _load_yaml(text: str) -> Any:
    """``yaml.safe_load`` through libyaml; errors in the pure-Python parser's words.

    libyaml words its errors differently ("did not find expected ',' or ']'" for "expected
    ',' or ']', but got ':'") and drops details such as the escape character or alias name
    (PyYAML 6.0). A failed document is parsed again with ``SafeLoader``, which raises the
    error users know, with its line and column; errors are rare, so speed does not matter.
    """
    try:
        return yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        if _FAST_LOADER is yaml.SafeLoader:
            raise
        # The same error again; where only libyaml refused the text, its data, as before.
        return yaml.load(text, Loader=yaml.SafeLoader)


def load_model(
    model: type[M],
    data: dict[str, Any],
    *,
    source: str,
    error_cls: type[ConfigError],
) -> M:
    """Validate ``data`` as ``model``; on failure raise ``error_cls`` naming ``source``."""
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        message, hint = format_validation_error(exc, model, source)
        raise error_cls(message, hint=hint) from exc


def format_validation_error(
    exc: pydantic.ValidationError, model: type[pydantic.BaseModel], source: str
) -> tuple[str, str | None]:
    """Turn a pydantic ``ValidationError`` into (message, hint) naming every bad field."""
    lines: list[str] = []
    hints: list[str] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            line, hint = _unknown_key(model, loc)
        else:
            line, hint = f"{_path(loc)}: {_what(err)}", None
        lines.append(line)
        if hint:
            hints.append(hint)
    plural = "s" if len(lines) > 1 else ""
    message = f"{source}: {len(lines)} invalid field{plural}\n" + "\n".join(
        f"  - {line}" for line in lines
    )
    return message, "; ".join(dict.fromkeys(hints)) or None


def _path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _what(err: Any) -> str:
    msg = str(err["msg"])
    # pydantic prefixes messages from our own validators with "Value error, ".
    msg = msg.removeprefix("Value error, ")
    if err["type"] == "missing":
        return "required but missing"
    value = err.get("input")
    if err["type"] not in {"value_error", "assertion_error"} and _is_scalar(value):
        msg += f" (got {value!r})"
    return msg


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) and len(repr(value)) <= 60


def _unknown_key(model: type[pydantic.BaseModel], loc: tuple[int | str, ...]) -> tuple[str, str]:
    key, parent = str(loc[-1]), loc[:-1]
    owner = _model_at(model, parent)
    where = _path(parent) if parent else "the top level"
    if owner is None:
        return f"{_path(loc)}: unknown key {key!r}", "remove it"
    valid = list(owner.model_fields)
    close = difflib.get_close_matches(key, valid, n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"{_path(loc)}: unknown key {key!r}{guess}; valid keys at {where}: {', '.join(valid)}",
        f"rename or remove {key!r}" + (f"; perhaps {close[0]!r}" if close else ""),
    )


def _model_at(
    model: type[pydantic.BaseModel], loc: tuple[int | str, ...]
) -> type[pydantic.BaseModel] | None:
    """Follow ``loc`` through nested models (and lists/dicts of them) to the model there."""
    current: Any = model
    for part in loc:
        current = _unwrap_optional(current)
        if isinstance(part, int) or not _is_model(current):
            current = _element_type(current)  # a list index or a dict key
            continue
        field = current.model_fields.get(part)
        if field is None:
            return None
        current = field.annotation
    current = _unwrap_optional(current)
    return current if _is_model(current) else None


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def _unwrap_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _element_type(tp: Any) -> Any:
    """For ``list[X]``, ``tuple[X, ...]`` and ``dict[K, X]`` return ``X``, else ``None``."""
    args = typing.get_args(tp)
    if not args:
        return None
    return args[0] if args[-1] is Ellipsis else args[-1]
