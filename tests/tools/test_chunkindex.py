"""noria_tools/chunkindex.py runs and reports the index's size: 2 bytes a (key, batch)
entry plus 4 a key, at 20 rows a key over 20 batches."""
import re

from noria_tools import chunkindex


def test_chunkindex_reports_the_index(capsys):
    chunkindex.main(["--rows", "20000", "--keys", "1000", "--tail", "5000"])
    out = capsys.readouterr().out
    per_row = float(re.search(r"\(([\d.]+) bytes a row\)", out).group(1))
    assert 1.0 < per_row < 2.2, out         # (16 with every row's key and position)
    assert "after 5000 more rows" in out
