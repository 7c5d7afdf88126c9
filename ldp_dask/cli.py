"""``ldp-dask`` command line: demo, privatize, estimate, gof, quantiles, bounds, budget, report, verify.

Bad input exits with status 2 and one line ``ldp-dask: error: ...`` on
stderr; nothing is written in that case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from ._validation import DEBUG_ENV, LdpDaskError
from .amplification import central_line
from .cli_parser import build_parser, show_progress
from .ledger_view import cmd_budget
from .outputs import TEXT_ROWS, fmt, fmt_interval, fmt_se, render_text
from .policy import LdpDaskWarning

__all__ = ["main"]


def _null_policy(words: list[str], numeric: bool) -> Any:
    """``--nulls error`` → None; ``--nulls value V`` (or ``--nulls V``, as a plan's ``nulls = V``) → V (a number for
    a numeric column, else the category)."""
    if words == ["error"]:
        return None
    if len(words) == 1 and words[0] not in ("drop", "value"):
        words = ["value", words[0]]
    if len(words) == 2 and words[0] == "value":
        if not numeric:
            return words[1]
        try:
            return float(words[1])
        except ValueError:
            raise LdpDaskError(f"--nulls value: the column is numeric, so V must be a number. Got {words[1]!r}.") \
                from None
    raise LdpDaskError(f"--nulls must be 'error', 'value V' or V. Got {' '.join(words)!r} instead"
                       f"{' (dropping nulls would release their exact count)' if words[0] == 'drop' else ''}.")


def _run_options(a: argparse.Namespace, numeric: bool = True) -> Any:
    """The run options of a releasing command, from its flags (:func:`ldp_dask.cli_parser.run_flags`): one value
    per declared option, so every option a release takes is on every releasing command."""
    from ldp_dask.options import RunOptions, faces
    from ldp_dask.privacy import unit_of

    if a.local and a.scheduler:
        raise LdpDaskError("Give at most one of --local and --scheduler.")
    compound = {
        "client": lambda: "local" if a.local else a.scheduler,
        "ledger": lambda: False if a.no_ledger else (a.ledger or True),
        "unit": lambda: unit_of(a.privacy_unit, a.max_contributions, a.unit_nulls),
        "nulls": lambda: _null_policy(a.nulls, numeric),
        "progress": lambda: show_progress(a),
    }
    values = {name: compound[name]() if name in compound else getattr(a, name)
              for name, face in faces().items() if face.cli}
    return RunOptions(**values)


def _report_receipt(receipt: Any) -> None:
    """The ledger's line on stderr, also when the release was not recorded (``--no-ledger``: said, never silent)."""
    if receipt is not None:
        print(receipt.line(), file=sys.stderr)


def _cmd_plan(a: argparse.Namespace) -> int:
    from ldp_dask.options import RunOptions
    from ldp_dask.plans import Plan, check_plan

    options = RunOptions.of(clip=a.clip, privacy_unit=a.privacy_unit, max_contributions=a.max_contributions,
                            unit_nulls=a.unit_nulls)
    result = check_plan(Plan.from_toml(a.plan), a.source, a.epsilon, options, a.design)
    if a.json:
        print(json.dumps({"design": result.design, "epsilon": result.epsilon, "objective": result.objective,
                          "other_objective": result.other_objective,
                          "statistics": [{"name": p.statistic.label, "column": p.statistic.column,
                                          "channel": p.channel.name, "params": p.channel.params(),
                                          "epsilon": p.epsilon, "rows": p.rows, "predicted_se": p.se,
                                          "of": p.what,
                                          "group_by": p.statistic.group[0] if p.statistic.group else None,
                                          "group_kind": None if not p.statistic.group else
                                          ("public" if p.statistic.group[2] else "private")}
                                         for p in result.statistics]}, default=str))
    else:
        print("\n".join(result.lines()))
    return 0


def _cmd_release(a: argparse.Namespace) -> int:
    from ldp_dask.plans import Plan
    from ldp_dask.plans.run import release_plan

    plan = Plan.from_toml(a.plan)
    result = release_plan(plan, a.source, a.epsilon, out=a.out, overwrite=a.overwrite, level=a.confidence,
                          design=a.design, incremental=a.incremental, since=a.since, skip_changed=a.skip_changed,
                          longitudinal=a.longitudinal, options=_run_options(a))
    if a.json:
        print(json.dumps(result.to_dict(), default=str))
    else:
        print(result)
        if a.out:
            print(f"wrote {result.written['index']} (the report), a summary and a page per statistic, and "
                  f"{result.written['estimates']}")
    _report_receipt(result.receipt)
    return 0


