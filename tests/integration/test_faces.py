"""Every run option on every face: the command line's releasing commands and the releasing flows are generated
from RunOptions' field declarations, so an option cannot be missing from one of them (or drift)."""

from __future__ import annotations

import argparse
import inspect
from dataclasses import fields

import pytest

from ldp_dask.cli_parser import build_parser
from ldp_dask.options import RunOptions, faces
from ldp_dask.privacy import Person

RELEASING_COMMANDS = ("privatize", "gof", "quantiles", "bounds")


def _flows():
    from ldp_dask.flows import gof_flow, plan_flow, privatize_flow, quantile_flow, release_flow

    return {"privatize_flow": privatize_flow, "gof_flow": gof_flow, "quantile_flow": quantile_flow,
            "release_flow": release_flow, "plan_flow": plan_flow}


def test_every_run_option_is_declared_with_its_faces():
    declared = faces()
    assert list(declared) == [f.name for f in fields(RunOptions)]
    for name, face in declared.items():
        assert face.help, name
        if not (face.cli and face.flow):
            assert face.hidden, f"{name} lacks a face without saying why"


@pytest.mark.parametrize("command", RELEASING_COMMANDS)
def test_every_releasing_command_takes_every_run_option(command):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {s for a in sub.choices[command]._actions for s in a.option_strings}
    missing = sorted(f for face in faces().values() for f in face.cli if f not in flags)
    assert missing == []


def test_every_releasing_flow_takes_every_run_option():
    wanted = [p for face in faces().values() for p in face.flow]
    for name, fl in _flows().items():
        params = inspect.signature(fl.fn).parameters
        assert [p for p in wanted if p not in params] == [], name
        schema = fl.parameters.properties  # what Prefect's UI and deployments see
        assert [p for p in wanted if p not in schema] == [], name


def test_the_command_line_and_a_flow_build_the_same_options(tmp_path):
    from ldp_dask.cli import _run_options
    from ldp_dask.flows._run import run_options

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    a = sub.choices["quantiles"].parse_args(
        ["data/", "--column", "x", "--bounds", "0", "1", "--epsilon", "1", "--scheduler", "tcp://h:8786",
         "--seed", "3", "--clip", "--partition-rows", "1000", "--storage-options", '{"anon": true}',
         "--split-every", "4", "--retries", "5", "--ledger", str(tmp_path / "l.sqlite"), "--privacy-unit", "user",
         "--max-contributions", "3", "--allow-large-epsilon", "--in-process-rows", "7", "--connect-timeout", "2.5",
         "--no-progress"])
    cli = _run_options(a)
    flow = run_options({"scheduler": "tcp://h:8786", "seed": 3, "clip": True, "partition_rows": 1000,
                        "storage_options": {"anon": True}, "split_every": 4, "retries": 5,
                        "ledger": str(tmp_path / "l.sqlite"), "privacy_unit": "user", "max_contributions": 3,
                        "allow_large_epsilon": True, "in_process_rows": 7, "connect_timeout": 2.5})
    assert cli == flow
    assert cli.unit == Person("user", 3) and cli.client == "tcp://h:8786" and cli.retries == 5


def test_a_bad_storage_options_flag_is_refused_in_one_line(capsys):
    from ldp_dask.cli import main

    with pytest.raises(SystemExit):
        main(["bounds", "x/", "--column", "x", "--storage-options", "[1]"])
    assert "--storage-options takes a JSON object" in capsys.readouterr().err
