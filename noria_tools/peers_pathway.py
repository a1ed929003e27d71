"""The vote workload on Pathway, for ``noria-py bench peers``.

Pathway (pip install pathway, the ``peers`` extra) is the closest pip-installable
incremental engine. It is fed the same votes through its Python connector, committing
one batch at a time, and maintains the same view (articles LEFT JOIN vote counts); the
time from the first vote to the end of the run, when every batch has been processed, is
its update throughput. Run as ``python -m noria_tools.peers_pathway ARTICLES VOTES BATCH
ZIPF`` (it may live in another environment than noria-py: it needs only numpy and
pathway), printing one JSON line.
"""
from __future__ import annotations

import json
import sys
import time


def run(articles: int, votes: int, batch: int, zipf: float | None) -> dict:
    import numpy as np
    import pandas as pd
    import pathway as pw

    rng = np.random.default_rng(1)              # workloads.votes, repeated: no engine import
    ids = ((rng.zipf(zipf, votes) - 1) % articles) if zipf else rng.integers(0, articles, votes)
    users = rng.integers(0, 1 << 30, votes)
    data = np.stack([ids, users], axis=1).astype(np.int64).tolist()

    class VoteSchema(pw.Schema):
        article_id: int
        user_id: int

    class Votes(pw.io.python.ConnectorSubject):
        def run(self) -> None:
            for i in range(0, len(data), batch):
                for a, u in data[i:i + batch]:
                    self.next(article_id=a, user_id=u)
                self.commit()

    article = pw.debug.table_from_pandas(pd.DataFrame(
        {"aid": range(articles), "title": [f"article {i}" for i in range(articles)]}))
    vote = pw.io.python.read(Votes(), schema=VoteSchema, autocommit_duration_ms=None)
    counts = vote.groupby(pw.this.article_id).reduce(pw.this.article_id,
                                                     votes=pw.reducers.count())
    # ("id" is Pathway's row pointer: the article key is "aid")
    view = article.join_left(counts, article.aid == counts.article_id).select(
        article.aid, article.title, votes=counts.votes)
    pw.io.null.write(view)        # kept up to date, but no Python callback per change
    t0 = time.perf_counter()
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    seconds = time.perf_counter() - t0
    return {"votes_per_s": votes / seconds, "seconds": seconds, "version": pw.__version__}


if __name__ == "__main__":
    a, v, b, z = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    print(json.dumps(run(a, v, b, z or None)))
