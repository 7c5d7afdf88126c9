"""The ledger's budget rule against a brute-force model of who spent what (hypothesis).

The model: a table is a tree of locations (directories and, at the leaves,
files); every row lives in one file. A charge ``(location, ε)`` is paid by
every row under that location. With ε per row, the most any one row has spent
under ``root`` is the largest sum over the charges above one file under it;
with a privacy unit naming a person, a person may own a row in every file, so
every charge overlapping ``root`` adds up.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ldp_dask.ledger.budget import overlaps, person_groups, spent_per_person

BASE = "s3://bucket/t"


@st.composite
def trees(draw: st.DrawFn) -> list[str]:
    """Locations of a table: BASE, its children and grandchildren (names a, b, c; a path of components)."""
    nodes = [BASE]
    for a in draw(st.sets(st.sampled_from("abc"), max_size=3)):
        nodes.append(f"{BASE}/{a}")
        for b in draw(st.sets(st.sampled_from("abc"), max_size=3)):
            nodes.append(f"{BASE}/{a}/{b}.parquet")
    return nodes


def _under(node: str, top: str) -> bool:
    """Whether ``node`` is ``top`` or inside it (a trailing slash names the same location: ``s3://`` is ``s3:``)."""
    node, top = node.rstrip("/"), top.rstrip("/")
    return node == top or node.startswith(top + "/")


@settings(max_examples=300, deadline=None, derandomize=True)  # the same 300 cases on every run
@given(data=st.data())
def test_spent_per_person_matches_the_brute_force_model(data: st.DataObject) -> None:
    nodes = data.draw(trees())
    above = ["s3://bucket", "s3://"]  # a charge on a directory above the table covers every row
    charges = data.draw(st.lists(st.tuples(st.sampled_from(nodes + above), st.sampled_from([0.25, 0.5, 1.0, 2.0])),
                                 max_size=8))
    root = data.draw(st.sampled_from(nodes))
    leaves = [n for n in nodes if not any(m != n and _under(m, n) for m in nodes)]
    files = [f for f in leaves if _under(f, root)] or [root]
    per_row = max(sum(e for r, e in charges if _under(f, r)) for f in files)
    assert abs(spent_per_person(charges, root) - per_row) < 1e-9
    per_person = sum(e for r, e in charges if _under(r, root) or _under(root, r))  # the model's own overlap
    assert abs(spent_per_person(charges, root, unit="user") - per_person) < 1e-9
    # spend never shrinks when a charge is added
    extra = (data.draw(st.sampled_from(nodes + above)), 1.0)
    assert spent_per_person([*charges, extra], root) >= spent_per_person(charges, root)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=st.data())
def test_person_groups_are_the_spend_of_each_charged_location(data: st.DataObject) -> None:
    """The one-pass person groups agree with the rule applied to each charged location in turn (the brute force
    model above stands behind spent_per_person), trailing slashes and charges above the table included."""
    nodes = data.draw(trees())
    above = ["s3://bucket", "s3://"]
    spell = st.sampled_from(["", "/"])
    charges = [(r + slash, e) for r, e, slash in data.draw(st.lists(
        st.tuples(st.sampled_from(nodes + above), st.sampled_from([0.25, 0.5, 1.0, 2.0]), spell), max_size=10))]
    root = data.draw(st.sampled_from(nodes + ["s3://bucket"]))
    groups = person_groups(charges, root)
    inside = sorted({r.rstrip("/") for r, _ in charges if r.rstrip("/").startswith(root.rstrip("/") + "/")})
    assert list(groups) == inside
    for c in inside:
        assert abs(groups[c] - spent_per_person(charges, c)) < 1e-9, c


def test_overlap_is_by_path_components():
    assert overlaps("s3://b/t", "s3://b/t/a") and overlaps("s3://b/t/a/", "s3://b/t")
    assert not overlaps("s3://b/t", "s3://b/tt") and not overlaps("s3://b/t/a", "s3://b/t/b")
