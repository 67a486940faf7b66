"""What travels between the submitter and a function's job, in ``<job dir>/call/``.

``call.pkl`` (written at submit, mode 0600): a plain pickle of ``{"fingerprint": ...,
"call": bytes}``. The fingerprint (Python's major.minor, and the versions of the packages
the call imports when unpickled, hpclaunch's and cloudpickle's) is read *before* the call
itself, whose cloudpickle may import the user's modules: a job in another environment fails
with :class:`~hpclaunch.errors.EnvironmentMismatch` naming the packages, not with an
unpickling traceback. Only what the call needs is compared: a laptop's Jupyter, missing on
the cluster, is no reason to refuse a function that never imports it. cloudpickle sends
functions of ``__main__`` (a script, a notebook) and lambdas by value, and functions of
importable modules by reference.

``result.pkl`` (written by the job, atomically, once the function returned or raised): two
pickles one after the other, a plain one of ``{"format": 2, "ok": bool, "type": str,
"text": str, "traceback": str}``, then the value (cloudpickled straight into the file) or
the exception's state as bytes (empty when it could not be pickled: then
:class:`~hpclaunch.errors.RemoteError` carries its text). The value is streamed both ways,
never held twice: a result costs its own size in memory at either end, as a plain
``pickle.load`` does (the format before, one pickle holding the value's pickle as bytes,
cost twice that; it is still read).
"""

from __future__ import annotations

import dis
import functools
import io
import pickle
import pickletools
import platform
import sys
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import cloudpickle

from hpclaunch.errors import CallError, EnvironmentMismatch, RemoteError

__all__ = [
    "ALWAYS",
    "MAX_CALL_BYTES",
    "Outcome",
    "body_imports",
    "differences",
    "dump_call",
    "dump_error",
    "dump_map",
    "dump_value",
    "fingerprint",
    "imported_modules",
    "load_call",
    "load_outcome",
    "needed_distributions",
    "read_outcome_from",
    "star_call",
    "write_value",
]

#: A larger pickle (data captured by the function, a big argument) is refused at submit.
MAX_CALL_BYTES = 64 * 2**20


#: Always compared: the job's side of the call (hpclaunch) and the pickle's format.
ALWAYS = ("hpclaunch", "cloudpickle")
#: Strings a pickle pushes (the module and name of a global are two of them).
_STRINGS = frozenset(
    {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING"}
)


def fingerprint(distributions: Iterable[str] = ALWAYS) -> dict[str, Any]:
    """This interpreter's Python (implementation, major.minor) and the versions of
    ``distributions`` installed here (those missing are left out)."""
    from importlib import metadata  # noqa: PLC0415 (importlib.metadata)

    packages: dict[str, str] = {}
    for name in distributions:
        try:
            packages[_normalized(name)] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    python = f"{sys.implementation.name} {platform.python_version_tuple()[0]}"
    return {"python": f"{python}.{platform.python_version_tuple()[1]}", "packages": packages}


def needed_distributions(call: bytes, also: Iterable[str] = ()) -> list[str]:
    """The installed distributions that provide the modules the pickle ``call`` imports
    when loaded (:func:`imported_modules`) and the modules ``also`` (those the function's
    body imports: :func:`body_imports`), with :data:`ALWAYS`; sorted."""
    from hpclaunch.store.module_owners import module_owners  # noqa: PLC0415 (importlib.metadata)

    provided = module_owners()
    names = set(ALWAYS)
    for module in imported_modules(call) | set(also):
        names.update(provided.get(module, ()))
    return sorted({_normalized(n) for n in names})


def imported_modules(data: bytes) -> set[str]:
    """The top-level modules loading the pickle ``data`` imports, read from its opcodes
    without loading it: each global's module (``GLOBAL``; ``STACK_GLOBAL`` takes the two
    strings pushed just before it, written anew or fetched from the memo), and the name
    given to cloudpickle's ``subimport``, which is how a by-value function's module-level
    ``import numpy as np`` travels. The standard library and ``__main__`` are left out."""

    memo: dict[int, str | None] = {}
    strings: deque[str] = deque(maxlen=2)  # a STACK_GLOBAL's module and name
    pushed: str | None = None  # the string the last opcode pushed, if it pushed one
    found: set[str] = set()
    subimport = False
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
            memo[len(memo) if name == "MEMOIZE" else int(str(arg))] = pushed
            continue
        pushed = None
        if name in _STRINGS or name in ("GET", "BINGET", "LONG_BINGET"):
            pushed = str(arg) if name in _STRINGS else memo.get(int(str(arg)))
        if pushed is not None:
            strings.append(pushed)
            if subimport:
                found.add(pushed)
                subimport = False
        elif name == "GLOBAL":
            module, _, qualname = str(arg).partition(" ")
            found.add(module)
            subimport = qualname == "subimport"
        elif name == "STACK_GLOBAL" and len(strings) == 2:
            found.add(strings[0])
            subimport = strings[1] == "subimport"
        elif name == "REDUCE":
            subimport = False
    tops = {m.partition(".")[0] for m in found}
    return {m for m in tops if m and m != "__main__" and m not in sys.stdlib_module_names}


def _normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``Foo_Bar`` is ``foo-bar``)."""
    return "-".join(name.replace("_", "-").replace(".", "-").lower().split("-"))


def differences(submitted: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """What the job's environment (``here``) lacks or has in another version, against the
    submitter's. Packages only the job has are no obstacle and are not listed."""
    found: list[str] = []
    if submitted.get("python") != here.get("python"):
        found.append(f"python: {submitted.get('python')} at submit, {here.get('python')} here")
    theirs: Mapping[str, str] = submitted.get("packages", {})
    ours: Mapping[str, str] = here.get("packages", {})
    for name in sorted(theirs):
        if name not in ours:
            found.append(f"{name}: {theirs[name]} at submit, not installed here")
        elif ours[name] != theirs[name]:
            found.append(f"{name}: {theirs[name]} at submit, {ours[name]} here")
    return found


