"""agentrio/guest.py: Trio as a guest of asyncio, both ways across, and lifetimes."""

from __future__ import annotations

import asyncio

import pytest
import trio

from agentrio.guest import GuestPortal, run_with_guest


def test_calls_cross_both_ways() -> None:
    seen: list[str] = []

    async def host(portal: GuestPortal) -> None:
        got = asyncio.get_running_loop().create_future()
        while not portal.to_trio(lambda: got.set_result("from trio")):
            await asyncio.sleep(0.01)
        seen.append(await got)
        await asyncio.sleep(3600)  # ended by the guest's end

    async def guest(portal: GuestPortal) -> None:
        async def on_asyncio(x: int) -> int:
            await asyncio.sleep(0.01)
            return x * 2

        seen.append(f"doubled {await portal.to_asyncio(on_asyncio, 21)}")
        await trio.sleep(0.1)

    asyncio.run(run_with_guest(host, guest))
    assert seen == ["from trio", "doubled 42"] or seen == ["doubled 42", "from trio"]


def test_a_failing_guest_stops_the_host_and_raises() -> None:
    async def host(portal: GuestPortal) -> None:
        await asyncio.sleep(3600)

    async def guest(portal: GuestPortal) -> None:
        raise ValueError("guest broke")

    with pytest.raises(ValueError, match="guest broke"):
        asyncio.run(run_with_guest(host, guest))


def test_a_returning_host_cancels_the_guest() -> None:
    ended: list[str] = []

    async def host(portal: GuestPortal) -> None:
        await asyncio.sleep(0.05)

    async def guest(portal: GuestPortal) -> None:
        try:
            await trio.sleep_forever()
        finally:
            ended.append("guest cancelled")

    asyncio.run(run_with_guest(host, guest))
    assert ended == ["guest cancelled"]


def test_asyncio_errors_reach_the_trio_caller() -> None:
    async def host(portal: GuestPortal) -> None:
        await asyncio.sleep(3600)

    async def guest(portal: GuestPortal) -> None:
        async def broken() -> None:
            raise KeyError("on asyncio")

        with pytest.raises(KeyError):
            await portal.to_asyncio(broken)

    asyncio.run(run_with_guest(host, guest))
