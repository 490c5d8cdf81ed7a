"""Progress reporting: callbacks get (done, total), True draws a bar, bad values are refused."""

import io

import pytest

from rumimm.progress import Progress, on_terminal


def test_a_callback_sees_every_step_with_the_fixed_total():
    seen = []
    with Progress(lambda done, total: seen.append((done, total)), 3) as p:
        for _ in range(3):
            p.advance()
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_none_and_false_report_nothing_but_still_count():
    for value in (None, False):
        with Progress(value, 5) as p:
            p.advance(2)
        assert p.done == 2


def test_true_draws_a_tqdm_bar_that_closes_on_exit():
    pytest.importorskip("tqdm")
    with Progress(True, 4, desc="write") as p:
        assert p._bar is not None
        p.advance(4)
        assert p._bar.n == 4
    assert p._bar is None


def test_a_non_callable_progress_is_a_type_error():
    with pytest.raises(TypeError, match="progress must be"):
        Progress("yes", 1)


def test_a_pipe_is_not_a_terminal():
    assert on_terminal(io.StringIO()) is False