def _written(result: Any, outputs: Any) -> Any:
    """Stage ``result``'s JSON and plot among ``outputs`` (post-processing: nothing is charged); return it."""
    from ldp_dask.outputs import write_result_files

    write_result_files(result, outputs)
    return result


def _cmd_quantiles(a: argparse.Namespace) -> int:
    from ldp_dask._validation import DECILES
    from ldp_dask.central import quantiles
    from ldp_dask.release import publish
    from ldp_dask.summary import is_summary_file

    if a.deciles and a.q:
        raise LdpDaskError("Give at most one of --q and --deciles.")
    if is_summary_file(a.source):
        from ldp_dask.estimators import local_quantiles

        if a.plot:
            raise LdpDaskError("--plot applies to central releases; plot the density with 'ldp-dask estimate'.")
        central = [flag for flag, given in (("--column", a.column is not None), ("--bounds", a.bounds is not None),
                                            ("--epsilon", a.epsilon is not None), ("--method", a.method != "best"),
                                            ("--rho", a.rho is not None), ("--steps", a.steps is not None)) if given]
        if central:  # they were ignored without a word: a summary's quantiles spend nothing and take no bounds
            raise LdpDaskError(f"{', '.join(central)} apply to central quantiles of raw data; {a.source!r} is a "
                               "summary, whose quantiles are post-processing (no ε, its own domain): leave them out")
        lq = publish({"json": a.out, "html": a.html}, lambda outputs: _written(local_quantiles(
            a.source, q=a.q or DECILES, level=a.confidence, B=a.B, rng=a.seed, interval=a.interval), outputs),
            overwrite=a.overwrite, inputs=[a.source])[0]
        print(json.dumps(lq.to_dict()) if a.json else lq)
        return 0
    missing = [f"--{k}" for k in ("column", "bounds", "epsilon") if getattr(a, k) is None]
    if missing:
        raise LdpDaskError(f"central quantiles of raw data need {', '.join(missing)}.")
    r = quantiles(a.source, column=a.column, q=a.q or DECILES, epsilon=a.epsilon, bounds=tuple(a.bounds),
                  method=a.method, rho=a.rho, steps=a.steps, out=a.out, plot=a.plot, html=a.html,
                  overwrite=a.overwrite, options=_run_options(a))
    print(json.dumps(r.to_dict()) if a.json else r)
    _report_receipt(r.receipt)
    if r.n_clipped is not None:
        print(f"clipped {r.n_clipped:,} values to the bounds (operator-only, not released)", file=sys.stderr)
    return 0


def _cmd_bounds(a: argparse.Namespace) -> int:
    from ldp_dask.central import bounds

    b = bounds(a.source, a.column, a.epsilon, a.fraction, out=a.out, overwrite=a.overwrite, options=_run_options(a))
    print(json.dumps(b.to_dict()) if a.json else b)
    _report_receipt(b.receipt)
    return 0


def _read_null(spec: str) -> Any:
    """A null from the command line: a scipy name, or a file of bin probabilities."""
    import numpy as np

    if os.path.isfile(spec):
        try:
            return np.loadtxt(spec, dtype=np.float64, ndmin=1)
        except ValueError:
            raise LdpDaskError(f"{spec!r} is not a file of numbers (one bin probability per line).") from None
    return spec


def _cmd_gof(a: argparse.Namespace) -> int:
    from ldp_dask import gof

    res, _ = gof.run(
        a.source, _read_null(a.null), a.alpha, column=a.column,
        domain=tuple(a.domain) if a.domain else None, epsilon=a.epsilon, adaptive=a.adaptive, split=a.split,
        levels=a.levels, J=a.J, smoothness=a.smoothness, statistic=a.statistic, rows=a.rows, B=a.B, rng=a.calibration_seed,
        summary_out=a.summary_out, out=a.out, plot=a.plot, overwrite=a.overwrite, options=_run_options(a),
        allow_unverified=a.allow_unverified,
    )
    print(json.dumps(res.to_dict()) if a.json else res)
    _report_receipt(res.receipt)
    return 0


