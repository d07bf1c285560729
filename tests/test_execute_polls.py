"""tinytorch.grading.execute.short_polls: a message whose wake-up one long poll missed is still read.

A fake channel stands in for jupyter_client's AsyncZMQSocketChannel: its get_msg(timeout) waits
`timeout` (asyncio.sleep) and raises Empty until the message has "arrived", as a missed zmq
wake-up does. What is checked is which timeouts the wrapper asked for, not how long anything took:
the channel's waits advance a fake clock (the wrapper's `time.monotonic`) and never sleep, so a
busy machine, whose real waits overshoot, cannot change what is asked.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from queue import Empty
from types import SimpleNamespace

import pytest

from tinytorch.grading.execute import POLL_S, short_polls

execute = importlib.import_module("tinytorch.grading.execute")  # the module, not the function


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    """The wrapper's clock, and only its own: asyncio's loop keeps the real one."""
    fake = FakeClock()
    monkeypatch.setattr(execute, "time", SimpleNamespace(monotonic=fake.monotonic))
    yield fake


class FakeChannel:
    def __init__(self, misses: int | None, clock: FakeClock) -> None:
        self.misses = misses  # polls that miss the message before one sees it (None: never)
        self.clock = clock
        self.asked: list[float | None] = []

    async def get_msg(self, timeout: float | None = None) -> dict:
        self.asked.append(timeout)
        if self.misses is not None and len(self.asked) > self.misses:
            return {"msg_type": "execute_reply"}
        await asyncio.sleep(0)
        self.clock.now += timeout or 0  # the poll waited its whole timeout, and no more
        raise Empty


def test_a_missed_wake_up_costs_one_short_poll_not_the_whole_timeout(clock: FakeClock) -> None:
    channel = FakeChannel(misses=1, clock=clock)
    short_polls(channel)
    assert asyncio.run(channel.get_msg(timeout=300)) == {"msg_type": "execute_reply"}
    assert channel.asked == [POLL_S, POLL_S]  # without the wrapper: one poll of 300 s


@pytest.mark.timing
def test_no_message_still_raises_empty_at_the_callers_deadline(clock: FakeClock) -> None:
    channel = FakeChannel(misses=None, clock=clock)
    short_polls(channel)
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=2.2 * POLL_S))
    assert channel.asked[:2] == [POLL_S, POLL_S] and len(channel.asked) == 3
    assert channel.asked[2] == pytest.approx(0.2 * POLL_S)
    assert clock.now == pytest.approx(1000.0 + 2.2 * POLL_S)  # it gave up at the deadline


def test_no_timeout_means_wait_for_ever_in_short_polls(clock: FakeClock) -> None:
    channel = FakeChannel(misses=3, clock=clock)
    short_polls(channel)
    asyncio.run(channel.get_msg())
    assert channel.asked == [POLL_S] * 4
