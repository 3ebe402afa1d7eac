"""``ReplyWatch`` and ``ReplyLimits`` alone: each limit at its edge, the words and data of each
refusal, and which deadline a wait or a stall is named by.

The streamed cases run against the real loopback server in ``test_providers_bounds.py``; here the
watch is driven by hand with its own clock (the ``clock`` seam a provider leaves at
``time.monotonic``), so an edge is hit exactly, not within a scheduler's slack.
"""

from __future__ import annotations

import pytest

from kernel_ext.errors import ErrorCode
from kernel_ext.providers import ProviderError
from kernel_ext.providers.bounds import CHARS_PER_TOKEN, CallBudget, ReplyLimits, ReplyWatch

E = "https://llm.example/v1"


class Clock:
    """A clock the test moves: the watch reads it, nothing else does."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def watch(limits: ReplyLimits | None = None, budget: CallBudget | None = None, clock: Clock | None = None, **kwargs) -> ReplyWatch:
    return ReplyWatch(limits or ReplyLimits(), budget, E, clock=clock or Clock(), **kwargs)


def refused(call, *args) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        call(*args)
    return caught.value


# -- the environment ----------------------------------------------------------------------------


def test_limits_are_read_from_the_process_environment_when_none_is_given(monkeypatch):
    monkeypatch.setenv("BESSER_LLM_MAX_TOOL_CALLS", "7")
    monkeypatch.setenv("BESSER_LLM_TIMEOUT_SECONDS", "0.5")
    limits = ReplyLimits.from_env()
    assert limits.max_tool_calls == 7 and limits.idle_timeout == 0.5  # a timeout under a second is a positive number


def test_counts_are_whole_numbers_and_timeouts_keep_their_fraction():
    limits = ReplyLimits.from_env({"BESSER_LLM_MAX_TOOL_CALLS": "3", "BESSER_LLM_CALL_TIMEOUT_SECONDS": "2.5"}, max_chars=100)
    assert type(limits.max_tool_calls) is int and type(limits.max_chars) is int and type(limits.max_bytes) is int
    assert limits.call_timeout == 2.5 and type(limits.idle_timeout) is float
    w = watch(limits)
    for _ in range(3):
        w.on_call()
    assert refused(w.on_call).message == f"the reply from {E} was cut off: more than 3 tool calls (BESSER_LLM_MAX_TOOL_CALLS)"


def test_a_count_must_be_a_whole_number_and_a_timeout_need_not_be():
    """``0.5`` tool calls once read as a limit of 0: every reply with a call was cut off."""
    counts = ("BESSER_LLM_MAX_TOOL_CALLS", "BESSER_LLM_MAX_REPLY_BYTES", "BESSER_LLM_MAX_REPLY_CHARS", "BESSER_LLM_MAX_ARGUMENT_CHARS")
    for variable in counts:
        for bad in ("0.5", "2.5"):
            with pytest.raises(ProviderError) as caught:
                ReplyLimits.from_env({variable: bad})
            assert caught.value.code == ErrorCode.NOT_CONFIGURED and caught.value.message == f"{variable}={bad!r} is not a whole number"
    assert ReplyLimits.from_env({"BESSER_LLM_MAX_TOOL_CALLS": "12.0"}).max_tool_calls == 12
    assert ReplyLimits.from_env({"BESSER_LLM_TIMEOUT_SECONDS": "0.25"}).idle_timeout == 0.25


# -- sizes: each limit is reached, not passed, and named ------------------------------------------


def test_bytes_up_to_the_limit_pass_and_one_more_is_cut_with_its_words():
    w = watch(ReplyLimits(max_bytes=100))
    w.on_bytes(60)
    w.on_bytes(40)  # exactly the limit
    error = refused(w.on_bytes, 1)
    assert error.code == ErrorCode.REPLY_TOO_LARGE
    assert error.message == f"the reply from {E} was cut off: more than 100 bytes (BESSER_LLM_MAX_REPLY_BYTES)"
    assert error.data == {"limit": "reply_bytes", "endpoint": E}


def test_tool_calls_up_to_the_limit_pass_and_one_more_is_cut_with_its_words():
    w = watch(ReplyLimits(max_tool_calls=2))
    w.on_call()
    w.on_call()
    error = refused(w.on_call)
    assert error.code == ErrorCode.REPLY_TOO_LARGE and error.data == {"limit": "tool_calls", "endpoint": E}
    assert error.message == f"the reply from {E} was cut off: more than 2 tool calls (BESSER_LLM_MAX_TOOL_CALLS)"


def test_characters_up_to_the_limit_pass_and_one_more_is_cut_with_its_words():
    w = watch(ReplyLimits(max_chars=10))
    w.on_text(0)  # nothing arrived: nothing counted
    w.on_text(4)
    w.on_arguments("c1", 6)  # arguments count as characters of the reply too
    assert w.chars == 10
    error = refused(w.on_text, 1)
    assert error.code == ErrorCode.REPLY_TOO_LARGE and error.data == {"limit": "reply_chars", "endpoint": E}
    assert error.message == f"the reply from {E} was cut off: more than 10 characters (BESSER_LLM_MAX_REPLY_CHARS)"


def test_a_calls_arguments_add_up_piece_by_piece_and_each_call_has_its_own_count():
    w = watch(ReplyLimits(max_argument_chars=10))
    w.on_arguments("c1", 4)
    w.on_arguments("c1", 0)  # an empty piece: nothing counted
    w.on_arguments("c1", 6)  # exactly the limit for c1
    w.on_arguments("c2", 10)  # another call starts from nothing
    assert w.chars == 20
    error = refused(w.on_arguments, "c1", 1)
    assert error.code == ErrorCode.REPLY_TOO_LARGE and error.data == {"limit": "argument_chars", "endpoint": E}
    assert error.message == (f"the reply from {E} was cut off: a tool call with more than 10 characters of arguments "
                             "(BESSER_LLM_MAX_ARGUMENT_CHARS)")


def test_a_name_and_an_id_are_bounded_whatever_their_json_type_and_an_absent_one_counts_nothing():
    w = watch(ReplyLimits(max_name_chars=0, max_id_chars=0))
    w.on_identity(None, None)  # neither was streamed in this piece: nothing to count
    w = watch(ReplyLimits(max_name_chars=5, max_id_chars=3))
    w.on_identity("abcde", 123)  # a number as an id counts its digits
    error = refused(w.on_identity, "abcde", 1234)
    assert error.code == ErrorCode.REPLY_TOO_LARGE
    assert error.message == f"the reply from {E} was cut off: a tool call id of more than 3 characters"
    assert error.data == {"limit": "a tool call id", "max": 3, "size": 4}
    error = refused(w.on_identity, "abcdef", None)
    assert error.message == f"the reply from {E} was cut off: a tool name of more than 5 characters"
    assert error.data == {"limit": "a tool name", "max": 5, "size": 6}


# -- spend: tokens and dollars while the reply arrives -------------------------------------------


def test_output_tokens_are_the_characters_divided_rounding_up():
    w = watch()
    assert w.output_tokens() == 0
    w.on_text(1)
    assert w.output_tokens() == 1
    w.on_text(CHARS_PER_TOKEN - 1)
    assert w.output_tokens() == 1
    w.on_text(1)
    assert w.output_tokens() == 2


def test_the_token_budget_is_reached_not_passed_and_named_with_what_was_left():
    w = watch(budget=CallBudget(tokens_left=10), input_tokens=8)
    w.on_text(2 * CHARS_PER_TOKEN)  # 8 in + 2 out: exactly the budget
    error = refused(w.on_text, 1)
    assert error.code == ErrorCode.BUDGET and error.data == {"budget": "tokens"}
    assert error.message == ("token budget spent while the reply arrived (about 11 tokens, 10 were left); "
                             "the reply was cut off")
    w = watch(budget=CallBudget(tokens_left=-3))
    assert "(about 1 tokens, 0 were left)" in refused(w.on_text, 1).message  # an overdrawn budget reads as nothing left


def test_the_cost_cap_is_the_lower_of_the_runs_and_the_meters_and_is_reached_not_passed():
    seen: list[tuple[int, int]] = []

    def price(tokens_in: int, tokens_out: int) -> float:
        seen.append((tokens_in, tokens_out))
        return tokens_out * 0.001

    w = watch(budget=CallBudget(cost_left_usd=0.5), cost_left_usd=0.002, price=price, input_tokens=7)
    assert w.cost_left == 0.002
    w.on_text(2 * CHARS_PER_TOKEN)  # $0.002: exactly the cap
    assert seen == [(7, 2)]
    error = refused(w.on_text, 1)
    assert error.code == ErrorCode.COST_CAP and error.data == {"budget": "cost"}
    assert error.message == "cost cap reached while the reply arrived (about $0.0030, $0.0020 was left); the reply was cut off"
    assert watch(budget=CallBudget(cost_left_usd=0.5), cost_left_usd=None).cost_left == 0.5
    assert watch(cost_left_usd=0.25).cost_left == 0.25 and watch().cost_left is None
    w = watch(cost_left_usd=-1.0, price=price)
    assert "$0.0000 was left" in refused(w.on_text, 1).message  # an overdrawn cap reads as nothing left
    unpriced = watch(cost_left_usd=0.0)  # a model with no known price: the cap cannot be checked, nothing is cut
    unpriced.on_text(1000)


# -- time: which deadline comes first, and what it is called --------------------------------------


def test_progress_resets_only_the_idle_deadline_and_the_first_deadline_names_the_error():
    clock = Clock()
    w = watch(ReplyLimits(idle_timeout=10, call_timeout=25), clock=clock)
    assert w.time_left() == 10 and w.time_left(idle=False) == 25
    clock.now += 9
    w.on_text(1)  # progress: the idle clock starts again
    assert w.time_left() == 10 and w.time_left(idle=False) == 16
    clock.now += 10  # no progress for the idle timeout
    error = w.expired()
    assert error.code == ErrorCode.TIMEOUT and error.data == {"limit": "idle_timeout"}
    assert error.message == f"the stream from {E} stalled: no progress for 10s (BESSER_LLM_TIMEOUT_SECONDS)"
    w.on_call()  # a call starting is progress
    clock.now += 6  # 25s since the start: the call's total comes first
    error = w.expired()
    assert error.code == ErrorCode.TIMEOUT and error.data == {"limit": "call_timeout"}
    assert error.message == f"{E} did not finish its reply within 25s (BESSER_LLM_CALL_TIMEOUT_SECONDS)"
    assert w.expired(idle=False).data == {"limit": "call_timeout"}


def test_the_runs_deadline_is_named_when_it_comes_first():
    clock = Clock()
    w = watch(ReplyLimits(idle_timeout=10, call_timeout=25), CallBudget(deadline=clock.now + 4), clock=clock)
    assert w.time_left() == 4
    error = w.expired()
    assert error.code == ErrorCode.BUDGET and error.data == {"budget": "wall_time"}
    assert error.message == f"wall-time budget spent while waiting for {E}; the call was stopped"


def test_check_time_raises_once_no_time_is_left_and_not_before():
    clock = Clock()
    w = watch(ReplyLimits(idle_timeout=10, call_timeout=25), clock=clock)
    clock.now += 9.5
    w.check_time()
    clock.now += 0.5  # exactly at the idle deadline: no time left
    assert refused(w.check_time).data == {"limit": "idle_timeout"}


def test_a_wait_that_ends_exactly_at_a_deadline_may_start_and_a_longer_one_is_refused_in_words():
    clock = Clock()
    w = watch(ReplyLimits(idle_timeout=1, call_timeout=30), CallBudget(deadline=clock.now + 20), clock=clock)
    clock.now += 5
    assert w.allow_wait(15) is None  # ends exactly at the run's deadline; the idle timeout does not count a chosen wait
    assert w.allow_wait(15.5) == (ErrorCode.BUDGET, "only 15s are left of the run's wall-time budget")
    w = watch(ReplyLimits(idle_timeout=1, call_timeout=30), clock=clock)
    assert w.allow_wait(30) is None  # ends exactly at the call's total
    assert w.allow_wait(31) == (ErrorCode.TIMEOUT, "only 30s are left of the call's 30s (BESSER_LLM_CALL_TIMEOUT_SECONDS)")
    clock.now += 40  # past both: nothing is left, not a negative time
    assert w.allow_wait(1) == (ErrorCode.TIMEOUT, "only 0s are left of the call's 30s (BESSER_LLM_CALL_TIMEOUT_SECONDS)")
    late = watch(budget=CallBudget(deadline=clock.now - 3), clock=clock)
    assert late.allow_wait(1) == (ErrorCode.BUDGET, "only 0s are left of the run's wall-time budget")


def test_a_finished_wait_restarts_the_idle_clock():
    clock = Clock()
    w = watch(ReplyLimits(idle_timeout=10, call_timeout=100), clock=clock)
    clock.now += 8
    w.waited()
    assert w.time_left() == 10


def test_deadlines_that_fall_together_are_named_budget_then_call_then_idle():
    """The run's wall time is the wider cause, then the call's total, then a stall: a tie names the wider one."""
    clock = Clock()
    w = watch(ReplyLimits(idle_timeout=10, call_timeout=10), clock=clock)
    assert w.expired().data == {"limit": "call_timeout"}
    w = watch(ReplyLimits(idle_timeout=10, call_timeout=10), CallBudget(deadline=clock.now + 10), clock=clock)
    assert w.expired().data == {"budget": "wall_time"} and w.expired(idle=False).data == {"budget": "wall_time"}
