"""noria_tools/partialstate.py runs and lists each partial node's arrays: the path's key
map once, in the reader (the join and the COUNT point to it), hashed (a tenth of the
keys held)."""
from noria_tools import partialstate


def test_partialstate_lists_one_key_map_for_the_path(capsys):
    partialstate.main(["--keys", "20000", "--rows", "20000", "--read", "0.1"])
    out = capsys.readouterr().out
    assert out.startswith("2,000 keys read: RSS")
    nodes = out.split("\n", 1)[1].split("\nn")
    assert [n.split(":")[0].split()[-1] for n in nodes] == ["reader", "join", "aggregate"]
    assert "keymap._table" in nodes[0] and "keymap" not in nodes[1] + nodes[2]  # (hashed)
