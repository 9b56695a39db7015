"""Dataclasses whose methods are written in source, not generated at start-up.

``@dataclass`` writes a class's ``__init__``, ``__eq__``, ``__repr__``, ``__hash__`` and frozen ``__setattr__``
as source text and compiles it each time the module is imported: on CPython 3.11 about 0.3 ms a class, most of
what a plain prompt paid above the floor of its own stack. So the classes a plain prompt loads are declared
``@dataclass(init=False, repr=False, eq=False)`` (which only records their fields: ``fields()``, ``replace()``
and ``asdict()`` work as before), write their ``__init__`` by hand (compiled once, into the ``.pyc``), and take
the rest from a base here, written once over ``fields()``:

- ``DataclassRepr``: the repr dataclasses would write;
- ``Record``: that, and equality over the compared fields (unhashable, as a dataclass with ``eq=True``);
- ``Frozen``: assignment raises ``FrozenInstanceError`` (a hand-written ``__init__`` sets fields with
  ``set_field``); alone it keeps identity equality, as ``frozen=True, eq=False``;
- ``FrozenRecord``: ``Frozen`` and ``Record``, hashed over the hashed fields, as ``frozen=True``.

tests/test_records.py checks every hand-written ``__init__`` against its class's fields.
"""

from __future__ import annotations

from dataclasses import Field, FrozenInstanceError, fields
from typing import Any, ClassVar

set_field = object.__setattr__  # how a frozen record's __init__ sets its fields


class DataclassRepr:
    """``ClassName(field=value, ...)`` over the fields shown in reprs."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # only dataclasses derive from this

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"{type(self).__qualname__}({shown})"


class Record(DataclassRepr):
    """Equal to an object of the same class whose compared fields are equal."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(self) if f.compare)

    __hash__ = None  # type: ignore[assignment]  # mutable and compared by value, as dataclasses do


class Frozen:
    """Fields are set once, in ``__init__`` (with ``set_field``)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __setstate__(self, state: object) -> None:
        """Copying and unpickling set fields the way ``__init__`` does (state: a dict, or (dict, slots))."""
        for mapping in state if isinstance(state, tuple) else (state,):
            for name, value in (mapping or {}).items():
                set_field(self, name, value)


class FrozenRecord(Frozen, Record):
    """Frozen, compared by value and hashable, as ``@dataclass(frozen=True)``."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]  # Record is unhashable; frozen records are not
        return hash(tuple(getattr(self, f.name) for f in fields(self) if (f.compare if f.hash is None else f.hash)))
