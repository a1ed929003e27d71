"""A NEXMark-shaped workload (persons, auctions, bids) for ``noria-py bench regimes
--workload nexmark``: the queries' shapes without their windows, as issue 19 asks.

- ``q3``: local item suggestion, a join of auctions and their sellers with filters on
  both sides (NEXMark Q3);
- ``q4``: the average final price per category, the final price being an auction's
  highest bid (Q4 without the window: an extremum per auction under an aggregate);
- ``q6``: per seller, the average final price of the auctions sold (the highest bid at
  or above the reserve) and how many (Q6 without the last-ten window);
- ``top_bids``: the ten highest bids (a TopK; ties broken by time, which is unique);
- ``hot``: bids per auction (a COUNT shard, what the failure scenarios fail first).

Events come as NEXMark's generator makes them, 1 person : 3 auctions : 46 bids, from
one seeded stream: an auction's seller is a person already written, a bid's auction and
bidder already written. ``NexmarkBed.check`` compares every view with DuckDB running the
same queries over every row written (not timed by the benchmark).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SCHEMA = [
    "CREATE TABLE person (id INT PRIMARY KEY, name TEXT, city TEXT, state TEXT)",
    "CREATE TABLE auction (id INT PRIMARY KEY, seller INT, category INT, initial_bid INT, "
    "reserve INT)",
    "CREATE TABLE bid (auction INT, bidder INT, price INT, ts INT)",
]

VIEWS = {
    "q3": "SELECT p.name, p.city, p.state, a.id FROM auction a JOIN person p "
          "ON a.seller = p.id WHERE a.category = 10 "
          "AND (p.state = 'OR' OR p.state = 'ID' OR p.state = 'CA')",
    "q4": "SELECT m.category, AVG(m.final) AS avg_final FROM (SELECT a.id, a.category, "
          "MAX(b.price) AS final FROM auction a JOIN bid b ON a.id = b.auction "
          "GROUP BY a.id, a.category) AS m GROUP BY m.category",
    "q6": "SELECT m.seller, AVG(m.final) AS avg_final, COUNT(*) AS sold FROM (SELECT a.id, "
          "a.seller, MAX(b.price) AS final FROM auction a JOIN bid b ON a.id = b.auction "
          "WHERE b.price >= a.reserve GROUP BY a.id, a.seller) AS m GROUP BY m.seller",
    "top_bids": "SELECT auction, bidder, price, ts FROM bid ORDER BY price DESC, ts DESC "
                "LIMIT 10",
    "hot": "SELECT auction, COUNT(*) AS bids FROM bid GROUP BY auction",
}

STATES = ("OR", "ID", "CA", "WA", "NV", "AZ", "UT", "NM")
CITIES = ("Portland", "Boise", "Fresno", "Seattle", "Reno", "Tucson", "Provo", "Taos")
CATEGORIES = 20
#: of every 50 events: 1 person, 3 auctions, 46 bids (NEXMark's proportions)
PERSON, AUCTION, BID = 1, 3, 46


def setup(db: Any) -> None:
    for sql in SCHEMA:
        db.execute(sql)
    for name, sql in VIEWS.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")


@dataclass
class NexmarkBed:
    """A NEXMark database and every row written to it (``write``), for ``check``."""

    db: Any
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(19))
    persons: list[tuple] = field(default_factory=list)
    auctions: list[tuple] = field(default_factory=list)
    bids: list[np.ndarray] = field(default_factory=list)
    ts: int = 0

    def batches(self, events: int, per_insert: int) -> list[list[tuple[str, list[tuple]]]]:
        """``events`` events in the NEXMark proportions, as inserts of about
        ``per_insert`` events each: per insert, the (table, rows) to write, persons first
        (an auction's seller is written before it, a bid's auction and bidder too). The
        rows are remembered here as if written."""
        out: list[list[tuple[str, list[tuple]]]] = []
        for start in range(0, events, per_insert):
            n = min(per_insert, events - start)
            n_p = max(1, round(n * PERSON / 50)) if not self.persons else round(n * PERSON / 50)
            n_a = max(1, round(n * AUCTION / 50)) if not self.auctions else round(n * AUCTION / 50)
            n_b = max(0, n - n_p - n_a)
            rng = self.rng
            p0, a0 = len(self.persons), len(self.auctions)
            people: list[tuple] = [(p0 + i, f"person {p0 + i}", CITIES[c], STATES[s]) for i, (c, s) in
                      enumerate(zip(rng.integers(0, len(CITIES), n_p).tolist(),
                                    rng.integers(0, len(STATES), n_p).tolist()))]
            self.persons += people
            sellers = rng.integers(0, len(self.persons), n_a)
            cats = rng.integers(0, CATEGORIES, n_a)
            initial = rng.integers(1, 100, n_a)
            reserve = initial + rng.integers(0, 1000, n_a)
            items: list[tuple] = [(a0 + i, int(s), int(c), int(b), int(r)) for i, (s, c, b, r) in
                     enumerate(zip(sellers, cats, initial, reserve))]
            self.auctions += items
            bids = np.stack([rng.integers(0, len(self.auctions), n_b),
                             rng.integers(0, len(self.persons), n_b),
                             rng.integers(1, 2000, n_b),
                             np.arange(self.ts, self.ts + n_b)], axis=1).astype(np.int64)
            self.ts += n_b
            self.bids.append(bids)
            bid_rows: list[tuple] = [tuple(r) for r in bids.tolist()]
            out.append([("person", people), ("auction", items), ("bid", bid_rows)])
        return out

    def write(self, events: int, per_insert: int = 100) -> None:
        """``events`` more events, ``per_insert`` at a time."""
        for insert in self.batches(events, per_insert):
            for table, rows in insert:
                if rows:
                    self.db.table(table).insert(rows)

    def check(self) -> None:
        """Every view against DuckDB over every row written; AssertionError naming the
        first view that differs."""
        import duckdb
        import pyarrow as pa
        con = duckdb.connect()
        try:
            people = pa.table(dict(zip(("id", "name", "city", "state"),
                                       map(list, zip(*self.persons)))))
            items = pa.table(dict(zip(("id", "seller", "category", "initial_bid", "reserve"),
                                      map(list, zip(*self.auctions)))))
            bids = np.concatenate(self.bids) if self.bids else np.zeros((0, 4), np.int64)
            bid = pa.table({k: bids[:, i] for i, k in
                            enumerate(("auction", "bidder", "price", "ts"))})
            for name, t in (("person", people), ("auction", items), ("bid", bid)):
                con.register(name, t)
            for name, sql in VIEWS.items():
                want = _normal(con.execute(sql).fetchall())
                got = _normal(self.db.view(name).all())
                assert got == want, (f"view {name}: {len(got)} rows, DuckDB {len(want)}; "
                                     f"first difference {_first_difference(got, want)}")
        finally:
            con.close()


def bed(db: Any, events: int, per_insert: int = 1000) -> NexmarkBed:
    """A NEXMark database over ``events`` events (``setup`` already run on ``db``)."""
    b = NexmarkBed(db)
    b.write(events, per_insert)
    return b


def _normal(rows: list) -> list[tuple]:
    """Rows comparable across engines: floats rounded to 9 significant digits, sorted."""
    def value(v: Any) -> Any:
        if isinstance(v, float) and math.isfinite(v):
            return float(f"{v:.9g}")
        return v
    return sorted((tuple(value(v) for v in r) for r in rows), key=repr)


def _first_difference(got: list[tuple], want: list[tuple]) -> str:
    missing = sorted(set(want) - set(got), key=repr)[:3]
    extra = sorted(set(got) - set(want), key=repr)[:3]
    return f"missing {missing}, extra {extra}"
