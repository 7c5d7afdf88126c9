"""The table log's components (ldp_dask.table_log): which files a night carries, reads as new, or reads again
because rows changed, from a Delta log's add/remove actions and the kept partitions, on hand-written logs whose
answer is known."""

from __future__ import annotations

import json

import fsspec

from ldp_dask.table_log import APPENDED, CHANGED, REWRITTEN, UNTOUCHED, Action, follow, read_commits, since_groups


def _add(path: str, data: bool = True) -> Action:
    return Action(path, True, data)


def _rm(path: str, data: bool = True) -> Action:
    return Action(path, False, data)


def _kinds(components):
    return {(c.live, c.kept): c.kind for c in components}


ONE_EACH = [(["a"], ["a"]), (["b"], ["b"])]


def test_an_append_is_new_rows_and_leaves_the_kept_files_untouched():
    out = _kinds(follow(ONE_EACH, [[_add("c")]], ["a", "b", "c"]))
    assert out == {(("a",), ("a",)): UNTOUCHED, (("b",), ("b",)): UNTOUCHED, (("c",), ()): APPENDED}


def test_a_compaction_holds_exactly_the_kept_partitions_rows():
    (c,) = follow(ONE_EACH, [[_rm("a", False), _rm("b", False), _add("m", False)]], ["m"])
    assert (c.live, c.kept, c.before, c.kind) == (("m",), ("a", "b"), ("a", "b"), REWRITTEN)


def test_an_update_or_delete_changes_the_rows_of_the_files_it_rewrote_only():
    out = _kinds(follow(ONE_EACH, [[_rm("a"), _add("a2")]], ["a2", "b"]))
    assert out == {(("a2",), ("a",)): CHANGED, (("b",), ("b",)): UNTOUCHED}
    (gone,) = [c for c in follow(ONE_EACH, [[_rm("a")]], ["b"]) if c.kept == ("a",)]
    assert gone.live == () and gone.kind == CHANGED  # every row of a deleted: its partition is dropped


def test_new_rows_compacted_with_old_ones_are_a_change_not_a_rewrite():
    """An append (data) then a compaction joining the new file with a kept one: the compacted file mixes rows the
    series released with rows it never did, so it cannot be carried."""
    commits = [[_add("n")], [_rm("a", False), _rm("n", False), _add("m", False)]]
    out = _kinds(follow(ONE_EACH, commits, ["m", "b"]))
    assert out[(("m",), ("a",))] == CHANGED and out[(("b",), ("b",))] == UNTOUCHED


def test_new_files_compacted_among_themselves_stay_new():
    commits = [[_add("n1")], [_add("n2")], [_rm("n1", False), _rm("n2", False), _add("m", False)]]
    out = _kinds(follow(ONE_EACH, commits, ["a", "b", "m"]))
    assert out[(("m",), ())] == APPENDED


def test_a_night_of_several_files_moves_as_one():
    """A privacy-unit night keeps one partition for its files: compacting one of them ties the whole night to
    the new file, and an untouched recorded group (a compaction of an earlier night) stays carried."""

    class P:
        def __init__(self, path, members=()):
            self.path, self.members = path, tuple(type("M", (), {"path": m})() for m in members)

    groups = since_groups([P("n1", ["n1", "n1b"]), P("x"), P("y")], [{"files": ["m"], "partitions": ["x", "y"]}])
    assert sorted(groups) == [(["m"], ["x", "y"]), (["n1", "n1b"], ["n1"])]
    out = _kinds(follow(groups, [[_rm("n1b", False), _add("k", False)]], ["n1", "k", "m"]))
    assert out == {(("k", "n1"), ("n1",)): REWRITTEN, (("m",), ("x", "y")): UNTOUCHED}


def test_the_log_is_read_commit_by_commit_or_says_why_not(tmp_path):
    log = tmp_path / "_delta_log"
    log.mkdir()
    lines = [{"commitInfo": {"operation": "OPTIMIZE"}},
             {"remove": {"path": "d%3D1/part%201.parquet", "dataChange": False}},
             {"add": {"path": f"file://{tmp_path}/d=1/part-2.parquet", "dataChange": False}}]
    (log / f"{1:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    fs = fsspec.filesystem("file")
    assert read_commits(fs, str(tmp_path), 0, 1) == [[_rm("d=1/part 1.parquet", False),
                                                      _add("d=1/part-2.parquet", False)]]
    assert "no longer holds commit 2" in read_commits(fs, str(tmp_path), 0, 2)
    (log / f"{2:020d}.json").write_text(json.dumps({"add": {"path": "s3://elsewhere/x.parquet"}}))
    assert "outside the table" in read_commits(fs, str(tmp_path), 1, 2)