def dump_call(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> bytes:
    """The bytes of ``call.pkl`` for ``fn(*args, **kwargs)``.

    Raises:
        CallError: The call cannot be pickled, or its pickle exceeds :data:`MAX_CALL_BYTES`.
    """
    call = _pickled((fn, tuple(args), dict(kwargs)))
    return _envelope(call, mapped=False, fn=fn)


def star_call(fn: Callable[..., Any], item: Sequence[Any]) -> Any:
    """``fn(*item)``: a map over several iterables calls ``partial(star_call, fn)`` on each
    zipped tuple (importable here, so the partial pickles by reference)."""
    return fn(*item)


def dump_map(fn: Callable[..., Any], items: Sequence[Any]) -> bytes:
    """The bytes of ``call.pkl`` for ``fn(item)`` of each of ``items`` (``session.map``):
    one file for the whole array, each task calls ``fn`` on its own item.

    Raises:
        CallError: As :func:`dump_call`.
    """
    return _envelope(_pickled((fn, list(items))), mapped=True, fn=fn)


def _pickled(call: object) -> bytes:
    try:
        data: bytes = cloudpickle.dumps(call)
    except Exception as exc:  # cloudpickle raises whatever the object's reducer raises
        raise CallError(
            f"the function or its arguments cannot be pickled: {type(exc).__name__}: {exc}",
            hint="pass what the job needs as plain data or paths, not open files, locks, "
            "connections or generators",
        ) from exc
    if len(data) > MAX_CALL_BYTES:
        raise CallError(
            f"the pickled function and arguments take {len(data) / 2**20:.0f} MiB, more than "
            f"{MAX_CALL_BYTES // 2**20} MiB",
            hint="write the data to a file the nodes can read and pass its path instead "
            "(a large array or a model captured by the function counts too)",
        )
    return data


def _envelope(call: bytes, *, mapped: bool, fn: Callable[..., Any]) -> bytes:
    needs = fingerprint(needed_distributions(call, body_imports(fn)))
    return pickle.dumps({"fingerprint": needs, "call": call, "map": mapped})


def body_imports(fn: Callable[..., Any], most: int = 64) -> set[str]:
    """The top-level modules ``fn``'s own code imports when it runs (``def f(): import
    numpy``, in nested functions too), which its pickle does not show: a function of an
    importable module travels by reference, and a by-value one carries only its code. Read
    from the bytecode's IMPORT_NAME (of at most ``most`` code objects); a partial's or a
    method's function is followed."""

    while isinstance(fn, functools.partial):
        fn = star_target(fn)
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    found: set[str] = set()
    stack = [code] if code is not None else []
    while stack:
        current = stack.pop()
        for instruction in dis.get_instructions(current):
            if instruction.opname == "IMPORT_NAME" and isinstance(instruction.argval, str):
                found.add(instruction.argval.partition(".")[0])
        most -= 1
        if most > 0:
            stack += [c for c in current.co_consts if hasattr(c, "co_code")]
    return {m for m in found if m and m not in sys.stdlib_module_names}


def star_target(fn: functools.partial[Any]) -> Callable[..., Any]:
    """The function a partial calls: ``partial(star_call, f)``'s ``f``, else its ``func``."""
    return fn.args[0] if fn.func is star_call and fn.args else fn.func


def load_call(
    data: bytes, *, where: str, item: int | None = None
) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
    """The call of ``call.pkl``'s bytes, once this environment is the submitter's; for a
    map's file (:func:`dump_map`), the call on item ``item``.

    Raises:
        EnvironmentMismatch: It is not (``where``: this host, for the message).
        CallError: A map's file without an item, or an item it does not have.
    """

    envelope = pickle.loads(data)  # our own file, in the private job directory
    submitted = envelope["fingerprint"]
    found = differences(submitted, fingerprint(submitted.get("packages", {})))
    if found:
        raise EnvironmentMismatch(found, where)
    if not envelope.get("map"):
        fn, args, kwargs = cloudpickle.loads(envelope["call"])
        return fn, tuple(args), dict(kwargs)
    fn, items = cloudpickle.loads(envelope["call"])
    if item is None or not 0 <= item < len(items):
        raise CallError(f"item {item} of a map over {len(items)} items")
    return fn, (items[item],), {}


def write_value(out: IO[bytes], value: Any) -> None:
    """Write ``result.pkl`` for a returned value to ``out``, the value cloudpickled
    straight into it (no second copy of its pickle in memory).

    Raises:
        CallError: The value cannot be pickled (``out`` then holds part of it: discard it).
    """

    pickle.dump({"format": 2, "ok": True, "type": "", "text": "", "traceback": ""}, out)
    try:
        cloudpickle.dump(value, out)
    except Exception as exc:
        raise CallError(
            f"the function returned a {type(value).__qualname__} that cannot be pickled: {exc}",
            hint="return plain data (numbers, lists, dicts, arrays) or write it to a file and "
            "return the path",
        ) from exc


def dump_value(value: Any) -> bytes:
    """``result.pkl``'s bytes for a returned value (:func:`write_value`).

    Raises:
        CallError: The value cannot be pickled.
    """

    out = io.BytesIO()
    write_value(out, value)
    return out.getvalue()


#: How deep a cause/context chain travels (a longer one is cut there).
_CHAIN_DEPTH = 8


def dump_error(exc: BaseException, traceback_text: str) -> bytes:
    """``result.pkl`` for a raised exception: its class, ``args``, attributes, notes and
    cause/context chain (:func:`_exception_state`), rebuilt at the submitter's without
    calling its ``__init__`` when that takes other arguments than ``args``; its text alone
    when even that cannot be pickled."""

    try:
        payload = cloudpickle.dumps(_exception_state(exc, _CHAIN_DEPTH))
        _rebuild(cloudpickle.loads(payload))  # what would fail only at the submitter's
    except Exception:
        payload = b""
    kind = type(exc)
    header = {
        "format": 2,
        "ok": False,
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "text": str(exc),
        "traceback": traceback_text,
    }
    return pickle.dumps(header) + pickle.dumps(payload)


def _exception_state(exc: BaseException, depth: int) -> dict[str, Any]:
    """What rebuilds ``exc``: pickle's own ``BaseException.__reduce__`` keeps ``args`` and
    ``__dict__`` but drops ``__cause__``, ``__context__`` and ``__notes__``, and calls
    ``__init__(*args)``, which fails for ``def __init__(self, code, detail)`` that passes
    one message on."""

    attributes = {}
    for name, value in vars(exc).items():
        try:
            cloudpickle.dumps(value)
        except Exception:
            continue  # an open file, a lock: the rest still travels
        attributes[name] = value
    state: dict[str, Any] = {
        "cls": type(exc),
        "args": exc.args,
        "dict": attributes,
        "notes": list(getattr(exc, "__notes__", [])),
        "suppress_context": exc.__suppress_context__,
        "cause": None,
        "context": None,
    }
    if depth > 0:
        for link in ("cause", "context"):
            inner = getattr(exc, f"__{link}__")
            if inner is not None:
                state[link] = _exception_state(inner, depth - 1)
    return state


def _rebuild(state: dict[str, Any]) -> BaseException:
    """The exception of :func:`_exception_state`: ``cls(*args)`` where that works (it sets
    what ``__init__`` derives, as ``OSError.errno``), else ``cls.__new__`` with ``args``."""
    cls = state["cls"]
    try:
        exc = cls(*state["args"])
    except Exception:
        exc = cls.__new__(cls, *state["args"])
        exc.args = state["args"]
    if not isinstance(exc, BaseException):
        raise TypeError(f"{cls!r} is not an exception class")
    vars(exc).update(state["dict"])
    if state["notes"]:
        vars(exc)["__notes__"] = list(state["notes"])  # add_note's attribute (3.11+)
    for link in ("cause", "context"):
        if state[link] is not None:
            setattr(exc, f"__{link}__", _rebuild(state[link]))
    exc.__suppress_context__ = state["suppress_context"]
    return exc


@dataclass(frozen=True)
class Outcome:
    """What ``result.pkl`` says: a value, or an exception to raise (:meth:`get`).

    ``payload``: the exception's state (or, in the older format, the value) pickled;
    ``value``: the value, read from the file (``has_value``), or ``value_error``: why it
    could not be read here (a module missing), raised by :meth:`get`.
    """

    ok: bool
    type_name: str
    text: str
    remote_traceback: str
    payload: bytes
    value: Any = None
    has_value: bool = False
    value_error: Exception | None = None

    def get(self, job_id: str) -> Any:
        """The value; or raise the function's exception (the traceback from the job added
        as a note), or :class:`RemoteError` when it cannot be brought back here.

        Raises:
            CallError: The value cannot be unpickled here.
        """

        if self.ok:
            if self.has_value:
                return self.value
            try:
                if self.value_error is not None:
                    raise self.value_error
                return cloudpickle.loads(self.payload)  # the older format
            except Exception as exc:
                raise CallError(
                    f"job {job_id}'s result cannot be unpickled here: {type(exc).__name__}: {exc}",
                    hint="read it where the function's modules are importable",
                ) from exc
        error: BaseException | None = None
        if self.payload:
            try:
                loaded = cloudpickle.loads(self.payload)
                # An exception itself: a result.pkl of before the state was sent.
                error = loaded if isinstance(loaded, BaseException) else _rebuild(loaded)
            except Exception:
                error = None
        if error is None:
            error = RemoteError(self.type_name, self.text, self.remote_traceback)
        add_note = getattr(error, "add_note", None)  # Python 3.11+
        if add_note is not None:
            add_note(f"Traceback in job {job_id}:\n{self.remote_traceback.rstrip()}")
        raise error


def read_outcome_from(source: IO[bytes]) -> Outcome:
    """The :class:`Outcome` of ``result.pkl``, read from ``source`` (its value unpickled
    straight from it).

    Raises:
        EOFError, pickle.UnpicklingError: The file is cut short or damaged.
    """

    raw = pickle.load(source)  # the job wrote it, into its private directory
    head = (raw["ok"], raw["type"], raw["text"], raw["traceback"])
    if raw.get("format") != 2:  # the older format: one pickle, the value's inside
        return Outcome(*head, raw["payload"])
    if not raw["ok"]:
        return Outcome(*head, pickle.load(source))
    try:
        value = cloudpickle.load(source)
    except (EOFError, pickle.UnpicklingError):
        raise
    except Exception as exc:  # a module the value needs is missing here: said at get()
        return Outcome(*head, b"", value_error=exc)
    return Outcome(*head, b"", value=value, has_value=True)


def load_outcome(data: bytes) -> Outcome:
    """The :class:`Outcome` of ``result.pkl``'s bytes."""

    return read_outcome_from(io.BytesIO(data))
