"""Dates agents and users pass: one that no calendar can print is one error, never a crash."""

from __future__ import annotations

import pytest

from crossmodalrag.agent.tools import InvalidArgument, parse_when
from crossmodalrag.types import iso_time


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
def test_a_date_past_the_calendar_after_its_offset_is_out_of_range(when):
    with pytest.raises(InvalidArgument, match="out of range") as error:
        parse_when(when, "when")
    assert "year 1 to 9999" in error.value.hint


def test_the_calendar_edges_themselves_are_dates():
    assert iso_time(parse_when("0001-01-01", "when")) == "0001-01-01T00:00:00+00:00"
    assert iso_time(parse_when("9999-12-31T23:59:59Z", "when")) == "9999-12-31T23:59:59+00:00"


def test_a_stored_time_no_date_can_print_is_shown_as_none():
    assert iso_time(-62135596800.0 - 3600) is None and iso_time(1e20) is None
