"""Load a YAML file into a pydantic model, turning every failure into one clear error.

Used by :func:`hpclaunch.jobspec.job.load_spec` and :func:`hpclaunch.config.site.load_site`. No raw
``yaml`` or ``pydantic`` exception leaves this module: each becomes the caller's error class
(a :class:`~hpclaunch.errors.ConfigError`) naming the file, the field path (``resources.
gpus_per_node``), what is wrong and a hint. Unknown keys list the valid keys at that level.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml

from hpclaunch.errors import ConfigError

__all__ = ["format_validation_error", "load_model", "load_yaml", "read_yaml_mapping"]

M = TypeVar("M", bound=pydantic.BaseModel)

# libyaml's parser when PyYAML was built with it (the wheels are): a 1,000-point sweep spec
# loads several times faster. The constructor and resolver are the same Python classes as
# SafeLoader's, so the data is the same.
_FAST_BASE: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"

# YAML 1.1's int and float resolvers (PyYAML's resolver.py) without their base-60 forms:
# PyYAML reads an unquoted ``time: 30:00`` as the integer 1800 and ``1:30:00`` as 5400,
# where the user (and sbatch's ``--time``) mean 30 minutes and 1.5 hours. Every Slurm
# time in our files is read as the text written; YAML 1.2 dropped base 60 too.
_INT_NO_BASE60 = re.compile(
    r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+)$""",
    re.X,
)
_FLOAT_NO_BASE60 = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


def _resolvers_without_base60(
    resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]],
) -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    new = {_INT: _INT_NO_BASE60, _FLOAT: _FLOAT_NO_BASE60}
    return {
        first: [(tag, new.get(tag, regexp)) for tag, regexp in entries]
        for first, entries in resolvers.items()
    }


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping names one key twice; PyYAML would silently keep the last value."""


def _construct_mapping_once(
    loader: yaml.constructor.SafeConstructor, node: yaml.MappingNode, deep: bool = False
) -> dict[Any, Any]:
    """SafeConstructor's mapping, refusing a key given twice (with both lines)."""
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: SafeConstructor reports it
            continue
        if first is not None:
            raise DuplicateKeyError(
                f"while reading the mapping at line {node.start_mark.line + 1}",
                node.start_mark,
                f"key {key!r} is given twice, on line {first.start_mark.line + 1} and on "
                f"line {key_node.start_mark.line + 1} (YAML would keep only the last)",
                key_node.start_mark,
            )
        seen[key] = key_node
    return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep=deep)


def _strict(base: type[yaml.SafeLoader]) -> type[yaml.SafeLoader]:
    """``base`` without base-60 numbers and with duplicate keys refused."""
    return type(
        f"Strict{base.__name__}",
        (base,),
        {
            "yaml_implicit_resolvers": _resolvers_without_base60(base.yaml_implicit_resolvers),
            "construct_mapping": _construct_mapping_once,
        },
    )


_FAST_LOADER = _strict(_FAST_BASE)
_SLOW_LOADER = _strict(yaml.SafeLoader)


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
        data = load_yaml(text)
    except DuplicateKeyError as exc:
        raise error_cls(
            f"{path}: {exc.problem}",
            hint="keep one of the two (merge their contents under one key)",
        ) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f", line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        hint = "check indentation and quoting; quote values containing ': ' or '#'"
        if "'\\t'" in problem:
            hint = "use spaces, not tabs, to indent YAML"
        raise error_cls(f"{path}{where}: YAML syntax error: {problem}", hint=hint) from exc
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


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` through libyaml, without base-60 numbers and refusing duplicate
    keys (:class:`DuplicateKeyError`); errors in the pure-Python parser's words.

    libyaml words its errors differently ("did not find expected ',' or ']'" for "expected
    ',' or ']', but got ':'") and drops details such as the escape character or alias name
    (PyYAML 6.0). A failed document is parsed again with ``SafeLoader``, which raises the
    error users know, with its line and column; errors are rare, so speed does not matter.
    """
    try:
        return yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        if _FAST_BASE is yaml.SafeLoader:
            raise
        # The same error again; where only libyaml refused the text, its data, as before.
        return yaml.load(text, Loader=_SLOW_LOADER)


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
        # The message names every field: pydantic's own report under it would be noise.
        raise error_cls(message, hint=hint) from None


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
    # Every error gets a way on: a value out of range or not among the choices says what
    # it takes above; where to read all of them is the hint.
    general = "fix the values above; 'hpclaunch schema' lists every field and what it takes"
    return message, "; ".join(dict.fromkeys(hints)) or general


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
    home = _nested_owner(owner, key)
    if home is not None:
        under = f"{_path(parent)}.{home}" if parent else home
        return (
            f"{_path(loc)}: {key!r} belongs under {under}:, not at {where}",
            f"move it: {under}: {{{key}: ...}}",
        )
    # "gpus" is far from "gpus_per_node" by edit distance, but a user writing it meant it.
    close = (
        difflib.get_close_matches(key, valid, n=1)
        or [v for v in valid if len(key) >= 3 and (v.startswith(key) or key.startswith(v))][:1]
    )
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"{_path(loc)}: unknown key {key!r}{guess}; valid keys at {where}: {', '.join(valid)}",
        f"rename or remove {key!r}" + (f"; perhaps {close[0]!r}" if close else ""),
    )


def _nested_owner(owner: type[pydantic.BaseModel], key: str) -> str | None:
    """The field of ``owner`` whose model has a field ``key`` (``resources`` for a
    top-level ``gpus_per_node``), or ``None``."""
    for name, field in owner.model_fields.items():
        inner = _unwrap_optional(field.annotation)
        if _is_model(inner) and key in inner.model_fields:
            return name
    return None


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
