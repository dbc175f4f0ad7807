"""app.aio.supervise: the one way a process watches its background tasks (engine and worker)."""

from __future__ import annotations

import asyncio

from app.aio import supervise


async def _until(stop: asyncio.Event) -> None:
    await stop.wait()


async def _fails_after(seconds: float) -> None:
    await asyncio.sleep(seconds)
    raise OSError("lost its connection")


async def test_a_task_that_dies_is_reported_at_once_without_stopping() -> None:
    stop = asyncio.Event()
    calm = asyncio.create_task(_until(stop), name="calm")
    dying = asyncio.create_task(_fails_after(0.01), name="dying")
    died = await asyncio.wait_for(supervise({calm, dying}, stop, "test"), 5)
    assert isinstance(died, OSError) and str(died) == "lost its connection"
    assert not stop.is_set() and not calm.done()  # stopping the rest is the caller's
    stop.set()
    await calm


async def test_a_task_that_just_returns_before_stop_is_a_death_too() -> None:
    stop = asyncio.Event()

    async def returns() -> None:
        await asyncio.sleep(0.01)

    died = await asyncio.wait_for(
        supervise({asyncio.create_task(returns(), name="quitter")}, stop, "test"), 5
    )
    assert isinstance(died, RuntimeError) and "quitter" in str(died)


async def test_stop_returns_nothing() -> None:
    stop = asyncio.Event()
    tasks = {asyncio.create_task(_until(stop), name=f"t{i}") for i in range(3)}
    asyncio.get_running_loop().call_later(0.01, stop.set)
    assert await asyncio.wait_for(supervise(tasks, stop, "test"), 5) is None
    await asyncio.gather(*tasks)


async def test_a_task_ending_because_it_was_stopped_is_no_death() -> None:
    stop = asyncio.Event()
    stop.set()
    task = asyncio.create_task(_until(stop), name="obedient")
    await task
    assert await supervise({task}, stop, "test") is None
