"""The cluster's message codec: one 1,000-row message (two ints a row) encoded and
decoded, without and with msgpack framing; each round's result checked.

Run: .venv/bin/python -m pytest bench/test_wire.py --benchmark-only
"""
from __future__ import annotations

import pytest

from noria_py.batch import Batch
from noria_py.runtime.cluster.wire import decode_message, encode_message
from noria_py.runtime.messages import Message
from noria_py.storage.codec import packb, unpackb

ROWS = [(i, i * 7) for i in range(1000)]
MSG = Message("join_3#1", "agg_4#1", Batch(ROWS, [1] * 1000), 123, (4, 9, 8, 7, 0), 7)


def _same(back: Message) -> None:
    assert back.batch.rows == ROWS and back.batch.signs == [1] * 1000
    assert (back.src, back.dst, back.time, back.clock, back.low) == \
        (MSG.src, MSG.dst, MSG.time, MSG.clock, MSG.low)


@pytest.mark.parametrize("framed", [False, True], ids=["codec", "codec+msgpack"])
def test_message_round_trip_1000_rows(benchmark, framed):
    benchmark.group = "a 1,000-row message: encode + decode"
    if framed:
        def trip() -> Message:
            return decode_message(unpackb(packb(encode_message(MSG))))
    else:
        def trip() -> Message:
            return decode_message(encode_message(MSG))
    _same(benchmark(trip))
