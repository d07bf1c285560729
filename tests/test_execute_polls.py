"""tinytorch.grading.execute.short_polls: a message whose wake-up one long poll missed is still read.

A fake channel stands in for jupyter_client's AsyncZMQSocketChannel: its get_msg(timeout) waits
`timeout` (asyncio.sleep) and raises Empty until the message has "arrived", as a missed zmq
wake-up does. What is checked is which timeouts the wrapper asked for, not how long anything took.
"""

from __future__ import annotations

import asyncio
from queue import Empty

import pytest

from tinytorch.grading.execute import POLL_S, short_polls


class FakeChannel:
    def __init__(self, misses: int) -> None:
        self.misses = misses  # polls that miss the message before one sees it (None: never)
        self.asked: list[float | None] = []

    async def get_msg(self, timeout: float | None = None) -> dict:
        self.asked.append(timeout)
        if self.misses is not None and len(self.asked) > self.misses:
            return {"msg_type": "execute_reply"}
        await asyncio.sleep(timeout or 0)
        raise Empty


def test_a_missed_wake_up_costs_one_short_poll_not_the_whole_timeout() -> None:
    channel = FakeChannel(misses=1)
    short_polls(channel)
    assert asyncio.run(channel.get_msg(timeout=300)) == {"msg_type": "execute_reply"}
    assert channel.asked == [POLL_S, POLL_S]  # without the wrapper: one poll of 300 s


@pytest.mark.slow
def test_no_message_still_raises_empty_at_the_callers_deadline() -> None:
    channel = FakeChannel(misses=None)
    short_polls(channel)
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=2.2 * POLL_S))
    assert channel.asked[:2] == [POLL_S, POLL_S] and len(channel.asked) == 3
    assert 0 < channel.asked[2] <= 0.2 * POLL_S + 0.05


@pytest.mark.slow
def test_no_timeout_means_wait_for_ever_in_short_polls() -> None:
    channel = FakeChannel(misses=3)
    short_polls(channel)
    asyncio.run(channel.get_msg())
    assert channel.asked == [POLL_S] * 4
