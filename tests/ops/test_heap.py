"""The daemon's heap freeze (``ops.heap.HeapFreeze``): what a pass leaves alive is frozen out of
the cyclic collector's walks, cyclic garbage among it is still collected at the next full
collection, and closing thaws everything. Real ``gc``; a fake monotonic clock."""

from __future__ import annotations

import gc
import weakref

import pytest

from gpuorch.ops.heap import HeapFreeze


class Ticks:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Node:
    me: Node


@pytest.fixture
def heap():  # type: ignore[no-untyped-def]
    clock = Ticks()
    h = HeapFreeze(full_every_s=600.0, clock=clock)
    yield h, clock
    h.close()


def test_what_a_pass_leaves_is_frozen_and_its_cycles_are_collected_at_the_next_full_collection(heap):
    h, clock = heap
    h.after_pass()  # the first: a full collection, then the freeze
    assert h.full_collections == 1 and gc.get_freeze_count() > 0
    node = Node()
    node.me = node  # a cycle: only the collector frees it
    ref = weakref.ref(node)
    h.after_pass()
    assert h.full_collections == 1  # not due yet: frozen with the rest
    del node
    gc.collect()
    assert ref() is not None  # frozen: ignored by the collector
    clock.t = 601.0
    h.after_pass()
    assert h.full_collections == 2 and ref() is None


def test_close_thaws_the_heap(heap):
    h, _ = heap
    h.after_pass()
    h.close()
    assert gc.get_freeze_count() == 0
