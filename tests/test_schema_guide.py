"""The schema guide's code runs exactly as written (docs/guide/schema.md)."""

import re
from pathlib import Path

import pytest

pytest.importorskip("pandas")

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "schema.md"


def test_guide_blocks_run_in_order(capsys):
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    assert len(blocks) == 4
    # The first block is the DataFrame -> private pipeline -> search path.
    assert len([line for line in blocks[0].splitlines() if line.strip()]) <= 16
    namespace = {}
    for block in blocks:
        exec(compile(block, str(GUIDE), "exec"), namespace)
    pipe, search, total = namespace["pipe"], namespace["search"], namespace["total"]
    assert pipe.privacy_spent_.epsilon <= 1.0
    assert pipe.score(namespace["X_test"], namespace["y_test"]) > 0.8
    # The search's total covers every fit, far above the refit's spend.
    refit = search.best_estimator_.privacy_spent_.epsilon
    assert total.epsilon > refit
    assert namespace["encoder"].row_norm_ == 2.0
    # Several steps after the encoder, as make_pipeline takes them.
    assert list(namespace["scaled"].named_steps) == [
        "schemaencoder",
        "dpstandardscaler",
        "dplogisticregression",
    ]
    out = capsys.readouterr().out
    assert "the whole search spent epsilon" in out
