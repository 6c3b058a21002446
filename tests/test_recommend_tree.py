"""recommend.tree: a fitted tree kept as plain data answers exactly as scikit-learn's, explains its path, and
round-trips through JSON bit for bit."""

import json

import numpy as np
import pandas as pd
import pytest

from iodiag.errors import UsageError
from iodiag.recommend.tree import Tree, encode, fit_tree


def _frame():
    rng = np.random.default_rng(1)
    n = 120
    df = pd.DataFrame({
        "chunk_bytes": rng.choice([2**12, 2**16, 2**20, 2**24], n).astype(float),
        "pattern": rng.choice(["slice", "point", "whole"], n),
        "workers": rng.choice([1, 2, 4], n),
    })
    # a rule the tree must find: point reads want small chunks, the rest want big ones
    y = np.where(df["pattern"] == "point", "small", np.where(df["chunk_bytes"] < 2**20, "big", "keep"))
    return df, y


def test_tree_matches_sklearn_and_roundtrips():
    from sklearn.tree import DecisionTreeClassifier

    df, y = _frame()
    tree = fit_tree(df, y, max_depth=4)
    X, names, _ = encode(df)
    ref = DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, y)
    ours = [tree.predict(r) for r in df.to_dict("records")]
    assert ours == list(ref.predict(X))
    back = Tree.from_dict(json.loads(json.dumps(tree.to_dict())))
    assert back == tree
    assert [back.predict(r) for r in df.to_dict("records")] == ours
    assert tree.depth() <= 4


def test_rules_mark_the_path_and_read_categories():
    df, y = _frame()
    tree = fit_tree(df, y)
    row = {"chunk_bytes": 4096.0, "pattern": "point", "workers": 2}
    path = tree.path(row)
    assert any(c.feature == "pattern" and c.op == "is" and c.value == "point" for c in path)
    assert tree.predict(row) == "small"
    lines = tree.rules(highlight=row)
    marked = [ln for ln in lines if ln.startswith("▶")]
    assert len(marked) == len(path) + 1  # every condition on the path plus its leaf
    assert "pattern is point" in "\n".join(marked)
    assert marked[-1].strip().startswith("▶") and "small" in marked[-1]


def test_regressor_leaf_has_spread_and_unseen_category_is_named():
    df, _ = _frame()
    target = np.log2(df["chunk_bytes"].to_numpy()) + (df["pattern"] == "point") * 3.0
    tree = fit_tree(df, target, kind="regressor", max_depth=3)
    lf = tree.leaf({"chunk_bytes": 2.0**20, "pattern": "slice", "workers": 1})
    assert lf.answer == pytest.approx(20.0, abs=1.5) and lf.spread >= 0
    assert tree.known({"chunk_bytes": 1.0, "pattern": "diagonal", "workers": 1})
    assert not tree.known({"chunk_bytes": 1.0, "pattern": "slice", "workers": 1})


def test_bad_input_is_a_usage_error():
    df, y = _frame()
    with pytest.raises(UsageError):
        fit_tree(df, y[:-1])
    with pytest.raises(UsageError):
        Tree.from_dict({"kind": "classifier"})
    tree = fit_tree(df, y)
    with pytest.raises(UsageError, match="workers"):
        tree.predict({"chunk_bytes": 1.0, "pattern": "slice"})
