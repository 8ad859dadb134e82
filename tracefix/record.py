"""Value records: the part of :mod:`dataclasses` tracefix uses, without its start-up cost.

Why not dataclasses: importing it (it imports :mod:`inspect`) and generating every class's
methods with ``exec`` cost about 25 ms of the ~80 ms a ``--no-patch`` diagnosis takes.  Here a
class's fields are read once, from its annotations, and the methods are shared, generic ones.

    @record(frozen=True)
    class Site:
        path: str
        line: int
        notes: Tuple[str, ...] = field(default=(), repr=False)

gives the constructor, ``repr``, ``==``, a hash (frozen records only), ``replace()`` and
``asdict()`` that dataclasses would.  Subclasses that are records add fields after their base's.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

__all__ = ["record", "field", "replace", "asdict", "is_record", "FrozenRecordError"]

_MISSING: Any = object()


class FrozenRecordError(AttributeError):
    """Assignment to a field of a frozen record."""


class _Field:
    __slots__ = ("name", "default", "factory", "repr", "compare")

    def __init__(self, default: Any = _MISSING, factory: Any = _MISSING, repr: bool = True, compare: bool = True):
        self.name = ""
        self.default, self.factory, self.repr, self.compare = default, factory, repr, compare


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] = _MISSING,
          repr: bool = True, compare: bool = True) -> Any:
    """A field's options, as :func:`dataclasses.field` takes them."""
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return _Field(default, default_factory, repr, compare)


def _own_fields(cls: type) -> Dict[str, _Field]:
    out: Dict[str, _Field] = {}
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, _Field) else _Field(default=value)
        f.name = name
        if isinstance(value, _Field):       # the class attribute becomes the plain default
            if f.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        out[name] = f
    return out


def _init(self, *args: Any, **kwargs: Any) -> None:
    fields = self.__record_fields__
    if len(args) > len(fields):
        raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments but {len(args)} were given")
    put = object.__setattr__
    for i, (name, f) in enumerate(fields.items()):
        if i < len(args):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__}() got multiple values for argument '{name}'")
            value = args[i]
        elif name in kwargs:
            value = kwargs.pop(name)
        elif f.default is not _MISSING:
            value = f.default
        elif f.factory is not _MISSING:
            value = f.factory()
        else:
            raise TypeError(f"{type(self).__name__}() missing required argument: '{name}'")
        put(self, name, value)
    if kwargs:
        raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument '{next(iter(kwargs))}'")


def _key(self) -> Tuple[Any, ...]:
    return tuple(getattr(self, name) for name, f in self.__record_fields__.items() if f.compare)


def _eq(self, other: Any) -> Any:
    if other.__class__ is self.__class__:
        return _key(self) == _key(other)
    return NotImplemented


def _hash(self) -> int:
    return hash(_key(self))


def _repr(self) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name, f in self.__record_fields__.items() if f.repr)
    return f"{type(self).__qualname__}({shown})"


def _frozen_setattr(self, name: str, value: Any) -> None:
    raise FrozenRecordError(f"cannot assign to field '{name}'")


def _frozen_delattr(self, name: str) -> None:
    raise FrozenRecordError(f"cannot delete field '{name}'")


def record(cls: Any = None, *, frozen: bool = False) -> Any:
    """Class decorator: ``@record`` (mutable, unhashable, as a dataclass) or ``@record(frozen=True)``."""
    def wrap(cls: type) -> type:
        fields: Dict[str, _Field] = {}
        for base in reversed(cls.__mro__[1:]):
            fields.update(base.__dict__.get("__record_fields__", {}))
        fields.update(_own_fields(cls))
        seen_default = ""
        for name, f in fields.items():
            if f.default is not _MISSING or f.factory is not _MISSING:
                seen_default = name
            elif seen_default:
                raise TypeError(f"{cls.__name__}: field '{name}' without a default follows '{seen_default}'")
        cls.__record_fields__ = fields
        cls.__init__ = _init
        cls.__repr__ = _repr
        cls.__eq__ = _eq
        if frozen:
            cls.__hash__ = _hash
            cls.__setattr__ = _frozen_setattr
            cls.__delattr__ = _frozen_delattr
        else:
            cls.__hash__ = None
        return cls
    return wrap if cls is None else wrap(cls)


def is_record(obj: Any) -> bool:
    return hasattr(type(obj) if not isinstance(obj, type) else obj, "__record_fields__")


def replace(obj: Any, **changes: Any) -> Any:
    """A copy of ``obj`` with ``changes`` applied (as :func:`dataclasses.replace`)."""
    fields = type(obj).__record_fields__
    for name in changes:
        if name not in fields:
            raise TypeError(f"{type(obj).__name__} has no field '{name}'")
    values = {name: getattr(obj, name) for name in fields}
    values.update(changes)
    return type(obj)(**values)


def asdict(obj: Any) -> Any:
    """Records as dicts, recursively through lists, tuples and dicts (as :func:`dataclasses.asdict`)."""
    if is_record(obj) and not isinstance(obj, type):
        return {name: asdict(getattr(obj, name)) for name in type(obj).__record_fields__}
    if isinstance(obj, (list, tuple)):
        return type(obj)(asdict(v) for v in obj)
    if isinstance(obj, dict):
        return {asdict(k): asdict(v) for k, v in obj.items()}
    return obj
