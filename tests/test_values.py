"""kvplan.values.frozen against what ``@dataclass(frozen=True, kw_only=True, slots=True)`` gives the same class:
the same fields, equality, hash values, repr, errors; replace, fields and as_dict."""

from __future__ import annotations

import dataclasses
import pickle
from typing import ClassVar

import pytest

from kvplan.values import FrozenInstanceError, as_dict, field, fields, frozen, replace


def _pair(body: dict[str, object], annotations: dict[str, str], base: tuple[type, type] | None = None,
          ) -> tuple[type, type]:
    """The same class body made once by kvplan.values and once by dataclasses (``FACTORY`` in ``body``: a
    ``field(default_factory=dict)`` of each)."""
    ours = frozen(type("Spec", (base[0],) if base else (), {
        "__annotations__": annotations, **{k: field(default_factory=dict) if v is FACTORY else v for k, v in body.items()}}))
    theirs = dataclasses.dataclass(frozen=True, kw_only=True, slots=True)(type("Spec", (base[1],) if base else (), {
        "__annotations__": annotations,
        **{k: dataclasses.field(default_factory=dict) if v is FACTORY else v for k, v in body.items()}}))
    return ours, theirs


ANNOTATIONS = {"kind": "ClassVar[str]", "heads": "int", "head_dim": "int", "window": "int | None", "notes": "tuple[str, ...]",
               "extra": "dict[str, int]"}
FACTORY = object()
BODY = {"kind": "full", "window": None, "notes": (), "extra": FACTORY}


def test_fields_defaults_and_factories_match_dataclasses() -> None:
    ours, theirs = _pair(BODY, ANNOTATIONS)
    assert fields(ours) == tuple(f.name for f in dataclasses.fields(theirs)) == ("heads", "head_dim", "window", "notes",
                                                                                 "extra")
    a, b = ours(heads=8, head_dim=128), theirs(heads=8, head_dim=128)
    assert (a.window, a.notes, a.extra) == (b.window, b.notes, b.extra) == (None, (), {})
    assert a.extra is not ours(heads=8, head_dim=128).extra  # a fresh dict per instance, as default_factory gives
    assert ours.kind == "full" and not hasattr(a, "__dict__")  # the ClassVar stays on the class; slots, no __dict__
    assert ours.__slots__ == theirs.__slots__ == ("heads", "head_dim", "window", "notes", "extra")


def test_equality_hash_and_repr_match_dataclasses() -> None:
    ours, theirs = _pair(BODY, ANNOTATIONS)
    a, b = ours(heads=8, head_dim=128, window=4096), theirs(heads=8, head_dim=128, window=4096)
    assert a == ours(heads=8, head_dim=128, window=4096) and a != ours(heads=8, head_dim=64, window=4096)
    assert a != b  # another class: not equal, as dataclasses compare class first
    a, b = ours(heads=8, head_dim=128, window=4096, extra=None), theirs(heads=8, head_dim=128, window=4096, extra=None)
    assert hash(a) == hash(b) == hash((8, 128, 4096, (), None))  # the fields' tuple: set orders do not move
    assert repr(a) == repr(b)


def test_frozen_keyword_only_and_missing_fields_raise_as_dataclasses_do() -> None:
    ours, theirs = _pair(BODY, ANNOTATIONS)
    a = ours(heads=8, head_dim=128)
    with pytest.raises(FrozenInstanceError):
        a.heads = 4  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del a.heads
    for cls in (ours, theirs):
        with pytest.raises(TypeError):
            cls(8, 128)  # keyword-only
        with pytest.raises(TypeError, match="head_dim"):
            cls(heads=8)
        with pytest.raises(TypeError, match="unexpected keyword"):
            cls(heads=8, head_dim=128, width=3)