def _read_categories(a: argparse.Namespace) -> list[Any] | None:
    """Categories from --categories or --categories-file; integers when every label is one."""
    if a.categories and a.categories_file:
        raise LdpDaskError("Give at most one of --categories and --categories-file.")
    labels = a.categories
    if a.categories_file:
        try:
            with open(a.categories_file, encoding="utf-8") as fh:
                labels = [line.rstrip("\r\n") for line in fh if line.strip()]
        except OSError as exc:
            raise LdpDaskError(f"cannot read --categories-file {a.categories_file!r}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise LdpDaskError(f"--categories-file {a.categories_file!r} is not UTF-8 text (byte {exc.start}: "
                               f"{exc.object[exc.start:exc.start + 1]!r}); save it as UTF-8, one label a line") from None
    return None if labels is None else list(labels)


def _channel_options(a: argparse.Namespace) -> dict[str, Any]:
    """The channel options given on the command line (build_channel checks that they apply)."""
    from ldp_dask.channels import channel_options

    opts = {name: getattr(a, name) for name in channel_options() if getattr(a, name, None) is not None}
    cats = _read_categories(a)
    if cats is not None:
        opts["categories"] = cats
    return opts


def _estimator_options(a: argparse.Namespace) -> dict[str, Any]:
    """Estimator keyword arguments from the estimate command's flags (the estimator checks that they apply)."""
    if a.raw and a.simplex:
        raise LdpDaskError("Give at most one of --raw and --simplex.")
    opts: dict[str, Any] = {"level": a.confidence}
    if a.raw:
        opts["projection"] = "none"
    if a.simplex:
        opts["projection"] = "simplex"
    opts.update({k: getattr(a, k) for k in ("threshold", "gamma", "candidates", "top", "beam",
                                                     "miss_share", "alphabet") if getattr(a, k) is not None})
    return opts


def _cmd_privatize(a: argparse.Namespace) -> int:
    from ldp_dask.channels import AUTO
    from ldp_dask.commands import ChannelRequest, plan_column, release_column

    chosen = _channel_options(a)
    if a.channel == AUTO:
        chosen.update(target=a.target)
    elif a.target is not None:
        raise LdpDaskError("--target applies to --channel auto only.")
    request = ChannelRequest(a.channel, a.epsilon, tuple(a.domain) if a.domain else None, chosen, a.mode)
    opts = _run_options(a, request.value_kind == "numeric")
    dataset, channel, request = plan_column(a.source, a.column, request, opts)
    if not a.longitudinal and (a.instant is not None or a.memo_levels != 1 or a.uncapped or a.memo_g != "auto"):
        raise LdpDaskError("--instant, --memo-levels, --memo-g and --uncapped apply to --longitudinal only.")
    memo_g: int | str = a.memo_g
    if memo_g != "auto":
        try:
            memo_g = int(a.memo_g)
        except ValueError:
            raise LdpDaskError(f"--memo-g must be 'auto' or a whole number from 2. Got {a.memo_g!r} instead.") from None
    summary = release_column(dataset, channel, request, opts, out=a.out, rows_out=a.rows_out,
                             overwrite=a.overwrite, incremental=a.incremental, since=a.since, window=a.window,
                             skip_changed=a.skip_changed,
                             longitudinal={"instant": a.instant, "levels": a.memo_levels, "capped": not a.uncapped,
                                           "g": memo_g} if a.longitudinal else None)
    meta = summary.file_metadata()
    info = summary.release_facts()
    if a.json:
        print(json.dumps(info, default=str))
    else:
        print(f"wrote {info['summary']}: {summary.channel!r}, n={summary.n:,}, {summary.privacy_line()}, "
              f"key id {meta['key_id']} ({meta['key_source']})")
        print(f"central guarantee: {central_line(*summary.stated_central())}")
        if summary.partitions and summary.privacy_unit != "row":
            files = int(summary.metadata.get("files_read") or 0)
            tonight = (f"tonight {files} new file(s) read together as one night (persons bounded once)" if files
                       else "no new file tonight")
            print(f"nights: {tonight}, {info['partitions_reused']} earlier night(s) reused from "
                  f"{a.since or 'no earlier summary'} without reading them; {len(summary.partitions)} night(s) kept "
                  f"in the summary, each released once at ε {summary.epsilon_per_unit:g} per {summary.privacy_unit}")
        elif summary.partitions:
            print(f"partitions: {info['partitions_read']} read, {info['partitions_reused']} reused from "
                  f"{a.since or 'no earlier summary'} without reading them; {len(summary.partitions)} kept in the "
                  "summary")
        if info["choice"]:
            c = info["choice"]
            print(f"auto: chose {c['chosen']} for the {c['target']} ({c['criterion']})")
        if meta["key_source"] == "random":
            print("note: a fresh random secret was used; set LDP_DASK_SECRET or --secret-file to make releases reproducible")
    _report_receipt(summary.receipt)
    if summary.n_clipped is not None:
        # exact count, shown to the operator only; never written to the summary
        print(f"clipped {summary.n_clipped:,} out-of-domain values to the domain (operator-only, not released)",
              file=sys.stderr)
    return 0


def _cmd_estimate(a: argparse.Namespace) -> int:
    import ldp_dask
    from ldp_dask.release import publish

    s = ldp_dask.read_summary(a.summary, key=_summary_key(a), allow_unverified=a.allow_unverified)
    est = ldp_dask.estimate(s, **_estimator_options(a))
    if a.plot and not hasattr(est, "plot"):
        raise LdpDaskError(f"--plot: the estimate of a {s.channel.name!r} summary has no plot.")
    tidy = a.out is not None and a.out.lower().endswith(".parquet")
    _, written = publish({"table" if tidy else "json": a.out, "plot": a.plot}, lambda outputs: _written(est, outputs),
                         overwrite=a.overwrite, inputs=[a.summary])
    if a.json:
        _warn(est)
        print(json.dumps({**est.to_dict(), "summary_integrity": s.integrity, "central": s.central}))
        return 0
    _warn(est)
    text = render_text(est.describe(), None if a.all else TEXT_ROWS)
    print(text)
    if "summary integrity" not in text:  # every estimate's description states it; said once
        print(f"summary integrity: {s.integrity}")
    for label, path in written.items():
        print(f"wrote {label}: {path}")
    return 0


def _summary_key(a: argparse.Namespace) -> Any:
    """The key named by --secret-file or --seed, else None (the environment's, when it names one)."""
    from ldp_dask.noise import resolve_secret

    if a.seed is None and not a.secret_file:
        return None
    return resolve_secret(seed=a.seed, secret_file=a.secret_file)


def _warn(result: Any) -> None:
    """A result's warnings on stderr, one line each (never silent; they are in its JSON and report too)."""
    for w in getattr(result, "warnings", ()):
        print(f"ldp-dask: warning: {w}", file=sys.stderr)


def _cmd_verify(a: argparse.Namespace) -> int:
    from ldp_dask.summary import verify_summary

    s = verify_summary(a.summary, _summary_key(a))
    if a.json:
        print(json.dumps({"summary": a.summary, "integrity": s.integrity, "key_id": s.metadata.get("key_id"),
                          "channel": s.channel.name, "n": s.n, "privacy_unit": s.privacy_unit,
                          "epsilon_per_unit": s.epsilon_per_unit}))
        return 0
    print(f"verified: {a.summary} is as released (MAC under key id {s.metadata.get('key_id')}); "
          f"{s.channel.name}, n = {s.n:,}, {s.privacy_line()}")
    return 0


def _cmd_merge(a: argparse.Namespace) -> int:
    from ldp_dask.noise import resolve_secret
    from ldp_dask.partitions import merge_summaries

    key = resolve_secret(seed=a.seed, secret_file=a.secret_file) if (a.seed is not None or a.secret_file) else None
    s = merge_summaries(a.summaries, out=a.out, window=a.window, key=key, overwrite=a.overwrite,
                        allow_unverified=a.allow_unverified)
    info = {"summary": a.out, "inputs": a.summaries, "channel": s.channel.name, "n": s.n,
            "partitions": len(s.partitions), "window": a.window, "integrity": s.integrity,
            "privacy_unit": s.privacy_unit, "epsilon_per_unit": s.epsilon_per_unit}
    if a.json:
        print(json.dumps(info))
        return 0
    what = f"merged {len(a.summaries)} summaries" if len(a.summaries) > 1 else "took a window of 1 summary"
    kept = f", {len(s.partitions)} partitions kept" if s.partitions else ""
    print(f"wrote {a.out}: {what}{f' (last {a.window})' if a.window else ''}; {s.channel.name}, n = {s.n:,}"
          f"{kept}, {s.privacy_line()}; no data read, no ε spent")
    if not s.verified:
        print(f"ldp-dask: warning: the result is {s.integrity}; it was written without a MAC", file=sys.stderr)
    return 0


def _cmd_report(a: argparse.Namespace) -> int:
    from .report import default_report_path, write_report
    path = write_report(a.summary, a.out or default_report_path(a.summary), level=a.confidence, overwrite=a.overwrite,
                        allow_unverified=a.allow_unverified, key=_summary_key(a))
    if a.json:
        print(json.dumps({"report": path, "summary": a.summary}))
    else:
        print(f"wrote {path}")
    return 0


def _cmd_demo(a: argparse.Namespace) -> int:
    from .demo import SAMPLE_COLUMNS, run_demo, sample_table

    if a.data_only is not None:
        where = sample_table(a.data_only)
        print(f"wrote the sample table {where}/: 2 Parquet files, 120,000 rows")
        for name, what in SAMPLE_COLUMNS.items():
            print(f"  {name:<9} {what}")
        return 0
    res = run_demo(out=a.out, rows=a.rows, files=a.files, epsilon=a.epsilon, workers=a.workers)
    if a.json:
        print(json.dumps(res, default=str))
        return 0
    p = res["paths"]
    print()
    print(f"ldp_dask demo finished in {res['seconds']:.1f} s")
    print(f"  density plot : {p['density_png']}  (L1 distance to the truth {res['l1']:.3f})")
    m, se = res["mean"], float(res["mean"].get("se", float("nan")))
    print(f"  mean         : {fmt_se(m['value'], se)} ± {fmt(se, 2)} (se), interval "
          f"{fmt_interval(m['ci'][0], m['ci'][1], se)} (truth {res['true_mean']:g})")
    print(f"  summaries    : {p['hist']}, {p['mean']}")
    print(f"  report       : {p['report']} (markdown), {p['html']} (HTML page)")
    print(f"  ledger       : {p['ledger']} (the demo's own; ldp-dask budget --ledger {p['ledger']})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ldp-dask`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("always", LdpDaskWarning)
        warnings.showwarning = _show_warning
        return _dispatch(args)


def _show_warning(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """The library's warnings (:mod:`ldp_dask.policy`) as one ``ldp-dask: warning:`` line on stderr each."""
    if issubclass(category, LdpDaskWarning):
        print(f"ldp-dask: warning: {message}", file=sys.stderr)
    else:
        print(warnings.formatwarning(message, category, filename, lineno, line), file=sys.stderr, end="")


def _dispatch(args: argparse.Namespace) -> int:
    handlers: dict[str, Any] = {"demo": _cmd_demo, "privatize": _cmd_privatize, "estimate": _cmd_estimate,
                                "gof": _cmd_gof, "quantiles": _cmd_quantiles, "budget": cmd_budget,
                                "report": _cmd_report, "verify": _cmd_verify, "bounds": _cmd_bounds,
                                "merge": _cmd_merge, "plan": _cmd_plan,
                                "release": _cmd_release}
    try:
        return handlers[args.command](args)
    except BrokenPipeError:  # e.g. `ldp-dask estimate s.parquet | head`: not an error
        sys.stderr.close()
        return 0
    except LdpDaskError as exc:
        msg = " ".join(str(exc).split())
        print(f"ldp-dask: error: {msg}{_published(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", 2)
        if getattr(exc, "published", False):
            print(f"ldp-dask: {exc} received while publishing: the release was finished first (published and "
                  "charged), then stopped", file=sys.stderr)
        else:
            print(f"ldp-dask: interrupted{f' ({exc})' if str(exc) else ''}"
                  f"{_published(exc) or '; nothing was published or charged'}", file=sys.stderr)
        return 128 + signum
    except Exception as exc:  # infrastructure: storage, the cluster, the Prefect API
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"ldp-dask: error: {_infrastructure_message(exc)}", file=sys.stderr)
        return 1


_HINTS = (
    ("ephemeral Prefect API server", "the temporary Prefect API did not start in time (a busy machine?); raise "
                                     "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS or point PREFECT_API_URL "
                                     "at a running server"),
)


def _infrastructure_message(exc: BaseException) -> str:
    """One line for a failure of the infrastructure (not of the input): what failed, a hint, how to see more."""
    text = " ".join(str(exc).split())
    for needle, hint in _HINTS:
        if needle in text:
            return f"{hint} ({type(exc).__name__}; set {DEBUG_ENV}=1 for the traceback)"
    if len(text) > 300:
        text = text[:300] + " …"
    done = getattr(exc, "ldp_dask_published", None) or "nothing was published or charged"
    return f"{type(exc).__name__}: {text} ({done}; set {DEBUG_ENV}=1 for the traceback)"


def _published(exc: BaseException) -> str:
    """What a release published before it failed, as the end of its error line ('' when nothing was)."""
    done = getattr(exc, "ldp_dask_published", None)
    return f" ({done})" if done else ""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
