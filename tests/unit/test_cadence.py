"""Fixed-rate pacing: beats start ``interval`` apart whatever the work between them took."""

from __future__ import annotations

import asyncio

import pytest

from monitor.workers.cadence import Cadence


class DrivenClock:
    """A monotonic clock the test moves; ``sleep`` advances it by the amount slept."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def _cadence(clock: DrivenClock, interval: float = 0.5) -> Cadence:
    return Cadence(interval, monotonic=clock.monotonic, sleep=clock.sleep)


def test_the_work_between_beats_comes_out_of_the_wait() -> None:
    clock = DrivenClock()
    cadence = _cadence(clock)
    beats: list[float] = []

    async def loop() -> None:
        cadence.start()
        for work in (0.1, 0.3, 0.0, 0.45):
            clock.now += work
            await cadence.wait()
            beats.append(round(clock.now, 6))

    asyncio.run(loop())
    assert beats == [100.5, 101.0, 101.5, 102.0]
    assert clock.slept == [0.4, 0.2, 0.5, 0.05]


def test_an_overrun_rests_a_tenth_of_the_interval_and_the_schedule_restarts_from_there() -> None:
    clock = DrivenClock()
    cadence = _cadence(clock)
    beats: list[float] = []

    async def loop() -> None:
        cadence.start()
        for work in (1.7, 0.1, 0.48):
            clock.now += work
            await cadence.wait()
            beats.append(round(clock.now, 6))

    asyncio.run(loop())
    # no catch-up burst of three beats after the 1.7 s overrun, and no beat back to back
    assert beats == [101.75, 102.25, 102.78]
    assert clock.slept == [0.05, 0.4, 0.05]


def test_min_rest_zero_beats_at_once_after_an_overrun() -> None:
    clock = DrivenClock()
    cadence = Cadence(0.5, min_rest=0, monotonic=clock.monotonic, sleep=clock.sleep)

    async def loop() -> None:
        cadence.start()
        clock.now += 1.7
        await cadence.wait()

    asyncio.run(loop())
    assert (clock.now, clock.slept) == (101.7, [])


def test_the_first_wait_without_a_start_does_not_sleep() -> None:
    clock = DrivenClock()
    cadence = _cadence(clock)
    asyncio.run(cadence.wait())
    assert clock.slept == []


def test_an_early_instant_before_the_beat_ends_the_sleep_there_and_the_beat_still_comes() -> None:
    clock = DrivenClock()
    cadence = _cadence(clock, interval=1.0)
    woke: list[tuple[bool, float]] = []

    async def loop() -> None:
        cadence.start()  # beat at 100.0; the next at 101.0
        woke.append((await cadence.wait(early=100.3), round(clock.now, 6)))
        clock.now += 0.2  # an early sweep's work
        woke.append((await cadence.wait(early=100.8), round(clock.now, 6)))
        woke.append((await cadence.wait(early=101.5), round(clock.now, 6)))  # after the beat: ignored
        woke.append((await cadence.wait(), round(clock.now, 6)))

    asyncio.run(loop())
    assert woke == [(False, 100.3), (False, 100.8), (True, 101.0), (True, 102.0)]


def test_an_early_instant_already_passed_wakes_at_once() -> None:
    clock = DrivenClock()
    cadence = _cadence(clock, interval=1.0)

    async def loop() -> bool:
        cadence.start()
        clock.now += 0.4
        return await cadence.wait(early=100.2)

    assert asyncio.run(loop()) is False
    assert (clock.now, clock.slept) == (100.4, [0.0])


@pytest.mark.parametrize("interval", [0, -1.0])
def test_an_interval_must_be_positive(interval: float) -> None:
    with pytest.raises(ValueError, match=r"interval: .* must be positive"):
        Cadence(interval)
