"""``ldp-dask`` command line: demo, privatize, estimate, gof, quantiles, bounds, budget, report, verify.

Bad input exits with status 2 and one line ``ldp-dask: error: ...`` on
stderr; nothing is written in that case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

from ._validation import DEBUG_ENV, LdpDaskError
from .policy import MAX_EPSILON, LdpDaskWarning

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from ldp_dask.options import DEFAULT_PARTITION_ROWS, DEFAULT_SPLIT_EVERY

    p = argparse.ArgumentParser(prog="ldp-dask", description="Locally private statistics over Parquet with Dask.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser("demo", help="run the embedded demo (synthetic data, LocalCluster, Prefect without a server)",
                       description="Generate synthetic Parquet data, privatize and estimate it with the Prefect flows.")
    d.add_argument("--out", default="demo-output", help="output directory (default: demo-output)")
    d.add_argument("--rows", type=int, default=2_000_000, help="rows to generate (default: 2,000,000)")
    d.add_argument("--files", type=int, default=4, help="Parquet files to generate (default: 4)")
    d.add_argument("--epsilon", type=float, default=1.0, help="ε per row (default: 1)")
    d.add_argument("--workers", type=int, default=2, help="Dask worker processes (default: 2)")
    d.add_argument("--json", action="store_true", help="print the result as JSON")

    r = sub.add_parser("privatize", help="privatize a column into a summary file",
                       description="Privatize one column of a Parquet dataset with a local-DP channel.")
    r.add_argument("source", help="Parquet file, directory, glob or fsspec URL")
    r.add_argument("--column", required=True, help="column to privatize")
    _channel_args(r)
    r.add_argument("--out", required=True, help="summary file to write")
    r.add_argument("--mode", choices=["summary", "rows"], default="summary",
                   help="summary: only noisy sums leave workers (default); rows: also write privatized rows")
    r.add_argument("--rows-out", default=None, help="directory for privatized rows (rows mode)")
    r.add_argument("--clip", action="store_true", help="clamp out-of-domain values instead of failing")
    r.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    r.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="attach to a running Dask scheduler (default: $DASK_SCHEDULER_ADDRESS, else this process "
                        "for up to 2,000,000 rows, else a new LocalCluster)")
    r.add_argument("--local", action="store_true", help="run in this process, without Dask")
    r.add_argument("--secret-file", default=None, help="file with the secret key (else $LDP_DASK_SECRET, else random)")
    r.add_argument("--seed", type=int, default=None, help="insecure integer seed, for simulations only")
    r.add_argument("--partition-rows", type=int, default=None,
                   help=f"target rows per partition (default {DEFAULT_PARTITION_ROWS:,})")
    r.add_argument("--split-every", type=int, default=DEFAULT_SPLIT_EVERY,
                   help=f"fan-in of the tree reduction (default {DEFAULT_SPLIT_EVERY})")
    r.add_argument("--incremental", action="store_true",
                   help="a partitioned release: each file is a partition with its own noise, and the summary keeps "
                        "every file's noisy sums so that a later run reads only new or changed files (--since)")
    r.add_argument("--since", default=None, metavar="SUMMARY",
                   help="a partitioned summary released earlier with the same key and channel: its unchanged files "
                        "are not read, their kept sums are used (implies --incremental); only files released anew "
                        "are charged")
    r.add_argument("--window", default=None, metavar="DAYS",
                   help="e.g. 30d: release only the files of the last 30 days of a table partitioned by date "
                        "directories (date=YYYY-MM-DD/), ending at the newest (implies --incremental)")
    _progress_arg(r)
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    _ledger_args(r)

    e = sub.add_parser("estimate", help="estimate from a summary file",
                       description="Density (histogram or wavelet channel) or mean (mean channel) from a summary.")
    e.add_argument("summary", help="summary file written by 'ldp-dask privatize'")
    e.add_argument("--plot", default=None, help="write a PNG plot of the density")
    e.add_argument("--out", default=None,
                   help="write the estimate: a tidy Parquet table for a .parquet name (bins or categories, estimate, "
                        "standard error, interval bounds: pandas and DuckDB read it as it is), else JSON")
    e.add_argument("--raw", action="store_true",
                   help="density: the raw estimate (no projection onto densities)")
    e.add_argument("--simplex", action="store_true", help="rr: project the frequencies onto the simplex")
    e.add_argument("--threshold", choices=["hard", "soft", "none"], default=None,
                   help="wavelet: hard (the paper's, default), soft, or none (linear estimator)")
    e.add_argument("--gamma", type=float, default=None, help="wavelet: threshold constant γ (default 4, chosen in benchmarks/wavelet_rates.py)")
    _confidence_arg(e)
    e.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    g = sub.add_parser("gof", help="locally private goodness-of-fit test (Lam-Weil et al. 2022)",
                       description="Test H0: f = f0 from a haar / haar-adaptive summary, or privatize raw data "
                                   "first (--column, --domain, --epsilon). Prints the statistic, the critical "
                                   "value, the p-value and the decision.")
    g.add_argument("source", help="summary file, or Parquet data (file, directory, glob, fsspec URL)")
    g.add_argument("--null", required=True,
                   help="f0: a scipy.stats name like 'beta(2,2)' or 'norm(loc=0.5, scale=0.1)', "
                        "or a file of bin probabilities (one per line)")
    g.add_argument("--alpha", type=_alpha, default=0.05,
                   help="significance level α of the test, in (0, 0.5) (default 0.05)")
    g.add_argument("--B", type=int, default=9999, help="Monte-Carlo replicates (default 9999)")
    g.add_argument("--statistic", choices=["summary", "U"], default="summary",
                   help="T' from the sums (default) or the paper's U-statistic from privatized rows (--rows)")
    g.add_argument("--rows", default=None, help="directory of privatized rows (U-statistic)")
    g.add_argument("--calibration-seed", type=int, default=None, help="seed of the Monte-Carlo calibration")
    g.add_argument("--column", default=None, help="raw data: column to privatize")
    g.add_argument("--domain", nargs=2, type=float, default=None, metavar=("LO", "HI"), help="raw data: public domain")
    g.add_argument("--epsilon", type=float, default=None, help="raw data: ε per row")
    g.add_argument("--adaptive", action="store_true", help="raw data: the adaptive test over all levels")
    g.add_argument("--split", choices=["details", "rows", "epsilon"], default="details",
                   help="adaptive: one random Haar detail level per row, shared by every level (details, default: "
                        "the most powerful), one random level per row (rows, the paper's), or ε split across levels")
    g.add_argument("--haar-level", "--J", dest="J", type=int, default=None,
                   help="raw data: Haar level J, 2^J bins (default from n, ε and --smoothness)")
    g.add_argument("--smoothness", type=float, default=1.0, help="raw data: smoothness s for the default J (1)")
    g.add_argument("--summary-out", default=None, help="raw data: also write the summary here")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS", help="raw data: running Dask scheduler")
    g.add_argument("--local", action="store_true", help="raw data: run in this process, without Dask")
    g.add_argument("--secret-file", default=None, help="raw data: file with the secret key")
    g.add_argument("--seed", type=int, default=None, help="raw data: insecure integer key, for simulations only")
    g.add_argument("--clip", action="store_true", help="raw data: clamp out-of-domain values")
    g.add_argument("--out", default=None, help="write the result as JSON")
    g.add_argument("--plot", default=None, help="write a PNG of the null law with the observed statistic")
    g.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    g.add_argument("--json", action="store_true", help="print the result as JSON")
    _progress_arg(g)
    _ledger_args(g)
    c = sub.add_parser("quantiles", help="central-DP quantiles of a column",
                       description="Release quantiles of a raw column with central differential privacy "
                                   "(one record replaced, n public). The exact statistics stay in memory.")
    c.add_argument("source", help="Parquet data (central DP), or a histogram/wavelet summary file (local DP)")
    c.add_argument("--column", default=None, help="column (raw data)")
    c.add_argument("--bounds", nargs=2, type=float, default=None, metavar=("LO", "HI"),
                   help="public bounds (raw data)")
    c.add_argument("--epsilon", type=float, default=None, help="total ε for all the quantiles (raw data)")
    _confidence_arg(c, "summary: ")
    c.add_argument("--interval", choices=["bins", "band", "envelope", "bootstrap"], default=None,
                   help="summary: CDF band at the bin edges (default for histogram/haar), interpolated within "
                        "bins, CDF envelopes (default for wavelet), or parametric bootstrap (under-covers)")
    c.add_argument("--B", type=int, default=400, help="summary: bootstrap replicates (default 400)")
    c.add_argument("--q", type=float, nargs="+", default=None, help="probabilities in (0, 1), increasing")
    c.add_argument("--deciles", action="store_true", help="the nine deciles (the default when --q is absent)")
    c.add_argument("--method", default="best",
                   choices=["best", "joint-exp", "inverse-sensitivity", "histogram", "laplace"],
                   help="mechanism (default best: joint-exp up to n = 102,400, then inverse-sensitivity; "
                        "measured in benchmarks/quantiles.py)")
    c.add_argument("--rho", type=float, default=None,
                   help="inverse-sensitivity smoothing ρ (default (hi − lo)/2^20)")
    c.add_argument("--steps", type=int, default=None, help="histogram method: intervals (default 1.5 n / log n)")
    c.add_argument("--clip", action="store_true", help="clamp values outside the bounds (count to stderr)")
    c.add_argument("--scheduler", default=None, metavar="ADDRESS", help="running Dask scheduler")
    c.add_argument("--local", action="store_true", help="run in this process, without Dask")
    c.add_argument("--secret-file", default=None, help="file with the secret key")
    c.add_argument("--seed", type=int, default=None, help="insecure integer key, for simulations only")
    c.add_argument("--out", default=None, help="write the release as JSON")
    c.add_argument("--plot", default=None, help="PNG of the released quantile function (public information only)")
    c.add_argument("--html", default=None,
                   help="self-contained HTML page: the values with their intervals (local) or a-priori accuracy "
                        "(central), and the plot")
    c.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    c.add_argument("--json", action="store_true", help="print the release as JSON")
    _progress_arg(c)
    _ledger_args(c)

    bd = sub.add_parser("bounds", help="central-DP bounds of a column, to choose a public domain",
                        description="Release symmetric bounds (-2^k, 2^k) holding about --fraction of a raw "
                                    "column, with central DP (AboveThreshold), charged to the central budget. "
                                    "For operators who run central releases anyway; the domain of a local "
                                    "release can then be chosen without looking at the data.")
    bd.add_argument("source", help="Parquet data (file, directory, glob, fsspec URL)")
    bd.add_argument("--column", required=True, help="the numeric column")
    bd.add_argument("--epsilon", type=float, default=0.1, help="central ε spent (default 0.1)")
    bd.add_argument("--fraction", type=float, default=0.95, help="share of the values inside, in [0.5, 1) (0.95)")
    bd.add_argument("--clip", action="store_true", help=argparse.SUPPRESS)
    bd.add_argument("--scheduler", default=None, metavar="ADDRESS", help="running Dask scheduler")
    bd.add_argument("--local", action="store_true", help="run in this process, without Dask")
    bd.add_argument("--secret-file", default=None, help="file with the secret key")
    bd.add_argument("--seed", type=int, default=None, help="insecure integer key, for simulations only")
    bd.add_argument("--out", default=None, help="write the release as JSON")
    bd.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    bd.add_argument("--json", action="store_true", help="print the release as JSON")
    _progress_arg(bd)
    _ledger_args(bd)

    h = sub.add_parser("report", help="write an HTML page for a summary (estimate, uncertainty, privacy)",
                       description="Write a self-contained HTML page with the estimate of a summary, its "
                                   "uncertainty (plot, intervals) and the privacy parameters of the release.")
    h.add_argument("summary", help="summary file written by 'ldp-dask privatize'")
    h.add_argument("--out", default=None, help="HTML file to write (default: the summary's name with .html)")
    _confidence_arg(h)
    h.add_argument("--overwrite", action="store_true", help="replace an existing page")
    h.add_argument("--json", action="store_true", help="print the result as JSON")

    v = sub.add_parser("verify", help="check that a summary file is as released (its MAC under the release key)",
                       description="Validate a summary's structure and check its HMAC under the key it was "
                                   "released with (--secret-file, else LDP_DASK_SECRET / LDP_DASK_SECRET_FILE). "
                                   "Exit 0 when it matches, 2 otherwise.")
    v.add_argument("summary", help="summary file")
    v.add_argument("--secret-file", default=None, help="file with the release key")
    v.add_argument("--seed", type=int, default=None, help="the insecure seed the summary was released with")
    v.add_argument("--json", action="store_true", help="print the result as JSON")

    m = sub.add_parser("merge", help="merge summaries of disjoint data, or take a window of kept partitions",
                       description="Combine summaries of disjoint data released with the same channel and parameters "
                                   "(refusing overlapping data or mismatched releases), and/or keep the partitions "
                                   "of the last days (--window). Post-processing: no data is read, no ε is spent.")
    m.add_argument("summaries", nargs="+", metavar="SUMMARY", help="summary files (two or more, or one with --window)")
    m.add_argument("--out", required=True, help="summary file to write")
    m.add_argument("--window", default=None, metavar="DAYS",
                   help="e.g. 30d: keep the partitions of the last 30 days (date=YYYY-MM-DD/ directories)")
    m.add_argument("--secret-file", default=None, help="file with the release key (checks the inputs, signs the output)")
    m.add_argument("--seed", type=int, default=None, help="the insecure seed the summaries were released with")
    m.add_argument("--overwrite", action="store_true", help="replace an existing output")
    m.add_argument("--json", action="store_true", help="print the result as JSON")

    b = sub.add_parser("budget", help="show the privacy budget ledger, or declare a dataset and its budget",
                       description="Every release is recorded in the ledger and charged, per person, against the "
                                   "dataset it reads: a declared dataset whose root contains (or is inside) the "
                                   "source, else the source's own root. Budgets cover all columns, local and "
                                   "central releases together.")
    b.add_argument("action", nargs="?", choices=["list", "set"], default="list")
    b.add_argument("name", nargs="?", default=None, help="set: the dataset's name")
    b.add_argument("--source", default=None, help="set: the dataset's root (directory, file, glob or URL)")
    b.add_argument("--limit", type=float, default=None, help="set: the ε budget per person")
    b.add_argument("--privacy-unit", default=None, metavar="COLUMN",
                   help="set: the column naming a person; every release of the dataset must use it "
                        "(default: ε per row)")
    b.add_argument("--entries", action="store_true", help="list: every release, not only the totals")
    b.add_argument("--json", action="store_true", help="print as JSON")
    b.add_argument("--ledger", default=None,
                   help="ledger file or postgresql:// URL (default $LDP_DASK_LEDGER or ~/.ldp_dask/ledger.sqlite)")
    for name, command in sub.choices.items():
        command.add_argument("--level", action=_Refused, nargs="?", help=argparse.SUPPRESS,
                             instead=_LEVEL_INSTEAD.get(name, _LEVEL_INSTEAD[None]))
    return p


#: What each command's old ``--level`` flag meant, and the flag that now says it.
_LEVEL_INSTEAD: dict[str | None, str] = {
    "privatize": "--haar-level J for the Haar channel's resolution (--levels J… for haar-adaptive)",
    "gof": "--alpha for the test's significance level (--haar-level for the Haar resolution J)",
    "estimate": "--confidence for the level of the intervals",
    "quantiles": "--confidence for the level of the intervals",
    "report": "--confidence for the level of the intervals",
    None: "--confidence (intervals), --alpha (tests) or --haar-level (Haar resolution)",
}


class _Refused(argparse.Action):
    """A retired flag: refused at parse time with a line naming the flag that replaces it."""

    def __init__(self, option_strings: Sequence[str], dest: str, instead: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.instead = instead

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser.error(f"{option_string} had several meanings and is no longer accepted; use {self.instead}")


def _level(hi: float, what: str, hint: str) -> Any:
    """An argparse type for a level in (0, ``hi``): ``what`` names it in the error, ``hint`` says why."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number in (0, {hi:g}), got {text!r}") from None
        if not 0 < value < hi:
            raise argparse.ArgumentTypeError(f"the {what} must be in (0, {hi:g}), got {text} ({hint})")
        return value

    return parse


