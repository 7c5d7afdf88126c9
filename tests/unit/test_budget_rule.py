"""The ledger's budget rule against a brute-force model of who spent what (hypothesis).

The model: a table is a tree of locations (directories and, at the leaves,
files). A charge ``(location, ε, release)`` is paid by every row under that
location, once per release (a release's charges are not added up for one row:
it read the row once). Following locations (ε per row, an append-only dataset
whose files stay put), every row lives in one file, and the most any one row
has spent under ``root`` is the largest, over the files under it, of the sum
over releases of that release's largest charge above the file. By default —
and with a privacy unit naming a person, who may own a row in every file —
rows may move between files, so every release with a charge overlapping
``root`` adds its largest such charge.
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
    assert abs(spent_per_person(charges, root, follow_locations=True) - per_row) < 1e-9
    per_person = sum(e for r, e in charges if _under(r, root) or _under(root, r))  # the model's own overlap
    assert abs(spent_per_person(charges, root, unit="user") - per_person) < 1e-9
    assert abs(spent_per_person(charges, root) - per_person) < 1e-9  # rows not followed: the same sum
    # spend never shrinks when a charge is added
    extra = (data.draw(st.sampled_from(nodes + above)), 1.0)
    for follow in (False, True):
        assert spent_per_person([*charges, extra], root, follow_locations=follow) >= \
            spent_per_person(charges, root, follow_locations=follow)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=st.data())
def test_one_release_is_paid_once_by_a_row(data: st.DataObject) -> None:
    """Charges grouped into releases (a release charged on its root and on the real locations of linked files,
    or on several nested locations): each release counts once per row, by its largest charge covering the row."""
    nodes = data.draw(trees())
    above = ["s3://bucket"]
    charges = data.draw(st.lists(st.tuples(st.sampled_from(nodes + above), st.sampled_from([0.25, 0.5, 1.0, 2.0]),
                                           st.integers(0, 3)), max_size=10))
    root = data.draw(st.sampled_from(nodes))
    leaves = [n for n in nodes if not any(m != n and _under(m, n) for m in nodes)]
    files = [f for f in leaves if _under(f, root)] or [root]
    releases = {r for _, _, r in charges}

    def paid(f: str) -> float:
        return sum(max((e for loc, e, r in charges if r == rel and _under(f, loc)), default=0.0) for rel in releases)

    assert abs(spent_per_person(charges, root, follow_locations=True) - max(map(paid, files))) < 1e-9
    conservative = sum(max((e for loc, e, r in charges if r == rel and (_under(loc, root) or _under(root, loc))),
                           default=0.0) for rel in releases)
    assert abs(spent_per_person(charges, root) - conservative) < 1e-9


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
        assert abs(groups[c] - spent_per_person(charges, c, follow_locations=True)) < 1e-9, c


def test_overlap_is_by_path_components():
    assert overlaps("s3://b/t", "s3://b/t/a") and overlaps("s3://b/t/a/", "s3://b/t")
    assert not overlaps("s3://b/t", "s3://b/tt") and not overlaps("s3://b/t/a", "s3://b/t/b")
