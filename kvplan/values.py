"""Frozen, keyword-only, slotted value classes at a fraction of dataclasses' start-up cost.

``@frozen`` gives a class what ``@dataclass(frozen=True, kw_only=True, slots=True)`` gives it: an
``__init__`` taking every field by keyword (defaults, ``field(default=...)`` and
``field(default_factory=...)`` honoured, fields of value base classes first), ``__eq__`` and ``__hash__``
over the fields' tuple (the same hash a dataclass has), a dataclass-style ``__repr__``, ``__slots__``, and
a ``FrozenInstanceError`` (an ``AttributeError``) on assignment; change a value with ``replace``.
Python 3.11's dataclasses compile six generated methods per class at import (about 1 ms a class, some 50
classes before ``kvplan estimate`` prints a line); here ``__eq__``, ``__hash__`` and ``__repr__`` are
shared functions over a per-class field getter, and a class's ``__init__`` reads its field table for
its first instances and is compiled for its fields once the class is in use. ``@frozen(kw_only=False)``
takes fields by position too.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from operator import attrgetter
from typing import Any, ClassVar, TypeVar

T = TypeVar("T")

#: Marks a parameter left to its ``default_factory`` in a generated ``__init__``.
_FACTORY = object()
#: No default given.
MISSING: Any = type("_Missing", (), {"__repr__": lambda _self: "MISSING", "__slots__": ()})()


class FrozenInstanceError(AttributeError):
    """Assigning to (or deleting) a field of a frozen value."""


class Field:
    """A field's default or default factory (what ``field()`` returns, read when the class is built)."""

    __slots__ = ("default", "default_factory")

    def __init__(self, default: Any, default_factory: Callable[[], Any] | Any) -> None:
        self.default = default
        self.default_factory = default_factory


def field(*, default: Any = MISSING, default_factory: Callable[[], Any] | Any = MISSING) -> Any:
    """A field's default, or a factory called for each new value (``dataclasses.field`` for value classes)."""
    if (default is MISSING) == (default_factory is MISSING):
        raise TypeError("field() takes one of default or default_factory")
    return Field(default, default_factory)


