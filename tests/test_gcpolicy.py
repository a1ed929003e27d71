import gc

import noria_py


def test_tune_gc_freezes_and_makes_full_collections_rare():
    before = gc.get_threshold()
    try:
        noria_py.tune_gc()
        assert gc.get_threshold() == (700, 10, 1000)
        assert gc.get_freeze_count() > 0
        noria_py.tune_gc(young=12_345, full_every=50)
        assert gc.get_threshold() == (12_345, 10, 50)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
