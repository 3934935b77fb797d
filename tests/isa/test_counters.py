"""Performance counter names: unique, documented, split into events and cycles."""

from __future__ import annotations

from openvta.isa import COUNTER_DOC, CYCLE_COUNTERS, EVENT_COUNTERS, Counter


def test_counter_names_are_unique():
    values = [c.value for c in Counter]
    assert len(values) == len(set(values))
    assert len(Counter.__members__) == len(values)  # no aliases hiding a duplicate value


def test_counter_names_are_lower_snake_case_and_str():
    for counter in Counter:
        assert counter.value == counter.name.lower()
        assert str(counter) == counter.value
        assert {counter.value: 1}[counter] == 1  # usable as a result's dict key
        assert isinstance(counter, str)


def test_every_counter_is_documented():
    assert set(COUNTER_DOC) == set(Counter)
    for counter, doc in COUNTER_DOC.items():
        assert isinstance(doc, str) and doc.strip() == doc and doc, counter


def test_event_and_cycle_counters_partition_counter():
    events, cycles = set(EVENT_COUNTERS), set(CYCLE_COUNTERS)
    assert len(events) == len(EVENT_COUNTERS) and len(cycles) == len(CYCLE_COUNTERS)
    assert not events & cycles
    assert events | cycles == set(Counter)
    # Both keep the declaration order of Counter.
    assert list(EVENT_COUNTERS) == [c for c in Counter if c in events]
    assert list(CYCLE_COUNTERS) == [c for c in Counter if c in cycles]


def test_cycle_counters_count_cycles_and_events_do_not():
    for counter in CYCLE_COUNTERS:
        assert counter.value.endswith("cycles")
        assert "cycles" in COUNTER_DOC[counter]
    for counter in EVENT_COUNTERS:
        assert "cycles" not in counter.value
        assert "cycles" not in COUNTER_DOC[counter]
    assert Counter.CYCLES in CYCLE_COUNTERS
    assert Counter.MACS in EVENT_COUNTERS and Counter.FETCH_INSNS in EVENT_COUNTERS
