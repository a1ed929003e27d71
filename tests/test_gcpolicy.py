import gc

import noria_py


def test_tune_gc_freezes_and_raises_the_young_threshold():
    before = gc.get_threshold()
    try:
        noria_py.tune_gc(young=12_345)
        assert gc.get_threshold()[0] == 12_345
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