#: --alpha: a significance level in (0, 0.5); 0.95 is a confidence, not a test level.
_alpha = _level(0.5, "significance level", "a test at α ≥ 0.5 rejects a true null at least half the time; for 95% "
                                           "confidence use --alpha 0.05")
#: --confidence: a confidence level in (0, 1).
_confidence = _level(1.0, "confidence level", "e.g. 0.95")


def _confidence_arg(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument("--confidence", type=_confidence, default=0.95, metavar="LEVEL",
                   help=f"{prefix}confidence level of the intervals, in (0, 1) (default 0.95)")


def _channel_args(p: argparse.ArgumentParser) -> None:
    """--channel, --epsilon, --domain and one flag per option the channels declare (ldp_dask.channels)."""
    from ldp_dask.channels import AUTO, CHANNELS, TARGETS, channel_options

    p.add_argument("--channel", required=True, choices=[AUTO, *sorted(CHANNELS)],
                   help="local channel; auto: the smallest predicted error for the column (docs/channels.md)")
    p.add_argument("--target", choices=TARGETS, default=None,
                   help="auto: what to optimise for (categories: frequencies; numeric columns: distribution, the "
                        "default, or mean)")
    p.add_argument("--epsilon", type=float, required=True,
                   help=f"ε per row, > 0 (refused above {MAX_EPSILON:g} per unit without --allow-large-epsilon)")
    numeric = sorted(n for n, c in CHANNELS.items() if c.value_kind == "numeric")
    p.add_argument("--domain", nargs=2, type=float, default=None, metavar=("LO", "HI"),
                   help=f"public domain ({', '.join(numeric)})")
    for name, (opt, users) in channel_options().items():
        if not opt.cli:
            continue
        default = "" if opt.default in (None, False) else f" (default {opt.default})"
        text = f"{', '.join(users) if len(users) < 4 else 'Laplace channels'}: {opt.help}{default}"
        if opt.switch:
            p.add_argument(opt.flag, action="store_true", default=None, dest=name, help=text)
        else:
            p.add_argument(opt.flag, dest=name, type=opt.type, choices=opt.choices, nargs="+" if opt.many else None,
                           default=None, help=text)
        if name == "categories":
            p.add_argument("--categories-file", default=None, help="rr, hadamard: file with one public category per line")


def _progress_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar of the rows processed on Dask (default: when stderr is a terminal)")


def _show_progress(a: argparse.Namespace) -> bool:
    return sys.stderr.isatty() if a.progress is None else bool(a.progress)


def _ledger_args(p: argparse.ArgumentParser) -> None:
    """How a release is accounted: the ledger, and who ε is counted for; and what a null becomes."""
    p.add_argument("--nulls", nargs="+", default=["error"], metavar="POLICY",
                   help="what a null of the column becomes: 'error' (default: refused, from the Parquet footers "
                        "before any work) or 'value V' (replaced by the public value V before privatization; ε "
                        "unchanged). Dropping is not offered: it would release the exact count of non-nulls")
    p.add_argument("--ledger", default=None, help="privacy budget ledger: a file or a postgresql:// URL "
                                                  "(default $LDP_DASK_LEDGER or ~/.ldp_dask/ledger.sqlite)")
    p.add_argument("--no-ledger", action="store_true", help="do not record the release (no budget enforced)")
    p.add_argument("--allow-large-epsilon", action="store_true",
                   help=f"release even with ε above {MAX_EPSILON:g} per unit (refused otherwise): simulations only")
    p.add_argument("--privacy-unit", default=None, metavar="COLUMN",
                   help="column naming the person each row belongs to: ε is then per person (default: per row)")
    p.add_argument("--max-contributions", type=int, default=1, metavar="K",
                   help="with --privacy-unit: rows kept per person, chosen at random; ε/K per row (default 1)")


def _null_policy(words: list[str], numeric: bool) -> Any:
    """``--nulls error`` → None; ``--nulls value V`` → V (a number for a numeric column, else the category)."""
    if words == ["error"]:
        return None
    if len(words) == 2 and words[0] == "value":
        if not numeric:
            return words[1]
        try:
            return float(words[1])
        except ValueError:
            raise LdpDaskError(f"--nulls value: the column is numeric, so V must be a number. Got {words[1]!r}.") \
                from None
    raise LdpDaskError(f"--nulls must be 'error' or 'value V'. Got {' '.join(words)!r} instead"
                       f"{' (dropping nulls would release their exact count)' if words[0] == 'drop' else ''}.")


def _run_options(a: argparse.Namespace, numeric: bool = True, **extra: Any) -> Any:
    """The run options of a releasing command, from its flags."""
    from ldp_dask.options import RunOptions

    if a.local and a.scheduler:
        raise LdpDaskError("Give at most one of --local and --scheduler.")
    ledger = None if getattr(a, "no_ledger", False) else (a.ledger or True)
    return RunOptions.of(client="local" if a.local else a.scheduler, seed=a.seed, secret_file=a.secret_file,
                         clip=a.clip, progress=_show_progress(a), ledger=ledger, privacy_unit=a.privacy_unit,
                         max_contributions=a.max_contributions, nulls=_null_policy(a.nulls, numeric),
                         allow_large_epsilon=a.allow_large_epsilon, **extra)


def _report_receipt(receipt: Any) -> None:
    """The ledger's line on stderr (nothing when the release was not recorded)."""
    if receipt is not None and receipt.ledger is not None:
        print(receipt.line(), file=sys.stderr)


def _cmd_budget(a: argparse.Namespace) -> int:
    from ldp_dask.ledger import open_ledger
    from ldp_dask.source import source_root

    led = open_ledger(a.ledger or True)
    assert led is not None
    if a.action == "set":
        if a.name is None or a.source is None or a.limit is None:
            raise LdpDaskError("budget set needs NAME, --source and --limit (e.g. budget set flights "
                               "--source data/flights --limit 4).")
        root = source_root(a.source)
        led.declare(a.name, root, a.limit, a.privacy_unit)
        unit = a.privacy_unit or "row"
        print(f"budget set: dataset {a.name!r} = {root}, ε ≤ {a.limit:g} per {unit} "
              f"(spent so far {led.spent(root):g}; every release reading inside or around this root is charged here)")
        return 0
    rows = led.entries() if a.entries else led.summary()
    if a.json:
        print(json.dumps(rows, default=str))
        return 0
    if not rows:
        print(f"the ledger {led.location} is empty")
        return 0
    if a.entries:
        for r in rows:
            note = f" ({r['note']})" if r["note"] else ""
            print(f"#{r['id']:<4} {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(r['created_at']))}  "
                  f"{r['scope']:<7} {r['channel']:<18} ε={r['epsilon']:<8g} per {r['privacy_unit']:<8} "
                  f"{r['status']:<10} {r['source']} [{r['column_name']}] key {r['key_id']}{note}")
        return 0
    print(f"ledger {led.location}: ε spent per person (per row unless a privacy unit is named), all columns and "
          "scopes together")
    for r in rows:
        name = r["dataset"] or "(undeclared)"
        budget = (f" of budget {r['budget']:g} (remaining {max(0.0, r['budget'] - r['spent']):g})"
                  if r["budget"] is not None else " (no budget set)")
        views = "; ".join(f"{k} {v:g}" for k, v in sorted(r["by_column"].items()))
        scopes = ", ".join(f"{k} {v:g}" for k, v in sorted(r["by_scope"].items()))
        print(f"  {name} {r['root']}: {r['spent']:g} per {r['privacy_unit']}{budget}")
        if views:
            print(f"      by column: {views}; by scope: {scopes}")
        _print_groups(r)
    return 0


#: ``budget`` lists at most this many person groups of a dataset (``--json`` lists them all)
GROUPS_SHOWN = 12


def _print_groups(row: dict[str, Any]) -> None:
    """The per-row groups of a dataset: ε per row in each charged location inside it (a partition, a file)."""
    groups = row.get("groups") or {}
    if not groups:
        return
    head = row["root"].rstrip("/") + "/"
    values = sorted(set(groups.values()))
    print(f"      per partition: {len(groups)} charged inside it, ε per row from {values[0]:g} to {values[-1]:g}")
    for where, eps in list(groups.items())[:GROUPS_SHOWN]:
        print(f"        {where[len(head):] if where.startswith(head) else where}: {eps:g}")
    if len(groups) > GROUPS_SHOWN:
        print(f"        … {len(groups) - GROUPS_SHOWN} more (budget --json lists them all)")


def _is_categorical_source(source: str, column: str) -> bool:
    """Whether the column holds categories (strings/dictionaries) rather than numbers (footer only)."""
    from ldp_dask.source import open_source

    try:
        open_source(source, column)
        return False
    except LdpDaskError as exc:
        if "numeric column is required" in str(exc):
            return True
        raise


def _written(result: Any, outputs: Any) -> Any:
    """Stage ``result``'s JSON and plot among ``outputs`` (post-processing: nothing is charged); return it."""
    from ldp_dask.outputs import write_result_files

    write_result_files(result, outputs)
    return result


def _cmd_quantiles(a: argparse.Namespace) -> int:
    from ldp_dask._validation import DECILES
    from ldp_dask.central import release_quantiles
    from ldp_dask.release import publish
    from ldp_dask.summary import is_summary_file

    if a.deciles and a.q:
        raise LdpDaskError("Give at most one of --q and --deciles.")
    if is_summary_file(a.source):
        from ldp_dask.estimators import local_quantiles

        if a.plot:
            raise LdpDaskError("--plot applies to central releases; plot the density with 'ldp-dask estimate'.")
        lq = publish({"json": a.out, "html": a.html}, lambda outputs: _written(local_quantiles(
            a.source, q=a.q or DECILES, level=a.confidence, B=a.B, rng=a.seed, interval=a.interval), outputs),
            overwrite=a.overwrite, inputs=[a.source])[0]
        print(json.dumps(lq.to_dict()) if a.json else lq)
        return 0
    missing = [f"--{k}" for k in ("column", "bounds", "epsilon") if getattr(a, k) is None]
    if missing:
        raise LdpDaskError(f"central quantiles of raw data need {', '.join(missing)}.")
    rel = release_quantiles(a.source, column=a.column, q=a.q or DECILES, epsilon=a.epsilon, bounds=tuple(a.bounds),
                            method=a.method, rho=a.rho, steps=a.steps, out=a.out, plot=a.plot,
                            html=a.html, overwrite=a.overwrite, options=_run_options(a))
    r = rel.result
    print(json.dumps(r.to_dict()) if a.json else r)
    _report_receipt(rel.receipt)
    if r.n_clipped is not None:
        print(f"clipped {r.n_clipped:,} values to the bounds (operator-only, not released)", file=sys.stderr)
    return 0


def _cmd_bounds(a: argparse.Namespace) -> int:
    from ldp_dask.central import release_bounds

    rel = release_bounds(a.source, a.column, a.epsilon, a.fraction, out=a.out, overwrite=a.overwrite,
                         options=_run_options(a))
    print(json.dumps(rel.result.to_dict()) if a.json else rel.result)
    _report_receipt(rel.receipt)
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

    rel = gof.release_test(
        a.source, _read_null(a.null), a.alpha, column=a.column,
        domain=tuple(a.domain) if a.domain else None, epsilon=a.epsilon, adaptive=a.adaptive, split=a.split,
        J=a.J, smoothness=a.smoothness, statistic=a.statistic, rows=a.rows, B=a.B, rng=a.calibration_seed,
        summary_out=a.summary_out, out=a.out, plot=a.plot, overwrite=a.overwrite, options=_run_options(a),
    )
    res, _ = rel.result
    print(json.dumps(res.to_dict()) if a.json else res)
    _report_receipt(rel.receipt)
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
    return None if labels is None else list(labels)


def _typed_categories(labels: list[str], dataset: Any) -> list[Any]:
    """Command-line labels typed as the column: integers on an integer column, else the strings as given
    (``--categories 01 02 10`` matches the strings "01", "02", "10" of a string column)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if dataset.kind != "parquet" or not dataset.pieces:
        return labels
    t = pq.read_schema(dataset.pieces[0].path, filesystem=dataset.fs).field(dataset.column).type
    t = t.value_type if pa.types.is_dictionary(t) else t
    if not pa.types.is_integer(t):
        return labels
    try:
        return [int(x) for x in labels]
    except ValueError:
        raise LdpDaskError(f"column {dataset.column!r} holds integers, so every category must be one; "
                           f"got {next(x for x in labels if not x.lstrip('-').isdigit())!r}.") from None


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
    opts.update({k: getattr(a, k) for k in ("threshold", "gamma") if getattr(a, k) is not None})
    return opts


def _cmd_privatize(a: argparse.Namespace) -> int:
    from ldp_dask.channels import AUTO, build_channel, value_kind_of
    from ldp_dask.pipeline import release_summary
    from ldp_dask.release import plan

    chosen = _channel_options(a)
    if a.channel == AUTO:
        chosen.update(mode=a.mode, target=a.target)
    elif a.target is not None:
        raise LdpDaskError("--target applies to --channel auto only.")
    kind = value_kind_of(a.channel, chosen.get("categories"))
    opts = _run_options(a, kind == "numeric", partition_rows=a.partition_rows, split_every=a.split_every)
    dataset = plan(a.source, a.column, kind, opts)
    if "categories" in chosen:
        chosen["categories"] = _typed_categories(chosen["categories"], dataset)
    channel = build_channel(a.channel, a.epsilon, tuple(a.domain) if a.domain else None, n=dataset.n, **chosen)
    if a.incremental or a.since or a.window:
        from ldp_dask.partitions import follows_n

        follows_n(lambda m: build_channel(a.channel, a.epsilon, tuple(a.domain) if a.domain else None, n=m,
                                          **chosen), dataset.n)  # warns (LdpDaskWarning)
    rel = release_summary(dataset, column=a.column, channel=channel, mode=a.mode, out=a.out, rows_path=a.rows_out,
                          overwrite=a.overwrite, options=opts, incremental=a.incremental, since=a.since,
                          window=a.window)
    summary = rel.result
    meta = summary.file_metadata()
    info = {"summary": rel.written["summary"], "channel": channel.name, "params": channel.params(), "n": summary.n,
            "epsilon": channel.epsilon, "epsilon_spent": channel.epsilon_spent(), "mode": a.mode,
            "key_id": meta["key_id"], "key_source": meta["key_source"], "rows_out": a.rows_out,
            "privacy_unit": summary.privacy_unit, "epsilon_per_unit": summary.epsilon_per_unit,
            "choice": summary.metadata.get("choice"), "partitions_read": summary.metadata.get("partitions_read"),
            "partitions_reused": summary.metadata.get("partitions_reused"),
            "epsilon_charged": rel.receipt.epsilon if rel.receipt and rel.receipt.ledger else None,
            "partitions_charged": rel.receipt.partitions[0] if rel.receipt and rel.receipt.partitions else None}
    if a.json:
        print(json.dumps(info))
    else:
        print(f"wrote {info['summary']}: {summary.channel!r}, n={summary.n:,}, {summary.privacy_line()}, "
              f"key id {meta['key_id']} ({meta['key_source']})")
        if summary.partitions:
            print(f"partitions: {info['partitions_read']} read, {info['partitions_reused']} reused from "
                  f"{a.since or 'no earlier summary'} without reading them; {len(summary.partitions)} kept in the "
                  "summary")
        if info["choice"]:
            c = info["choice"]
            print(f"auto: chose {c['chosen']} for the {c['target']} ({c['criterion']})")
        if meta["key_source"] == "random":
            print("note: a fresh random secret was used; set LDP_DASK_SECRET or --secret-file to make releases reproducible")
    _report_receipt(rel.receipt)
    if summary.n_clipped is not None:
        # exact count, shown to the operator only; never written to the summary
        print(f"clipped {summary.n_clipped:,} out-of-domain values to the domain (operator-only, not released)",
              file=sys.stderr)
    return 0


def _cmd_estimate(a: argparse.Namespace) -> int:
    import ldp_dask
    from ldp_dask.release import publish

    s = ldp_dask.read_summary(a.summary)
    est = ldp_dask.estimate(s, **_estimator_options(a))
    if a.plot and not hasattr(est, "plot"):
        raise LdpDaskError(f"--plot: the estimate of a {s.channel.name!r} summary has no plot.")
    tidy = a.out is not None and a.out.lower().endswith(".parquet")
    _, written = publish({"table" if tidy else "json": a.out, "plot": a.plot}, lambda outputs: _written(est, outputs),
                         overwrite=a.overwrite, inputs=[a.summary])
    if a.json:
        _warn(est)
        print(json.dumps({**est.to_dict(), "summary_integrity": s.integrity}))
        return 0
    _warn(est)
    print(est)
    print(f"summary integrity: {s.integrity}")
    for label, path in written.items():
        print(f"wrote {label}: {path}")
    return 0


def _warn(result: Any) -> None:
    """A result's warnings on stderr, one line each (never silent; they are in its JSON and report too)."""
    for w in getattr(result, "warnings", ()):
        print(f"ldp-dask: warning: {w}", file=sys.stderr)


def _cmd_verify(a: argparse.Namespace) -> int:
    from ldp_dask.noise import resolve_secret
    from ldp_dask.summary import verify_summary

    key = resolve_secret(seed=a.seed, secret_file=a.secret_file) if (a.seed is not None or a.secret_file) else None
    s = verify_summary(a.summary, key)
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
    s = merge_summaries(a.summaries, out=a.out, window=a.window, key=key, overwrite=a.overwrite)
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

    path = write_report(a.summary, a.out or default_report_path(a.summary), level=a.confidence, overwrite=a.overwrite)
    if a.json:
        print(json.dumps({"report": path, "summary": a.summary}))
    else:
        print(f"wrote {path}")
    return 0


def _cmd_demo(a: argparse.Namespace) -> int:
    from .demo import run_demo

    res = run_demo(out=a.out, rows=a.rows, files=a.files, epsilon=a.epsilon, workers=a.workers)
    if a.json:
        print(json.dumps(res, default=str))
        return 0
    p = res["paths"]
    print()
    print(f"ldp_dask demo finished in {res['seconds']:.1f} s")
    print(f"  density plot : {p['density_png']}  (L1 distance to the truth {res['l1']:.3f})")
    print(f"  mean         : {res['mean']['value']:,.1f}, interval [{res['mean']['ci'][0]:,.1f}, "
          f"{res['mean']['ci'][1]:,.1f}] (truth {res['true_mean']:,.1f})")
    print(f"  summaries    : {p['hist']}, {p['mean']}")
    print(f"  report       : {p['report']} (markdown), {p['html']} (HTML page)")
    print(f"  ledger       : {p['ledger']} (the demo's own; ldp-dask budget --ledger {p['ledger']})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ldp-dask`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
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
                                "gof": _cmd_gof, "quantiles": _cmd_quantiles, "budget": _cmd_budget,
                                "report": _cmd_report, "verify": _cmd_verify, "bounds": _cmd_bounds,
                                "merge": _cmd_merge}
    try:
        return handlers[args.command](args)
    except BrokenPipeError:  # e.g. `ldp-dask estimate s.parquet | head`: not an error
        sys.stderr.close()
        return 0
    except LdpDaskError as exc:
        msg = " ".join(str(exc).split())
        print(f"ldp-dask: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ldp-dask: interrupted; nothing was published or charged", file=sys.stderr)
        return 130
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
    return f"{type(exc).__name__}: {text} (nothing was published or charged; set {DEBUG_ENV}=1 for the traceback)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
