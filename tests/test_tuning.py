"""``NORIA_TUNING`` sets knobs in a process that imports noria_py (a cluster's workers)."""
import os
import subprocess
import sys

import pytest


def _run(value: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NORIA_TUNING=value)
    return subprocess.run([sys.executable, "-c", "from noria_py import tuning; "
                           "print(tuning.ACK_EVERY, tuning.CHECKPOINT_EVERY, tuning.HEARTBEAT_EVERY)"],
                          env=env, capture_output=True, text=True, timeout=60)


def test_knobs_are_set_from_the_environment():
    out = _run("ACK_EVERY=2, CHECKPOINT_EVERY=1,HEARTBEAT_EVERY=0.5")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "1", "0.5"]


@pytest.mark.parametrize("bad", ["NOPE=1", "ack_every=2", "_override=1", "ACK_EVERY=x"])
def test_a_wrong_setting_is_refused(bad):
    out = _run(bad)
    assert out.returncode != 0 and "ValueError" in out.stderr
