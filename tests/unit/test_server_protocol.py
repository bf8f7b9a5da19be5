"""Held writes: one write per response when head and body come together, order kept."""

from __future__ import annotations

import asyncio

from router.server_protocol import HeldWrites


class Recorder:
    def __init__(self) -> None:
        self.sends: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sends.append(data)

    def writelines(self, parts: tuple[bytes, ...]) -> None:
        self.sends.append(b"".join(parts))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_a_head_leaves_with_its_body_and_alone_at_the_end_of_the_iteration() -> None:
    async def main() -> list[bytes]:
        transport = Recorder()
        writes = HeldWrites(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        writes.write(b"head1")
        writes.write(b"body1")
        assert transport.sends == [b"head1body1"]
        writes.write(b"head2")  # a streamed answer whose body is not there yet
        assert transport.sends == [b"head1body1"]
        await asyncio.sleep(0)
        writes.write(b"chunk")
        writes.write(b"last")
        writes.write(b"head3")
        writes.close()  # what was held goes before the close
        assert transport.closed
        return transport.sends

    assert asyncio.run(main()) == [b"head1body1", b"head2", b"chunklast", b"head3"]