def test_inheritance_puts_base_fields_first_and_keeps_one_slot_each() -> None:
    base_ours, base_theirs = _pair({}, {"heads": "int", "head_dim": "int"})
    ours, theirs = _pair({"kind": "sliding"}, {"kind": "ClassVar[str]", "window": "int"}, base=(base_ours, base_theirs))
    assert fields(ours) == tuple(f.name for f in dataclasses.fields(theirs)) == ("heads", "head_dim", "window")
    a = ours(heads=8, head_dim=128, window=4096)
    assert isinstance(a, base_ours) and ours.__slots__ == ("window",) and a != base_ours(heads=8, head_dim=128)
    assert hash(a) == hash(theirs(heads=8, head_dim=128, window=4096))


def test_replace_as_dict_and_pickle() -> None:
    ours, _theirs = _pair(BODY, ANNOTATIONS)
    a = ours(heads=8, head_dim=128, notes=("n",))
    b = replace(a, heads=4)
    assert (b.heads, b.head_dim, b.notes, a.heads) == (4, 128, ("n",), 8)
    with pytest.raises(TypeError, match="unexpected keyword"):
        replace(a, width=3)
    inner = frozen(type("Inner", (), {"__annotations__": {"x": "int"}}))
    outer = frozen(type("Outer", (), {"__annotations__": {"inner": "Inner", "items": "list[Inner]"}}))
    assert as_dict(outer(inner=inner(x=1), items=[inner(x=2)])) == {"inner": {"x": 1}, "items": [{"x": 2}]}
    assert pickle.loads(pickle.dumps(PickledPoint(x=1, y=2))) == PickledPoint(x=1, y=2)
    with pytest.raises(TypeError, match="not a value class"):
        fields(int)
    with pytest.raises(TypeError, match="one of default or default_factory"):
        field(default=(), default_factory=tuple)


def test_positional_values_order_defaults_as_dataclasses_do() -> None:
    point = frozen(kw_only=False)(type("P", (), {"__annotations__": {"x": "int", "y": "int"}, "y": 0}))
    assert point(1) == point(x=1, y=0) and point(1, 2).y == 2 and point.__match_args__ == ("x", "y")
    with pytest.raises(TypeError, match="non-default argument 'y' follows default argument"):
        frozen(kw_only=False)(type("Q", (), {"__annotations__": {"x": "int", "y": "int"}, "x": 0}))


@frozen
class PickledPoint:
    x: int
    y: int
    kind: ClassVar[str] = "point"


def test_subclass_defaults_follow_the_nearest_declaration() -> None:
    """A subclass may give an inherited field a default, or take one away, as with dataclasses."""
    base = frozen(type("Base", (), {"__annotations__": {"x": "int", "y": "int"}, "y": 2}))
    with_default = frozen(type("WithDefault", (base,), {"__annotations__": {"x": "int"}, "x": 5}))
    assert with_default() == with_default(x=5, y=2) and with_default(x=1).x == 1
    required = frozen(type("Required", (with_default,), {"__annotations__": {"x": "int"}}))
    child = frozen(type("Child", (required,), {"__annotations__": {"z": "int"}, "z": 0}))
    with pytest.raises(TypeError, match="'x'"):
        child()  # x lost its default in Required, so Child needs it too
    assert fields(child) == ("x", "y", "z")


def test_own_eq_stays_hashable_and_odd_field_names_work() -> None:
    own_eq = frozen(type("OwnEq", (), {"__annotations__": {"x": "int"}, "__eq__": lambda self, other: True}))
    assert own_eq(x=1) == own_eq(x=2) and hash(own_eq(x=1)) == hash((1,))
    odd = frozen(type("Odd", (), {"__annotations__": {"self": "int", "ClassVariant": "int", "kind": "ClassVar[str]"},
                                   "kind": "k"}))
    value = odd(self=1, ClassVariant=2)
    assert (value.self, value.ClassVariant, fields(odd)) == (1, 2, ("self", "ClassVariant"))


def test_mutable_defaults_and_mixed_keyword_bases_are_refused() -> None:
    with pytest.raises(ValueError, match="mutable default list"):
        frozen(type("Bad", (), {"__annotations__": {"x": "list[int]"}, "x": []}))
    point = frozen(kw_only=False)(type("Point", (), {"__annotations__": {"x": "int"}}))
    with pytest.raises(TypeError, match="both"):
        frozen(type("Point3", (point,), {"__annotations__": {"z": "int"}}))


