#!/usr/bin/env python3
"""A loopback TCP proxy that counts the bytes it forwards, and can throttle.

    proxy.py LISTEN_PORT TARGET_PORT STATS_FILE [--mbit N] [--delay-ms D]

Every connection to 127.0.0.1:LISTEN_PORT is forwarded to
127.0.0.1:TARGET_PORT.  When a connection closes, one line
"<bytes client to server> <bytes server to client>" is appended to
STATS_FILE.  With --mbit, each direction is a link of N Mbit/s (bytes
are sent one after the other at that rate); with --delay-ms, every chunk
arrives D ms after it was sent (each way).
"""
import argparse
import asyncio
import time


class Link:
    """One direction of one connection: bandwidth, then a fixed delay."""

    def __init__(self, rate, delay):
        self.rate = rate          # bytes per second, 0 for unlimited
        self.delay = delay        # seconds
        self.free_at = 0.0        # when the link has sent what it was given
        self.bytes = 0

    def arrival(self, n):
        now = time.monotonic()
        self.bytes += n
        if self.rate:
            self.free_at = max(now, self.free_at) + n / self.rate
            done = self.free_at
        else:
            done = now
        return done + self.delay


async def pump(reader, writer, link):
    queue = asyncio.Queue()

    async def deliver():
        while True:
            item = await queue.get()
            if item is None:
                break
            at, data = item
            wait = at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        try:
            writer.write_eof()
        except (OSError, RuntimeError):
            pass

    task = asyncio.ensure_future(deliver())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if link.rate == 0 and link.delay == 0:
                writer.write(data)
                link.bytes += len(data)
                await writer.drain()
            else:
                queue.put_nowait((link.arrival(len(data)), data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait(None)
    try:
        await task
    except (ConnectionError, OSError):
        pass


async def handle(client_reader, client_writer, args):
    try:
        server_reader, server_writer = await asyncio.open_connection('127.0.0.1', args.target)
    except OSError:
        client_writer.close()
        return
    rate = args.mbit * 1e6 / 8
    up = Link(rate, args.delay_ms / 1000)
    down = Link(rate, args.delay_ms / 1000)
    await asyncio.gather(pump(client_reader, server_writer, up),
                         pump(server_reader, client_writer, down))
    for w in (client_writer, server_writer):
        try:
            w.close()
        except OSError:
            pass
    with open(args.stats, 'a') as f:
        f.write(f'{up.bytes} {down.bytes}\n')


def main():
    p = argparse.ArgumentParser()
    p.add_argument('listen', type=int)
    p.add_argument('target', type=int)
    p.add_argument('stats')
    p.add_argument('--mbit', type=float, default=0)
    p.add_argument('--delay-ms', type=float, default=0)
    args = p.parse_args()

    async def serve():
        server = await asyncio.start_server(lambda r, w: handle(r, w, args),
                                            '127.0.0.1', args.listen)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


if __name__ == '__main__':
    main()
