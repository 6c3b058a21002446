"""Small decision trees as plain data: fit with scikit-learn, keep, explain and apply without it.

A tree is trained once (``fit_tree``, which imports scikit-learn) and then lives as a ``Tree``: plain tuples of
node arrays, the feature names and the leaf answers.  ``Tree.to_dict``/``Tree.from_dict`` round-trip it through JSON
exactly (floats as ``float.hex``), so a shipped model is a text file that can be rebuilt bit for bit and read
without importing scikit-learn (its import costs ~0.5 s; a report must not pay that).

Features are given as a pandas DataFrame.  Numeric columns are used as they are; object/str/bool/category columns
are one-hot encoded as ``name=value`` columns, and a split on one of those reads "name is value" / "name is not
value" in the rules.  ``Tree.path(row)`` gives the conditions one row meets on its way to a leaf, and
``Tree.rules(highlight=row)`` prints the whole tree as indented if/else text with that row's path marked, which is
how a recommendation explains itself.

Everything here is pure: no printing, no files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..errors import DependencyMissing, UsageError
from ..units import fmt_pct

LEAF = -1
MAX_DEPTH = 4


def _hex(x: float) -> str:
    return float(x).hex()


def _unhex(s: str | float) -> float:
    return float.fromhex(s) if isinstance(s, str) else float(s)


@dataclass(frozen=True)
class Condition:
    """One test on the way from the root to a leaf, e.g. ``chunk_bytes <= 1048576``."""

    feature: str  # the input column (for a one-hot split: the categorical column)
    op: str  # "<=", ">", "is", "is not"
    value: Any  # threshold (float) or category value

    def text(self, fmt: Callable[[str, float], str] | None = None) -> str:
        if self.op in ("is", "is not"):
            return f"{self.feature} {self.op} {self.value}"
        shown = fmt(self.feature, self.value) if fmt else _num(self.value)
        return f"{self.feature} {self.op} {shown}"


def _num(v: float) -> str:
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.4g}"


@dataclass(frozen=True)
class Leaf:
    """Where a row ends: the answer, how many training rows (weight) reached it, and how pure it is."""

    node: int
    answer: Any  # class label (classifier) or value (regressor)
    samples: float  # training weight that reached this leaf
    share: float  # classifier: share of that weight with this answer; regressor: 1.0
    spread: float  # regressor: standard deviation of the training targets in the leaf; classifier: 0.0


@dataclass(frozen=True)
class Tree:
    """A fitted tree as plain data (scikit-learn's node arrays, with inputs named)."""

    kind: str  # "classifier" or "regressor"
    features: tuple[str, ...]  # encoded columns: "x" or "name=value"
    inputs: tuple[str, ...]  # the DataFrame columns the tree was trained on, in order
    categories: Mapping[str, tuple[str, ...]]  # categorical input -> the values seen in training
    classes: tuple[Any, ...]  # classifier labels (empty for a regressor)
    left: tuple[int, ...]
    right: tuple[int, ...]
    feature: tuple[int, ...]  # index into ``features`` (LEAF at leaves)
    threshold: tuple[float, ...]
    value: tuple[tuple[float, ...], ...]  # per node: class weights (classifier) or (mean, std) (regressor)
    weight: tuple[float, ...]  # training weight per node

    # -- applying -----------------------------------------------------------------------------------------
    def _encoded(self, row: Mapping[str, Any]) -> list[float]:
        missing = [c for c in self.inputs if c not in row]
        if missing:
            raise UsageError(f"the model needs the feature(s) {', '.join(missing)}",
                             hint="give every feature the model was trained on")
        out = []
        for f in self.features:
            if "=" in f and f.split("=", 1)[0] in self.categories:
                name, val = f.split("=", 1)
                out.append(1.0 if str(row[name]) == val else 0.0)
            else:
                out.append(float(row[f]))
        return out

    def leaf(self, row: Mapping[str, Any]) -> Leaf:
        return self._walk(row)[1]

    def path(self, row: Mapping[str, Any]) -> list[Condition]:
        return self._walk(row)[0]

    def predict(self, row: Mapping[str, Any]) -> Any:
        return self.leaf(row).answer

    def known(self, row: Mapping[str, Any]) -> list[str]:
        """Reasons the row is outside what the tree was trained on (empty when it is inside)."""
        why = []
        for name, seen in self.categories.items():
            if name in row and str(row[name]) not in seen:
                why.append(f"{name} = {row[name]} was never seen in training (seen: {', '.join(seen)})")
        return why

    def _walk(self, row: Mapping[str, Any]) -> tuple[list[Condition], Leaf]:
        x = self._encoded(row)
        node, conds = 0, []
        while self.left[node] != LEAF:
            f = self.feature[node]
            go_left = x[f] <= self.threshold[node]
            conds.append(self._condition(node, go_left))
            node = self.left[node] if go_left else self.right[node]
        return conds, self._leaf(node)

    def _condition(self, node: int, left: bool) -> Condition:
        name = self.features[self.feature[node]]
        if "=" in name and name.split("=", 1)[0] in self.categories:
            col, val = name.split("=", 1)
            return Condition(col, "is not" if left else "is", val)
        return Condition(name, "<=" if left else ">", self.threshold[node])

    def _leaf(self, node: int) -> Leaf:
        v = self.value[node]
        if self.kind == "classifier":
            total = sum(v) or 1.0
            k = max(range(len(v)), key=lambda i: (v[i], -i))
            return Leaf(node, self.classes[k], self.weight[node], v[k] / total, 0.0)
        return Leaf(node, v[0], self.weight[node], 1.0, v[1] if len(v) > 1 else 0.0)

    # -- explaining ---------------------------------------------------------------------------------------
    def depth(self) -> int:
        def d(n: int) -> int:
            return 0 if self.left[n] == LEAF else 1 + max(d(self.left[n]), d(self.right[n]))
        return d(0)

    def _answers(self, node: int) -> set:
        if self.left[node] == LEAF:
            return {self._leaf(node).answer}
        return self._answers(self.left[node]) | self._answers(self.right[node])

    def _ends(self, node: int, collapse: bool) -> bool:
        """Whether ``node`` is shown as a leaf: a leaf, or (``collapse``) a split whose leaves all give one answer."""
        return self.left[node] == LEAF or (collapse and self.kind == "classifier" and len(self._answers(node)) == 1)

    def rules(self, *, highlight: Mapping[str, Any] | None = None, fmt: Callable[[str, float], str] | None = None,
              answer: Callable[[Leaf], str] | None = None, marker: str = "▶", collapse: bool = False) -> list[str]:
        """The tree as indented if/else lines; with ``highlight`` the lines on that row's path start with ``marker``.
        ``collapse`` shows a split whose leaves all give the same class as one leaf (its splits change nothing)."""
        on_path: set[tuple[int, bool]] = set()
        end = None
        if highlight is not None:
            x = self._encoded(highlight)
            node = 0
            while self.left[node] != LEAF:
                go_left = x[self.feature[node]] <= self.threshold[node]
                on_path.add((node, go_left))
                node = self.left[node] if go_left else self.right[node]
            end = node
        say = answer or (lambda lf: _default_answer(self.kind, lf))
        pad = " " * len(marker)
        lines: list[str] = []

        def emit(node: int, depth: int) -> None:
            ind = "  " * depth
            if self._ends(node, collapse):
                mark = marker if node == end or (node, True) in on_path or (node, False) in on_path else pad
                lines.append(f"{mark} {ind}→ {say(self._leaf(node))}")
                return
            for branch, child in ((True, self.left[node]), (False, self.right[node])):
                mark = marker if (node, branch) in on_path else pad
                lines.append(f"{mark} {ind}if {self._condition(node, branch).text(fmt)}:")
                emit(child, depth + 1)

        emit(0, 0)
        return lines

    def leaves(self, *, collapse: bool = False) -> list[tuple[list[Condition], Leaf]]:
        """Every leaf with the conditions on the way to it, left to right (``collapse``: as in ``rules``)."""
        out: list[tuple[list[Condition], Leaf]] = []

        def walk(node: int, conds: list[Condition]) -> None:
            if self._ends(node, collapse):
                out.append((conds, self._leaf(node)))
                return
            walk(self.left[node], conds + [self._condition(node, True)])
            walk(self.right[node], conds + [self._condition(node, False)])

        walk(0, [])
        return out

    # -- keeping ------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "features": list(self.features),
            "inputs": list(self.inputs),
            "categories": {k: list(v) for k, v in self.categories.items()},
            "classes": list(self.classes),
            "left": list(self.left),
            "right": list(self.right),
            "feature": list(self.feature),
            "threshold": [_hex(t) for t in self.threshold],
            "value": [[_hex(v) for v in vals] for vals in self.value],
            "weight": [_hex(w) for w in self.weight],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Tree":
        try:
            n = len(d["left"])
            t = cls(
                kind=str(d["kind"]),
                features=tuple(d["features"]),
                inputs=tuple(d["inputs"]),
                categories={k: tuple(v) for k, v in d["categories"].items()},
                classes=tuple(d["classes"]),
                left=tuple(int(i) for i in d["left"]),
                right=tuple(int(i) for i in d["right"]),
                feature=tuple(int(i) for i in d["feature"]),
                threshold=tuple(_unhex(x) for x in d["threshold"]),
                value=tuple(tuple(_unhex(v) for v in vals) for vals in d["value"]),
                weight=tuple(_unhex(w) for w in d["weight"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"not a tree model ({type(exc).__name__}: {exc})") from None
        if t.kind not in ("classifier", "regressor") or not all(
                len(a) == n for a in (t.right, t.feature, t.threshold, t.value, t.weight)):
            raise UsageError("not a tree model (inconsistent node arrays)")
        return t


def _default_answer(kind: str, lf: Leaf) -> str:
    if kind == "classifier":
        return f"{lf.answer}  ({fmt_pct(lf.share)} of {lf.samples:g} training runs)"
    return f"{lf.answer:.3g} ± {lf.spread:.2g}  ({lf.samples:g} training runs)"


def encode(frame, categorical: Sequence[str] | None = None) -> tuple[Any, tuple[str, ...], dict[str, tuple[str, ...]]]:
    """(matrix, encoded feature names, categories) for a DataFrame: numbers as they are, other columns one-hot."""
    import numpy as np

    cols, names, cats = [], [], {}
    catset = set(categorical or ())
    for c in frame.columns:
        s = frame[c]
        is_cat = c in catset or not (s.dtype.kind in "iuf")
        if is_cat:
            vals = tuple(sorted({str(v) for v in s.tolist()}))
            cats[c] = vals
            sv = s.astype(str).to_numpy()
            for v in vals:
                cols.append((sv == v).astype("f8"))
                names.append(f"{c}={v}")
        else:
            arr = s.to_numpy(dtype="f8")
            if not np.all(np.isfinite(arr)):
                raise UsageError(f"feature {c!r} has missing or infinite values",
                                 hint="fill or drop those rows before training")
            cols.append(arr)
            names.append(str(c))
    if not cols:
        raise UsageError("no features to train on")
    return np.column_stack(cols), tuple(names), cats


def fit_tree(frame, target: Sequence[Any], *, kind: str = "classifier", max_depth: int = MAX_DEPTH,
             sample_weight: Sequence[float] | None = None, min_samples_leaf: int = 1,
             categorical: Sequence[str] | None = None, random_state: int = 0,
             min_weight_fraction_leaf: float = 0.0) -> Tree:
    """Fit a depth-limited tree on ``frame`` (one row per training example) and return it as a ``Tree``.
    ``min_weight_fraction_leaf``: no leaf holds less than this share of the total weight (no rule for a sliver)."""
    try:
        from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
    except ImportError:  # pragma: no cover - the ml extra installs it
        raise DependencyMissing("training a tree needs scikit-learn",
                                hint="pip install 'iodiag[ml]'") from None
    import numpy as np

    if kind not in ("classifier", "regressor"):
        raise UsageError(f"unknown tree kind {kind!r}; use classifier or regressor")
    if len(frame) == 0 or len(frame) != len(target):
        raise UsageError(f"{len(frame)} feature rows for {len(target)} targets: nothing to train on",
                         hint="give one target per row")
    X, names, cats = encode(frame, categorical)
    y = np.asarray(list(target), dtype=object if kind == "classifier" else "f8")
    if kind == "classifier":
        y = y.astype(str)
        est = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=min_samples_leaf,
                                     min_weight_fraction_leaf=min_weight_fraction_leaf, random_state=random_state)
    else:
        est = DecisionTreeRegressor(max_depth=max_depth, min_samples_leaf=min_samples_leaf,
                                    min_weight_fraction_leaf=min_weight_fraction_leaf, random_state=random_state)
    sw = None if sample_weight is None else np.asarray(list(sample_weight), dtype="f8")
    est.fit(X, y, sample_weight=sw)
    t = est.tree_
    n = t.node_count
    wts = t.weighted_n_node_samples
    if kind == "classifier":
        # per node: class weights (scikit-learn >= 1.4 keeps fractions, older versions weights: normalise both)
        vals = tuple(tuple(float(v) / float(t.value[i][0].sum() or 1.0) * float(wts[i]) for v in t.value[i][0])
                     for i in range(n))
        classes = tuple(str(c) for c in est.classes_)
    else:
        leaf_of = est.apply(X)
        yv = y.astype("f8")
        wv = np.ones(len(yv)) if sw is None else sw
        spread = np.zeros(n)
        for node in np.unique(leaf_of):
            m = leaf_of == node
            mu = np.average(yv[m], weights=wv[m])
            spread[node] = math.sqrt(float(np.average((yv[m] - mu) ** 2, weights=wv[m])))
        vals = tuple((float(t.value[i][0][0]), float(spread[i])) for i in range(n))
        classes = ()
    return Tree(
        kind=kind,
        features=names,
        inputs=tuple(str(c) for c in frame.columns),
        categories=cats,
        classes=classes,
        left=tuple(int(i) for i in t.children_left),
        right=tuple(int(i) for i in t.children_right),
        feature=tuple(int(f) if t.children_left[i] != LEAF else LEAF for i, f in enumerate(t.feature)),
        threshold=tuple(float(x) if t.children_left[i] != LEAF else -2.0 for i, x in enumerate(t.threshold)),
        value=vals,
        weight=tuple(float(w) for w in wts),
    )
