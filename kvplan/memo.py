"""A bounded memo of pure answers keyed by an object's identity plus plain values (a parsed model and the
inputs asked of it): the object is kept with its entry, so its id cannot be reused while the entry lives."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class OwnerMemo(Generic[T]):
    """``get(owner, key, make)``: the answer ``make()`` gave for this owner and key, made once; the oldest entry
    goes when ``size`` are held. A key that cannot be hashed is answered without the memo."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: dict[tuple[Any, ...], tuple[object, T]] = {}

    def get(self, owner: object, key: tuple[Hashable, ...], make: Callable[[], T]) -> T:
        full = (id(owner), *key)
        try:
            hit = self._entries.get(full)
        except TypeError:  # an unhashable value: the maker's own checks word the error
            return make()
        if hit is not None and hit[0] is owner:
            return hit[1]
        value = make()
        if len(self._entries) >= self._size:
            self._entries.pop(next(iter(self._entries)))
        self._entries[full] = (owner, value)
        return value

    def clear(self) -> None:
        self._entries.clear()
