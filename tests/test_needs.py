"""tests/needs.py: a missing requirement (Java, ../shared) skips its tests, except under
CI=true, where it fails them."""
from __future__ import annotations

import re

import pytest

from noria_py import spark
from tests import needs

Skipped = pytest.skip.Exception
Failed = pytest.fail.Exception


@pytest.fixture(params=["ci", "no-ci"])
def ci(request, monkeypatch) -> bool:
    if request.param == "ci":
        monkeypatch.setenv("CI", "true")
    else:
        monkeypatch.delenv("CI", raising=False)
    return request.param == "ci"


def _outcome(fn, *args) -> BaseException:
    """What ``fn`` ends the test with: a failure or a skip, caught either way (a skip
    left to propagate would skip this test, not fail it)."""
    with pytest.raises((Failed, Skipped)) as info:
        fn(*args)
    return info.value


def _check(outcome: BaseException, ci: bool, what: str) -> None:
    assert type(outcome) is (Failed if ci else Skipped), outcome
    assert re.search(what, str(outcome)), outcome
    assert ("CI=true" in str(outcome)) == ci


def test_missing_fails_under_ci_and_skips_otherwise(ci):
    _check(_outcome(needs.missing, "the thing"), ci, "the thing")


@pytest.mark.parametrize("value", ["false", "", "1"])
def test_only_ci_true_counts_as_ci(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    _check(_outcome(needs.missing, "the thing"), False, "the thing")


def test_no_corpus(ci, monkeypatch, tmp_path):
    monkeypatch.setattr(needs, "CORPUS", tmp_path / "nowhere")
    _check(_outcome(needs.corpus), ci, "sqllogictest corpus not found at .*nowhere")
    monkeypatch.setattr(needs, "CORPUS", tmp_path)
    assert needs.corpus() == tmp_path


def test_no_java(ci, monkeypatch):
    def no_java(*args, **kwargs):
        raise spark.SparkUnavailableError("Java was not found: install Java 17 or newer")

    monkeypatch.setattr(spark, "get_session", no_java)
    _check(_outcome(needs.spark_session), ci, "Java was not found")