def test_as_dict_copies_leaves_and_keeps_namedtuples() -> None:
    from collections import namedtuple

    pair = namedtuple("pair", "a b")
    holder = frozen(type("Holder", (), {"__annotations__": {"items": "list[int]", "p": "pair"}}))
    value = holder(items=[1, 2], p=pair(1, [3]))
    plain = as_dict(value)
    assert plain == {"items": [1, 2], "p": pair(1, [3])} and plain["p"][1] is not value.p.b


def test_first_instances_from_many_threads() -> None:
    """The first instances of a class and its subclass made at once, on many threads, all come out right."""
    import threading

    base = frozen(type("Base", (), {"__annotations__": {"a": "int"}}))
    sub = frozen(type("Sub", (base,), {"__annotations__": {"b": "int"}}))
    made: list[object] = []
    barrier = threading.Barrier(8)

    def make(i: int) -> None:
        barrier.wait()
        made.append(sub(a=i, b=i) if i % 2 else base(a=i))

    threads = [threading.Thread(target=make, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(repr(m) for m in made) == sorted(
        [f"Sub(a={i}, b={i})" for i in range(1, 8, 2)] + [f"Base(a={i})" for i in range(0, 8, 2)])


def test_the_generic_and_the_compiled_init_agree_on_values_and_errors() -> None:
    """A class's first instances go through the field table, later ones through a compiled ``__init__``:
    the same values, and Python's own error messages, either way."""
    from kvplan import values

    def make_classes() -> tuple[type, type, type]:
        keyword = frozen(type("Spec", (), {"__annotations__": {"a": "int", "b": "int", "c": "int", "d": "tuple[int, ...]",
                                                               "e": "dict[str, int]"},
                                           "d": (), "e": field(default_factory=dict)}))
        positional = frozen(kw_only=False)(type("Pos", (), {"__annotations__": {"x": "int", "y": "int"}, "y": 0}))
        single = frozen(kw_only=False)(type("One", (), {"__annotations__": {"x": "int"}}))
        return keyword, positional, single

    calls = [
        (0, (), {"a": 1, "b": 2, "c": 3}), (0, (), {"a": 1, "b": 2, "c": 3, "d": (4,), "e": {"k": 5}}),
        (0, (1,), {}), (0, (), {"a": 1}), (0, (), {"a": 1, "b": 2}), (0, (), {}), (0, (), {"a": 1, "b": 2, "c": 3, "z": 0}),
        (1, (1,), {}), (1, (1, 2), {}), (1, (1, 2, 3), {}), (1, (1,), {"x": 2}), (1, (), {"y": 1}), (1, (), {"x": 1, "q": 2}),
        (2, (1,), {}), (2, (1, 2), {}), (2, (), {}),
    ]

    def outcomes(classes: tuple[type, type, type]) -> list[str]:
        out = []
        for which, args, kwargs in calls:
            try:
                made = classes[which](*args, **kwargs)
                out.append(repr(made) + str(made.e is not calls[1][2].get("e")) if which == 0 else repr(made))
            except TypeError as exc:
                out.append(f"TypeError: {exc}")
        return out

    first = make_classes()
    generic = outcomes(first)  # fewer calls than _COMPILE_AFTER: every one generic
    warmed = make_classes()
    for _ in range(values._COMPILE_AFTER):
        warmed[0](a=0, b=0, c=0)
        warmed[1](0)
        warmed[2](0)
    compiled = outcomes(warmed)
    assert generic == compiled
    assert "TypeError: Spec.__init__() missing 2 required keyword-only arguments: 'b' and 'c'" in generic
    assert "TypeError: Spec.__init__() missing 3 required keyword-only arguments: 'a', 'b', and 'c'" in generic
    assert "TypeError: Pos.__init__() got multiple values for argument 'x'" in generic
    assert "TypeError: One.__init__() takes 2 positional arguments but 3 were given" in generic