def fields(cls_or_value: Any) -> tuple[str, ...]:
    """Field names of a value class (or of a value's class), in ``__init__`` order."""
    cls = cls_or_value if isinstance(cls_or_value, type) else type(cls_or_value)
    try:
        return cls.__value_fields__  # type: ignore[no-any-return]
    except AttributeError:
        raise TypeError(f"{cls.__qualname__} is not a value class") from None


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of ``obj`` with ``changes`` (``dataclasses.replace`` for value classes)."""
    cls = type(obj)
    kwargs = dict(zip(cls.__value_fields__, cls.__value_key__(obj)))  # type: ignore[attr-defined]
    kwargs.update(changes)
    return cls(**kwargs)


def as_dict(obj: Any) -> Any:
    """``obj`` as plain data: values as dicts of their fields, recursively, other leaves deep-copied
    (``dataclasses.asdict``)."""
    fields_of = getattr(type(obj), "__value_fields__", None)
    if fields_of is not None:
        return {name: as_dict(getattr(obj, name)) for name in fields_of}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple takes its items by position
        return type(obj)(*[as_dict(item) for item in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(as_dict(item) for item in obj)
    if isinstance(obj, dict):
        return type(obj)((as_dict(key), as_dict(item)) for key, item in obj.items())
    import copy

    return copy.deepcopy(obj)


_CLASSVAR_TEXT = re.compile(r"(typing\.)?ClassVar(\[|$)")


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):  # ``from __future__ import annotations``: the annotation's text
        return _CLASSVAR_TEXT.match(annotation) is not None
    return getattr(annotation, "__origin__", annotation) is ClassVar


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        key = self.__value_key__
        return key(self) == key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self.__value_key__(self))


def _repr(self: Any) -> str:
    cls = type(self)
    parts = ", ".join(f"{name}={value!r}" for name, value in zip(cls.__value_fields__, cls.__value_key__(self)))
    return f"{cls.__qualname__}({parts})"


def _setattr(self: Any, name: str, _value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _getstate(self: Any) -> tuple[Any, ...]:
    return tuple(self.__value_key__(self))


def _setstate(self: Any, state: tuple[Any, ...]) -> None:
    for name, item in zip(type(self).__value_fields__, state):
        object.__setattr__(self, name, item)


def _compile_init(cls: type) -> Callable[..., None]:
    """The class's ``__init__``: one ``object.__setattr__`` per field, as a dataclass's frozen one does."""
    names: tuple[str, ...] = cls.__value_fields__  # type: ignore[attr-defined]
    defaults: dict[str, Any] = cls.__value_defaults__  # type: ignore[attr-defined]
    scope: dict[str, Any] = {"__set": object.__setattr__, "__factory": _FACTORY}
    params, body = [], []
    for name in names:
        default = defaults.get(name, MISSING)
        if default is MISSING:
            params.append(name)
            body.append(f"    __set(__value_self, {name!r}, {name})")
        elif isinstance(default, Field):  # field(default_factory=...)
            scope[f"__make_{name}"] = default.default_factory
            params.append(f"{name}=__factory")
            body.append(f"    __set(__value_self, {name!r}, __make_{name}() if {name} is __factory else {name})")
        else:
            scope[f"__default_{name}"] = default
            params.append(f"{name}=__default_{name}")
            body.append(f"    __set(__value_self, {name!r}, {name})")
    if hasattr(cls, "__post_init__"):
        body.append("    __value_self.__post_init__()")
    star = ["*"] if cls.__value_kw_only__ and params else []  # type: ignore[attr-defined]
    source = f"def __init__(__value_self, {', '.join([*star, *params])}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, scope)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init  # type: ignore[no-any-return]


#: Instances a class makes through the generic ``__init__`` before its own is compiled: most classes make a
#: handful per command, and a compile (~0.2 ms) costs more than a few hundred generic calls.
_COMPILE_AFTER = 32


def _init_stub(owner: type) -> Callable[..., None]:
    """``owner``'s ``__init__``: the generic one (:func:`_generic_init`) for its first instances, then one
    compiled for its fields and installed (two threads may both compile it; either result is the same)."""
    made = 0

    def __init__(self: Any, /, *args: Any, **kwargs: Any) -> None:
        nonlocal made
        made += 1
        if made <= _COMPILE_AFTER:
            _generic_init(owner, self, args, kwargs)
            return
        init = owner.__dict__["__init__"]
        if init is __init__:
            init = _compile_init(owner)
            type.__setattr__(owner, "__init__", init)
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{owner.__qualname__}.__init__"
    return __init__


def _generic_init(owner: type, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """What the compiled ``__init__`` does, read from the class's field table, with Python's own errors."""
    names: tuple[str, ...] = owner.__value_fields__  # type: ignore[attr-defined]
    where = f"{owner.__qualname__}.__init__()"
    if args:
        if owner.__value_kw_only__ or len(args) > len(names):  # type: ignore[attr-defined]
            most = 1 if owner.__value_kw_only__ else len(names) + 1  # type: ignore[attr-defined]
            least = 1 if owner.__value_kw_only__ else 1 + sum(  # type: ignore[attr-defined]
                name not in owner.__value_defaults__ for name in names)  # type: ignore[attr-defined]
            allowed = f"{most} positional argument{'s' if most > 1 else ''}" if least == most else \
                f"from {least} to {most} positional arguments"
            raise TypeError(f"{where} takes {allowed} but {len(args) + 1} were given")
        for name in names[:len(args)]:
            if name in kwargs:
                raise TypeError(f"{where} got multiple values for argument '{name}'")
        kwargs = {**dict(zip(names, args)), **kwargs}
    for name in kwargs:
        if name not in names:
            raise TypeError(f"{where} got an unexpected keyword argument '{name}'")
    defaults: dict[str, Any] = owner.__value_defaults__  # type: ignore[attr-defined]
    missing = [name for name in names if name not in kwargs and name not in defaults]
    if missing:
        kind = "keyword-only" if owner.__value_kw_only__ else "positional"  # type: ignore[attr-defined]
        listed = (f"'{missing[0]}'" if len(missing) == 1 else
                  " and ".join(f"'{m}'" for m in missing) if len(missing) == 2 else
                  ", ".join(f"'{m}'" for m in missing[:-1]) + f", and '{missing[-1]}'")
        raise TypeError(f"{where} missing {len(missing)} required {kind} argument{'s' if len(missing) > 1 else ''}: "
                        f"{listed}")
    for name in names:
        if name in kwargs:
            item = kwargs[name]
        else:
            item = defaults[name]
            if isinstance(item, Field):
                item = item.default_factory()
        object.__setattr__(obj, name, item)
    if hasattr(owner, "__post_init__"):
        obj.__post_init__()


#: Field defaults that are shared mutable objects (dataclasses refuses them too: use a default_factory).
_MUTABLE = (list, dict, set)


def _build(cls: type, kw_only: bool) -> type:
    names: list[str] = []
    defaults: dict[str, Any] = {}
    for base in reversed(cls.__mro__[1:]):  # each value base's own complete list, the nearest last (wins)
        base_fields = base.__dict__.get("__value_fields__")
        if base_fields is None:
            continue
        if base.__dict__["__value_kw_only__"] != kw_only:
            raise TypeError(f"{cls.__qualname__}: a value class and its value base {base.__qualname__} must both "
                            "take fields by keyword, or both by position")
        base_defaults = base.__dict__["__value_defaults__"]
        for name in base_fields:
            if name not in names:
                names.append(name)
            if name in base_defaults:
                defaults[name] = base_defaults[name]
            else:
                defaults.pop(name, None)
    declared: list[str] = []
    for name, annotation in inspect.get_annotations(cls).items():
        if _is_classvar(annotation):
            continue
        declared.append(name)
        default = cls.__dict__.get(name, MISSING)
        if isinstance(default, Field):
            default = default.default if default.default is not MISSING else default  # a factory: the Field
        if isinstance(default, _MUTABLE):
            raise ValueError(f"{cls.__qualname__}.{name}: mutable default {type(default).__name__}; "
                             "use field(default_factory=...)")
        if default is MISSING:
            defaults.pop(name, None)
        else:
            defaults[name] = default
    own = [name for name in declared if name not in names]
    names += own
    if not kw_only:
        first_default = next((n for n in names if n in defaults), None)
        late = [n for n in names[names.index(first_default):] if n not in defaults] if first_default else []
        if late:
            raise TypeError(f"non-default argument {late[0]!r} follows default argument")
    body = dict(cls.__dict__)
    for name in declared:  # defaults live in __value_defaults__: a class attribute would hide the slot
        body.pop(name, None)
    body.pop("__dict__", None)
    body.pop("__weakref__", None)
    body["__slots__"] = tuple(own)
    body["__value_fields__"] = fields_ = tuple(names)
    body["__value_defaults__"] = defaults
    body["__value_kw_only__"] = kw_only
    if not fields_:
        body["__value_key__"] = staticmethod(lambda _obj: ())
    elif len(fields_) == 1:
        body["__value_key__"] = staticmethod((lambda get: lambda obj: (get(obj),))(attrgetter(fields_[0])))
    else:
        body["__value_key__"] = attrgetter(*fields_)
    body["__match_args__"] = () if kw_only else fields_
    for name, method in (("__repr__", _repr), ("__eq__", _eq)):
        if name not in cls.__dict__:
            body[name] = method
    # NOTE: a class body with its own __eq__ and no __hash__ has __hash__ = None put there by Python; a frozen
    # value is hashable all the same, as a frozen dataclass is.
    if cls.__dict__.get("__hash__", None) is None:
        body["__hash__"] = _hash
    body.update(__setattr__=_setattr, __delattr__=_delattr, __getstate__=_getstate, __setstate__=_setstate)
    new = type(cls)(cls.__name__, cls.__bases__, body)
    new.__qualname__ = cls.__qualname__
    if "__init__" not in cls.__dict__:
        type.__setattr__(new, "__init__", _init_stub(new))
    return new


def frozen(cls: type[T] | None = None, /, *, kw_only: bool = True) -> Any:
    """Make ``cls`` a frozen, slotted value class (keyword-only unless ``kw_only=False``)."""
    if cls is None:
        return lambda klass: _build(klass, kw_only)
    return _build(cls, kw_only)
