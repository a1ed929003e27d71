import pytest

from sql_frontend import DictCatalog, parse


def make_catalog() -> DictCatalog:
    cat = DictCatalog()
    for ddl in (
        "CREATE TABLE t (a INT PRIMARY KEY, b INT, c TEXT, d FLOAT)",
        "CREATE TABLE u (x INT NOT NULL, y TEXT, z DATE)",
        "CREATE TABLE w (p INT, q INT, r TIMESTAMP)",
        "CREATE TABLE article (id INT PRIMARY KEY, title TEXT)",
        "CREATE TABLE vote (article_id INT, user_id INT)",
    ):
        st = parse(ddl, cat)
        cat.tables[st.schema.name] = st.schema
    return cat


def add_view(cat: DictCatalog, sql: str):
    st = parse(sql, cat)
    cat.views[st.name] = st.query
    return st


@pytest.fixture
def cat() -> DictCatalog:
    return make_catalog()
