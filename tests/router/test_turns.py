"""Each app's share of an event-loop turn (router/turns.py), on a real uvloop loop.

A test coroutine that resumes after ``asyncio.sleep(0)`` runs in the loop's next turn,
after the shares were renewed (the renewal was scheduled first): it stands in for the
I/O callbacks of that turn.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

import pytest
import uvloop

from router.turns import Turns


def test_an_app_does_its_share_per_turn_and_then_waits() -> None:
    async def main() -> list[list[bool]]:
        turns = Turns(asyncio.get_running_loop(), share=2)
        seen = []
        for _ in range(2):
            seen.append([turns.admit("slow") for _ in range(3)] + [turns.admit("fast")])
            await asyncio.sleep(0)  # the next turn: new shares
        return seen

    assert uvloop.run(main()) == [[True, True, False, True], [True, True, False, True]]


def test_waiting_work_runs_in_order_a_share_per_turn_with_other_apps_between() -> None:
    async def main() -> tuple[list[str], bool, bool, int]:
        turns = Turns(asyncio.get_running_loop(), share=2)
        ran: list[str] = []
        for number in range(5):
            turns.defer("slow", partial(ran.append, f"slow{number}"))
        # Work of an app already waiting waits behind it, share or not.
        slow_admitted, fast_admitted = turns.admit("slow"), turns.admit("fast")
        for number in range(4):
            await asyncio.sleep(0)
            if turns.admit("fast"):  # what another app's socket brought in this turn
                ran.append(f"fast{number}")
        return ran, slow_admitted, fast_admitted, turns.deferred

    ran, slow_admitted, fast_admitted, deferred = uvloop.run(main())
    assert not slow_admitted and fast_admitted
    assert ran == ["slow0", "slow1", "fast0", "slow2", "slow3", "fast1", "slow4", "fast2",
                   "fast3"]
    assert deferred == 5


def test_an_app_whose_queue_emptied_gets_only_what_is_left_of_its_share() -> None:
    """The turn that ran an app's last waiting work counts it: a request arriving in the
    next turn's I/O may not take a whole new share on top."""
    async def main() -> list[bool]:
        turns = Turns(asyncio.get_running_loop(), share=2)
        turns.defer("slow", lambda: None)
        await asyncio.sleep(0)  # the waiting work ran, one of the share
        return [turns.admit("slow") for _ in range(2)]

    assert uvloop.run(main()) == [True, False]


def test_a_failing_piece_of_work_is_logged_and_the_rest_still_run(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[int]:
        turns = Turns(asyncio.get_running_loop(), share=3)
        ran: list[int] = []

        def fails() -> None:
            raise RuntimeError("a bug")

        turns.defer("slow", lambda: ran.append(1))
        turns.defer("slow", fails)
        turns.defer("slow", lambda: ran.append(3))
        turns.defer("slow", lambda: ran.append(4))
        for _ in range(3):
            await asyncio.sleep(0)
        return ran

    with caplog.at_level(logging.ERROR, logger="router.turns"):
        assert uvloop.run(main()) == [1, 3, 4]
    assert "fast path work of slow failed" in caplog.text
    assert "RuntimeError: a bug" in caplog.text


def test_work_that_waits_again_keeps_one_turn_end_per_turn() -> None:
    """Work run at a turn's end may defer more (a request served from the queue whose
    answer is at once complete): that schedules no second end of turn, which would
    double with every turn."""
    async def main() -> list[int]:
        turns = Turns(asyncio.get_running_loop(), share=1)
        ran: list[int] = []

        def again(number: int) -> None:
            ran.append(number)
            if number < 5:
                turns.defer("slow", lambda: again(number + 1))

        turns.defer("slow", lambda: again(0))
        per_turn = []
        for _ in range(6):
            before = len(ran)
            await asyncio.sleep(0)
            per_turn.append(len(ran) - before)
        return per_turn

    assert uvloop.run(main()) == [1, 1, 1, 1, 1, 1]
