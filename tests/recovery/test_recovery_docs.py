"""docs/recovery.md quotes the worked example's output; they must not drift apart."""
from pathlib import Path

from noria_py.recovery import example

DOC = Path(__file__).resolve().parents[2] / "docs" / "recovery.md"


def test_worked_example_matches_doc():
    text = DOC.read_text()
    block = text.split("<!-- example:begin -->")[1].split("<!-- example:end -->")[0]
    quoted = block.strip().removeprefix("```").removesuffix("```").strip()
    assert quoted == example.run().strip()
