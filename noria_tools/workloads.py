"""The vote workload from the Noria paper, shared by the demo, benchmarks and tests."""
from __future__ import annotations

import numpy as np

SCHEMA = [
    "CREATE TABLE article (id INT PRIMARY KEY, title TEXT)",
    "CREATE TABLE vote (article_id INT, user_id INT)",
]

VIEW_NAME = "ArticleWithVoteCount"
VIEW = (
    "CREATE VIEW ArticleWithVoteCount AS "
    "SELECT article.id, article.title, VoteCount.votes AS votes "
    "FROM article LEFT JOIN "
    "(SELECT vote.article_id, COUNT(vote.user_id) AS votes FROM vote GROUP BY vote.article_id) "
    "AS VoteCount ON article.id = VoteCount.article_id "
    "WHERE article.id = ?"
)

# The same query for an engine that computes it per read (DuckDB), with the key inlined.
READ_SQL = (
    "SELECT article.id, article.title, VoteCount.votes AS votes "
    "FROM article LEFT JOIN "
    "(SELECT article_id, COUNT(user_id) AS votes FROM vote GROUP BY article_id) "
    "AS VoteCount ON article.id = VoteCount.article_id "
    "WHERE article.id = ?"
)


def articles(n: int) -> list[tuple]:
    return [(i, f"article {i}") for i in range(n)]


def votes(n: int, articles: int, seed: int = 1, zipf: float | None = None) -> np.ndarray:
    """An (n, 2) int64 array of (article_id, user_id); uniform or Zipf-skewed articles."""
    rng = np.random.default_rng(seed)
    if zipf:
        ids = (rng.zipf(zipf, n) - 1) % articles
    else:
        ids = rng.integers(0, articles, n)
    users = rng.integers(0, 1 << 30, n)
    return np.stack([ids, users], axis=1).astype(np.int64)


def setup(db, n_articles: int) -> None:
    for sql in SCHEMA:
        db.execute(sql)
    db.execute(VIEW)
    db.table("article").insert(articles(n_articles))
