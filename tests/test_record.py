"""tracefix.record: the dataclass subset the pipeline's records use, checked against dataclasses."""
import dataclasses
import subprocess
import sys
from typing import List, Optional, Tuple

import pytest

from tracefix.record import FrozenRecordError, asdict, field, record, replace


@record(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: Tuple[str, ...] = field(default=(), repr=False, compare=False)


@record(frozen=True)
class Labelled(Point):
    label: Optional[str] = None


@record
class Bag:
    items: List[int] = field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class DPoint:
    x: int
    y: int = 0
    tags: Tuple[str, ...] = dataclasses.field(default=(), repr=False, compare=False)


def test_constructor_defaults_and_keywords_as_dataclasses():
    assert (Point(1).x, Point(1).y, Point(1).tags) == (1, 0, ())
    assert Point(1, 2) == Point(x=1, y=2) == Point(y=2, x=1)
    assert Labelled(1, 2, ("t",), "a").label == "a"
    with pytest.raises(TypeError, match="missing required argument: 'x'"):
        Point()
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(1, z=3)
    with pytest.raises(TypeError, match="multiple values"):
        Point(1, x=2)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        Point(1, 2, (), 4)


def test_repr_eq_and_hash_follow_the_field_options():
    assert repr(Point(1, 2, ("t",))) == repr(DPoint(1, 2, ("t",))).replace("DPoint", "Point") == "Point(x=1, y=2)"
    assert repr(Labelled(1)) == "Labelled(x=1, y=0, label=None)"
    assert Point(1, 2, ("a",)) == Point(1, 2, ("b",))            # compare=False
    assert hash(Point(1, 2, ("a",))) == hash(Point(1, 2, ("b",)))
    assert Point(1) != Point(2)
    assert Point(1) != Labelled(1)                              # another class never equals
    assert len({Point(1), Point(1), Point(2)}) == 2


def test_frozen_records_refuse_assignment_and_mutable_ones_are_unhashable():
    p = Point(1)
    with pytest.raises(FrozenRecordError):
        p.x = 2
    with pytest.raises(AttributeError):
        del p.x
    b = Bag()
    b.items.append(1)
    assert b.items == [1] and Bag().items == []                 # a fresh list per instance
    b.items = [2]
    with pytest.raises(TypeError):
        hash(b)


def test_replace_and_asdict():
    p = Labelled(1, 2, ("t",), "a")
    q = replace(p, y=5)
    assert (q.x, q.y, q.tags, q.label, type(q)) == (1, 5, ("t",), "a", Labelled) and p.y == 2
    with pytest.raises(TypeError, match="no field 'z'"):
        replace(p, z=1)
    assert asdict(Labelled(1, 2, ("t",), "a")) == {"x": 1, "y": 2, "tags": ("t",), "label": "a"}
    assert asdict(Bag([Point(1)])) == {"items": [{"x": 1, "y": 0, "tags": ()}]}


def test_a_field_without_default_after_one_with_is_refused():
    with pytest.raises(TypeError, match="without a default"):
        @record
        class Bad:
            a: int = 0
            b: int


def test_the_diagnose_path_imports_no_dataclasses():
    # dataclasses (and the inspect it imports) cost ~25 ms of start-up: the reason record exists
    code = ("import sys, tracefix.cli, tracefix.pipeline, tracefix.reader, tracefix.frames, tracefix.knowledge, "
            "tracefix.locator, tracefix.render; print('dataclasses' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_records_pickle_and_copy():
    import copy
    import pickle
    p = Labelled(1, 2, ("t",), "a")
    for q in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
        assert q == p and q.tags == ("t",) and type(q) is Labelled
