"""Parser throughput: the reference parser against nats-py's protocol parser, on the same stream.

The stream: 200,000 server operations, 90% MSG with 64-byte payloads (half of them with a reply
subject) and 10% HMSG with one header, fed in 64 KiB chunks. Prints ops/s for both parsers (best
of several rounds, so a busy machine shows up as spread, not as a wrong ratio) and the ratio.

    python bench/parser_bench.py [--ops N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Callable
from importlib.metadata import version

from nats.protocol.parser import Parser as NatsPyParser

from nats_conformance.conformance.protocol import Direction, HMsg, Msg, Parser, encode

CHUNK = 64 * 1024


def build_stream(n_ops: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    header = b"NATS/1.0\r\nX-Trace: abc123\r\n\r\n"
    ops = []
    for i in range(n_ops):
        payload = rng.randbytes(64)
        subject = f"bench.subject.{i % 100}"
        sid = str(i % 10 + 1)
        if i % 10 == 9:
            ops.append(encode(HMsg(subject, sid, None, header, payload)))
        else:
            ops.append(encode(Msg(subject, sid, f"_INBOX.reply.{i}" if i % 2 else None, payload)))
    return b"".join(ops)


def chunks(data: bytes) -> list[bytes]:
    return [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]


def run_reference(parts: list[bytes]) -> int:
    parser = Parser(Direction.SERVER)
    count = 0
    for part in parts:
        count += len(parser.feed(part))
    return count


class _Sink:
    """What nats-py's parser calls back into: counts messages, does nothing else."""

    def __init__(self) -> None:
        self.count = 0

    async def _process_msg(self, sid, subject, reply, payload, hdr) -> None:
        self.count += 1

    async def _process_ping(self) -> None:
        self.count += 1

    async def _process_pong(self) -> None:
        self.count += 1

    async def _process_info(self, info) -> None:
        self.count += 1

    async def _process_err(self, err) -> None:
        self.count += 1


def run_nats_py(parts: list[bytes]) -> int:
    sink = _Sink()
    parser = NatsPyParser(sink)

    async def feed() -> None:
        for part in parts:
            await parser.parse(part)

    asyncio.run(feed())
    return sink.count


def measure(
    runs: dict[str, Callable[[list[bytes]], int]], parts: list[bytes], n_ops: int, rounds: int
) -> dict[str, list[float]]:
    """Seconds per round for each parser, rounds interleaved so background load hits both alike."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            count = run(parts)
            times[name].append(time.perf_counter() - start)
            if count != n_ops:
                raise SystemExit(f"{name} parsed {count} operations, expected {n_ops}")
    return times


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--ops", type=int, default=200_000)
    args.add_argument("--rounds", type=int, default=5)
    opts = args.parse_args()
    data = build_stream(opts.ops)
    parts = chunks(data)
    print(f"stream: {opts.ops} ops, {len(data)} bytes, {len(parts)} chunks of {CHUNK} bytes")
    nats_py = f"nats-py {version('nats-py')}"
    times = measure(
        {"reference": run_reference, nats_py: run_nats_py}, parts, opts.ops, opts.rounds
    )
    best = {name: opts.ops / min(t) for name, t in times.items()}
    median = {name: opts.ops / statistics.median(t) for name, t in times.items()}
    for name in times:
        print(
            f"{name + ' parser:':<24} {best[name]:>10,.0f} ops/s best, "
            f"{median[name]:>10,.0f} median"
        )
    print(f"ratio reference / {nats_py}: {best['reference'] / best[nats_py]:.2f}x best, "
          f"{median['reference'] / median[nats_py]:.2f}x median")  # fmt: skip


if __name__ == "__main__":
    main()
