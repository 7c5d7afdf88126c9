"""The ``ldp-dask`` argument parser: every command's flags, declared once (the handlers are in :mod:`ldp_dask.cli`).

Channel flags come from the options each channel module declares; the
retired ``--level`` flag is refused at parse time with the flag that replaces it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .options import (
    DEFAULT_CENTRAL_DELTA,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IN_PROCESS_ROWS,
    DEFAULT_RETRIES,
    DEFAULT_SPLIT_EVERY,
    faces,
)
from .policy import MAX_EPSILON

__all__ = ["build_parser", "show_progress", "run_flags"]


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (the usage is one ``--help`` away, not 30 lines of stderr);
    its subcommands' parsers are of the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")



def _ledger_path(text: str) -> str:
    """A --ledger value: a file or URL. Words that mean "no ledger" are refused (they would name a file in the
    working directory) and pointed to --no-ledger."""
    if text.strip().lower() in ("off", "none", "no", "false", "0", ""):
        raise argparse.ArgumentTypeError(f"--ledger takes a ledger file or postgresql:// URL, not {text!r}; to record "
                                         "nothing, give --no-ledger")
    return text

def number(text: str) -> float:
    """A number as the command line takes it: plain decimal or scientific notation, never Python's ``1_0`` (read as
    10, silently: the ε a typo would spend)."""
    if "_" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a plain number (an underscore is not read as a separator "
                                         f"here; write {text.replace('_', '')!r} if that is meant)")
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="ldp-dask", description="Locally private statistics over Parquet with Dask.")
    from ._version import __version__

    p.add_argument("--version", action="version", version=f"ldp-dask {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser("demo", help="run the embedded demo (synthetic data, LocalCluster, Prefect without a server)",
                       description="Generate synthetic Parquet data, privatize and estimate it with the Prefect flows.")
    d.add_argument("--out", default="demo-output", help="output directory (default: demo-output)")
    d.add_argument("--rows", type=int, default=2_000_000, help="rows to generate (default: 2,000,000)")
    d.add_argument("--files", type=int, default=4, help="Parquet files to generate (default: 4)")
    d.add_argument("--epsilon", type=number, default=1.0, help="ε per row (default: 1)")
    d.add_argument("--workers", type=int, default=2, help="Dask worker processes (default: 2)")
    d.add_argument("--json", action="store_true", help="print the result as JSON")
    d.add_argument("--data-only", metavar="DIR", default=None,
                   help="only write the sample table the README's and the docs' examples read (x, distance, carrier, "
                        "user_id, delay; 120,000 rows) into the new directory DIR, and stop")

    r = sub.add_parser("privatize", help="privatize a column into a summary file",
                       description="Privatize one column of a Parquet dataset with a local-DP channel.")
    r.add_argument("source", help="Parquet file, directory, glob or fsspec URL")
    r.add_argument("--column", required=True, help="column to privatize")
    _channel_args(r)
    r.add_argument("--out", required=True, help="summary file to write")
    r.add_argument("--mode", choices=["summary", "rows"], default="summary",
                   help="summary: only noisy sums leave workers (default); rows: also write privatized rows")
    r.add_argument("--rows-out", default=None, help="directory for privatized rows (rows mode)")
    r.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    r.add_argument("--incremental", action="store_true",
                   help="a partitioned release: each file is a partition with its own noise, and the summary keeps "
                        "every file's noisy sums so that a later run reads only new or changed files (--since)")
    r.add_argument("--since", default=None, metavar="SUMMARY",
                   help="a partitioned summary released earlier with the same key and channel: its unchanged files "
                        "are not read, their kept sums are used (implies --incremental); only files released anew "
                        "are charged")
    r.add_argument("--skip-changed", action="store_true",
                   help="with --since: a file that changed since that summary (a correction to an old day) is not "
                        "released again; its earlier sums are kept and a warning names it")
    r.add_argument("--window", default=None, metavar="DAYS",
                   help="e.g. 30d: release only the files of the last 30 days of a table partitioned by date "
                        "directories (date=YYYY-MM-DD/), ending at the newest (implies --incremental)")
    r.add_argument("--longitudinal", action="store_true",
                   help="with --privacy-unit: memoize each person's report (histogram, rr, mean), so that a person "
                        "whose value stays in its cell repeats last night's report; --epsilon is then the series' "
                        "whole cost per person, whatever the nights and changes, charged once at its first night")
    r.add_argument("--uncapped", action="store_true",
                   help="with --longitudinal: memoize each cell itself (no hash), --epsilon per distinct report, "
                        "the ledger charging each person by their changes (the series' cost is not known ahead)")
    r.add_argument("--memo-g", default="auto", metavar="G",
                   help="with --longitudinal: values each person's cells are hashed into before memoizing (a person "
                        "makes at most G distinct reports; default auto: 2 for ε ≤ 4)")
    r.add_argument("--instant", type=number, default=None, metavar="EPSILON",
                   help="with --longitudinal: ε of a fresh randomization of the memoized report each night "
                        "(RAPPOR's instantaneous layer; none by default)")
    r.add_argument("--memo-levels", type=int, default=1,
                   help="with --longitudinal and a mean: cells of the α-point rounding (default 1: the two ends "
                        "of the domain)")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    run_flags(r)

    e = sub.add_parser("estimate", help="estimate from a summary file",
                       description="Density (histogram or wavelet channel) or mean (mean channel) from a summary.")
    e.add_argument("summary", help="summary file written by 'ldp-dask privatize'")
    e.add_argument("--plot", default=None, help="write a PNG plot of the density")
    e.add_argument("--out", default=None,
                   help="write the estimate: a tidy Parquet table for a .parquet name (bins or categories, estimate, "
                        "standard error, interval bounds: pandas and DuckDB read it as it is), else JSON")
    e.add_argument("--raw", action="store_true",
                   help="density or frequencies: the raw unbiased estimate (no projection onto densities or the "
                        "simplex; it may fall below 0 or above 1)")
    e.add_argument("--simplex", action="store_true",
                   help="frequencies: project onto the simplex (the default; the unbiased estimate is kept as "
                        "'unbiased')")
    e.add_argument("--threshold", choices=["hard", "soft", "none"], default=None,
                   help="wavelet: hard (the paper's, default), soft, or none (linear estimator)")
    e.add_argument("--candidates", nargs="+", default=None, metavar="VALUE",
                   help="sketch: the values whose frequencies to estimate")
    e.add_argument("--top", type=int, default=None, metavar="K", help="heavy-hitters: the values listed (default 10)")
    e.add_argument("--beam", type=int, default=None,
                   help="heavy-hitters: the candidates kept at each prefix level (default max(32, 4K))")
    e.add_argument("--miss-share", type=number, default=None, metavar="SHARE",
                   help="heavy-hitters: state the chance that a value of at least this share is missed")
    e.add_argument("--alphabet", default=None,
                   help="heavy-hitters: the characters the values are made of, when public (the search extends "
                        "prefixes by these only: rarer values are found)")
    e.add_argument("--gamma", type=number, default=None, help="wavelet: threshold constant γ (default 4, chosen in benchmarks/wavelet_rates.py)")
    _confidence_arg(e)
    _key_args(e)
    _unverified_arg(e)
    e.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    e.add_argument("--all", action="store_true",
                   help="print every row of the table (a terminal gets the first and last of more than 64)")
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
    g.add_argument("--domain", nargs=2, type=number, default=None, metavar=("LO", "HI"), help="raw data: public domain")
    g.add_argument("--epsilon", type=number, default=None, help="raw data: ε per row")
    g.add_argument("--adaptive", action="store_true",
                   help="raw data: the adaptive test over several levels (--levels; default 1 to 4)")
    g.add_argument("--levels", type=int, nargs="+", default=None, metavar="J",
                   help="adaptive: the levels J of the test (default 1 to 4: departures best seen at 2 to 16 bins)")
    g.add_argument("--split", choices=["details", "rows", "epsilon"], default="details",
                   help="adaptive: one random Haar detail level per row, shared by every level (details, default: "
                        "the most powerful), one random level per row (rows, the paper's), or ε split across levels")
    g.add_argument("--haar-level", "--J", dest="J", type=int, default=None,
                   help="raw data: Haar level J, 2^J bins (default from n, ε and --smoothness)")
    g.add_argument("--smoothness", type=number, default=1.0, help="raw data: smoothness s for the default J (1)")
    g.add_argument("--summary-out", default=None, help="raw data: also write the summary here")
    _unverified_arg(g)
    g.add_argument("--out", default=None, help="write the result as JSON")
    g.add_argument("--plot", default=None, help="write a PNG of the null law with the observed statistic")
    g.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    g.add_argument("--json", action="store_true", help="print the result as JSON")
    run_flags(g)
    c = sub.add_parser("quantiles", help="central-DP quantiles of a column",
                       description="Release quantiles of a raw column with central differential privacy "
                                   "(one record replaced, n public). The exact statistics stay in memory.")
    c.add_argument("source", help="Parquet data (central DP), or a histogram/wavelet summary file (local DP)")
    c.add_argument("--column", default=None, help="column (raw data)")
    c.add_argument("--bounds", nargs=2, type=number, default=None, metavar=("LO", "HI"),
                   help="public bounds (raw data)")
    c.add_argument("--epsilon", type=number, default=None, help="total ε for all the quantiles (raw data)")
    _confidence_arg(c, "summary: ")
    c.add_argument("--interval", choices=["bins", "band", "envelope", "bootstrap"], default=None,
                   help="summary: CDF band at the bin edges (default for histogram/haar), interpolated within "
                        "bins, CDF envelopes (default for wavelet), or parametric bootstrap (under-covers)")
    c.add_argument("--B", type=int, default=400, help="summary: bootstrap replicates (default 400)")
    c.add_argument("--q", type=number, nargs="+", default=None, help="probabilities in (0, 1), increasing")
    c.add_argument("--deciles", action="store_true", help="the nine deciles (the default when --q is absent)")
    c.add_argument("--method", default="best",
                   choices=["best", "joint-exp", "inverse-sensitivity", "histogram", "laplace"],
                   help="mechanism (default best: joint-exp up to n = 102,400, then inverse-sensitivity; "
                        "measured in benchmarks/quantiles.py)")
    c.add_argument("--rho", type=number, default=None,
                   help="inverse-sensitivity smoothing ρ (default (hi − lo)/2^20)")
    c.add_argument("--steps", type=int, default=None, help="histogram method: intervals (default 1.5 n / log n)")
    c.add_argument("--out", default=None, help="write the release as JSON")
    c.add_argument("--plot", default=None, help="PNG of the released quantile function (public information only)")
    c.add_argument("--html", default=None,
                   help="self-contained HTML page: the values with their intervals (local) or a-priori accuracy "
                        "(central), and the plot")
    c.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    c.add_argument("--json", action="store_true", help="print the release as JSON")
    run_flags(c)

    bd = sub.add_parser("bounds", help="central-DP bounds of a column, to choose a public domain",
                        description="Release symmetric bounds (-2^k, 2^k) holding about --fraction of a raw "
                                    "column, with central DP (AboveThreshold), charged to the central budget. "
                                    "For operators who run central releases anyway; the domain of a local "
                                    "release can then be chosen without looking at the data.")
    bd.add_argument("source", help="Parquet data (file, directory, glob, fsspec URL)")
    bd.add_argument("--column", required=True, help="the numeric column")
    bd.add_argument("--epsilon", type=number, default=0.1, help="central ε spent (default 0.1)")
    bd.add_argument("--fraction", type=number, default=0.95, help="share of the values inside, in [0.5, 1) (0.95)")
    bd.add_argument("--out", default=None, help="write the release as JSON")
    bd.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    bd.add_argument("--json", action="store_true", help="print the release as JSON")
    run_flags(bd)

    h = sub.add_parser("report", help="write an HTML page for a summary (estimate, uncertainty, privacy)",
                       description="Write a self-contained HTML page with the estimate of a summary, its "
                                   "uncertainty (plot, intervals) and the privacy parameters of the release.")
    h.add_argument("summary", help="summary file written by 'ldp-dask privatize'")
    h.add_argument("--out", default=None, help="HTML file to write (default: the summary's name with .html)")
    _confidence_arg(h)
    _key_args(h)
    _unverified_arg(h)
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
    _unverified_arg(m)
    m.add_argument("--overwrite", action="store_true", help="replace an existing output")
    m.add_argument("--json", action="store_true", help="print the result as JSON")

    pl = sub.add_parser("plan", help="check a release plan: each statistic's ε, rows and predicted error",
                        description="Split the total ε per row among a plan's statistics (a TOML file of "
                                    "[[statistic]] tables) and predict each one's standard error, from the Parquet "
                                    "footers only: nothing is read beyond them, nothing is spent.")
    pl.add_argument("action", choices=["check"])
    pl.add_argument("plan", help="the plan: a TOML file of [[statistic]] tables")
    pl.add_argument("source", help="the Parquet file, directory, glob or URL")
    pl.add_argument("--epsilon", type=number, required=True, help="the total ε per row the plan may spend")
    pl.add_argument("--design", choices=["split-epsilon", "split-rows"], default=None,
                    help="force a design (default: the one predicting less error)")
    for flag in ("--privacy-unit", "--max-contributions", "--unit-nulls"):  # the unit, as the release takes it
        pl.add_argument(flag, **_FLAG_SPECS[flag])
    pl.add_argument("--clip", action="store_true",
                    help="as the release's --clip: values outside a statistic's domain will be clamped, so the "
                         "footers' out-of-domain values are not refused")
    pl.add_argument("--json", action="store_true", help="print as JSON")

    rl = sub.add_parser("release", help="release a plan: every statistic of a report from one pass, one release",
                        description="Run a plan (a TOML file of [[statistic]] tables) over a table: its ε split as "
                                    "'plan check' shows, every statistic from one read of the data, one ledger "
                                    "entry, and with --out a directory of summaries, a report (index.html and a "
                                    "page per statistic) and estimates.json.")
    rl.add_argument("plan", help="the plan: a TOML file of [[statistic]] tables")
    rl.add_argument("source", help="the Parquet file, directory, glob or URL")
    rl.add_argument("--epsilon", type=number, required=True, help="the total ε per row the plan spends")
    rl.add_argument("--out", default=None, help="directory to write the summaries, the report and estimates.json")
    rl.add_argument("--design", choices=["split-epsilon", "split-rows"], default=None,
                    help="force a design (default: the one predicting less error, as 'plan check' prints)")
    rl.add_argument("--incremental", action="store_true",
                    help="a night of a series: each file is a partition kept in every statistic's summary (with "
                         "--privacy-unit, tonight's files are one partition, their persons bounded together); the "
                         "design and the ε split are chosen on the first night and kept")
    rl.add_argument("--since", default=None, metavar="DIR",
                    help="the --out directory of the series' earlier night: only files added or changed since are "
                         "read and charged (implies --incremental)")
    rl.add_argument("--skip-changed", action="store_true",
                    help="with --since: do not release again a file changed since (keep its earlier sums)")
    rl.add_argument("--longitudinal", action="store_true",
                    help="with --privacy-unit: memoize every person's report of every statistic (histograms, "
                         "frequencies, means), each series capped, so that --epsilon is the plan's whole cost per "
                         "person, whatever the nights and changes, charged once at its first night")
    _confidence_arg(rl)
    rl.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    rl.add_argument("--json", action="store_true", help="print every estimate as JSON")
    run_flags(rl)

    b = sub.add_parser("budget", help="show the privacy budget ledger, or declare a dataset and its budget",
                       description="Every release is recorded in the ledger and charged, per person, against the "
                                   "dataset it reads: a declared dataset whose root contains (or is inside) the "
                                   "source, else the source's own root. Budgets cover all columns, local and "
                                   "central releases together.")
    b.add_argument("action", nargs="?", choices=["list", "set"], default="list")
    b.add_argument("name", nargs="?", default=None, help="set: the dataset's name")
    b.add_argument("--source", default=None, help="set: the dataset's root (directory, file, glob or URL)")
    b.add_argument("--limit", type=number, default=None, help="set: the ε budget per person")
    b.add_argument("--privacy-unit", default=None, metavar="COLUMN",
                   help="set: the column naming a person; every release of the dataset must use it "
                        "(default: ε per row)")
    b.add_argument("--append-only", action="store_true",
                   help="set: files are only ever added to the dataset (never renamed, rewritten, copied or "
                        "removed), so ε per row follows each file: a row pays for the releases that read it. Every "
                        "release checks it as far as it can; where a check fails the dataset is counted "
                        "conservatively from then on (the sum of all its releases), as it is without this flag")
    b.add_argument("--central", type=number, nargs=2, default=None, metavar=("EPSILON", "DELTA"),
                   help="set: a central budget (ε, δ) per person the releases must also fit: the central guarantee "
                        "each release satisfies (a summary's, by shuffling or its summed noise; any other release's "
                        "ε), composed with a privacy-loss-distribution accountant")
    b.add_argument("--entries", action="store_true", help="list: every release, not only the totals")
    b.add_argument("--json", action="store_true", help="print as JSON")
    b.add_argument("--ledger", default=None, type=lambda text: _ledger_path(text),
                   help="ledger file or postgresql:// URL (default $LDP_DASK_LEDGER or ~/.ldp_dask/ledger.sqlite)")
    for name, command in sub.choices.items():
        command.add_argument("--level", action=_Refused, nargs="?", help=argparse.SUPPRESS,
                             instead=_LEVEL_INSTEAD.get(name, _LEVEL_INSTEAD[None]))
        # a negative number in any notation is a value, not an option (argparse knows -1 and -.5, not -1e6)
        command._negative_number_matcher = _NEGATIVE_NUMBER
    return p


#: what a negative number looks like on the command line: -1, -0.5, -.5, -1e6, -2.5E-3
_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


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
            value = number(text)
        except argparse.ArgumentTypeError:
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


def _key_args(p: argparse.ArgumentParser) -> None:
    """--secret-file and --seed: the key a summary is verified under (else LDP_DASK_SECRET / LDP_DASK_SECRET_FILE)."""
    p.add_argument("--secret-file", default=None,
                   help="file with the release key: the summary is verified under it (its integrity then says so)")
    p.add_argument("--seed", type=int, default=None, help="the insecure seed the summary was released with")


def _unverified_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-unverified", action="store_true",
                   help="use a summary that the key at hand cannot verify (no MAC, or another key id): refused "
                        "otherwise, since it may have been altered")


def _channel_args(p: argparse.ArgumentParser) -> None:
    """--channel, --epsilon, --domain and one flag per option the channels declare (ldp_dask.channels)."""
    from ldp_dask.channels import AUTO, CHANNELS, TARGETS, channel_options

    p.add_argument("--channel", required=True, choices=[AUTO, *sorted(CHANNELS)],
                   help="local channel; auto: the smallest predicted error for the column (docs/channels.md)")
    p.add_argument("--target", choices=TARGETS, default=None,
                   help="auto: what to optimise for (categories: frequencies; numeric columns: distribution, the "
                        "default, or mean)")
    p.add_argument("--epsilon", type=number, required=True,
                   help=f"ε per row, > 0 (refused above {MAX_EPSILON:g} per unit without --allow-large-epsilon)")
    numeric = sorted(n for n, c in CHANNELS.items() if c.value_kind == "numeric")
    p.add_argument("--domain", nargs=2, type=number, default=None, metavar=("LO", "HI"),
                   help=f"public domain ({', '.join(numeric)})")
    for name, (opt, users) in channel_options().items():
        if not opt.cli:
            continue
        default = "" if opt.default in (None, False) else f" (default {opt.default})"
        text = f"{', '.join(users) if len(users) < 4 else 'Laplace channels'}: {opt.help}{default}"
        if opt.switch:
            p.add_argument(opt.flag, action="store_true", default=None, dest=name, help=text)
        else:
            p.add_argument(opt.flag, dest=name, type=number if opt.type is float else opt.type, choices=opt.choices,
                           nargs="+" if opt.many else None,
                           default=None, help=text)
        if name == "categories":
            p.add_argument("--categories-file", default=None, help="rr, hadamard, subset: file with one public category per line")


def show_progress(a: argparse.Namespace) -> bool:
    return sys.stderr.isatty() if a.progress is None else bool(a.progress)


#: How each run option's flags parse (argparse's part); their help comes from the option's declaration
#: (:class:`ldp_dask.options.Face`), so the flags and the flows' parameters cannot drift apart.
_FLAG_SPECS: dict[str, dict[str, Any]] = {
    "--scheduler": {"default": None, "metavar": "ADDRESS"},
    "--local": {"action": "store_true", "help": "run in this process, without Dask"},
    "--seed": {"type": int, "default": None},
    "--secret-file": {"default": None},
    "--clip": {"action": "store_true"},
    "--partition-rows": {"type": int, "default": None},
    "--storage-options": {"type": lambda text: _json_object(text, "--storage-options"), "default": None,
                          "metavar": "JSON"},
    "--split-every": {"type": int, "default": DEFAULT_SPLIT_EVERY},
    "--retries": {"type": int, "default": DEFAULT_RETRIES},
    "--progress": {"action": argparse.BooleanOptionalAction, "default": None},
    "--ledger": {"default": None, "type": lambda text: _ledger_path(text)},
    "--no-ledger": {"action": "store_true", "help": "do not record the release (no budget enforced)"},
    "--privacy-unit": {"default": None, "metavar": "COLUMN",
                       "help": "column naming the person each row belongs to: ε is then per person (default: per "
                               "row)"},
    "--unit-nulls": {"choices": ["error", "drop"], "default": "error",
                     "help": "with --privacy-unit: a row whose unit is null belongs to no person; refuse the release "
                             "(error, the default) or drop those rows (each person still makes exactly K reports, so "
                             "nothing released counts them)"},
    "--max-contributions": {"type": int, "default": 1, "metavar": "K",
                            "help": "with --privacy-unit: rows kept per person, chosen at random; ε/K per row "
                                    "(default 1)"},
    "--allow-large-epsilon": {"action": "store_true"},
    "--in-process-rows": {"type": int, "default": DEFAULT_IN_PROCESS_ROWS},
    "--connect-timeout": {"type": float, "default": DEFAULT_CONNECT_TIMEOUT},
    "--central-delta": {"type": float, "default": DEFAULT_CENTRAL_DELTA, "metavar": "DELTA"},
    "--night": {"default": None, "metavar": "YYYY-MM-DD"},
    "--nulls": {"nargs": "+", "default": ["error"], "metavar": "POLICY",
                "help": "what a null of the column becomes: 'error' (default: refused, from the Parquet footers "
                        "before any work) or 'value V', or V alone (replaced by the public value V before "
                        "privatization; ε unchanged). Dropping is not offered: it would release the exact count of non-nulls"},
}


def _json_object(text: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{flag} takes a JSON object, e.g. '{{\"anon\": true}}'; got {text!r}")
    return value


def run_flags(p: argparse.ArgumentParser) -> None:
    """Every run option's flags (:func:`ldp_dask.options.faces`), in one group of the command's help."""
    group = p.add_argument_group("how the release runs")
    for face in faces().values():
        for flag in face.cli:
            spec = dict(_FLAG_SPECS[flag])
            spec.setdefault("help", face.help.replace("%", "%%"))
            group.add_argument(flag, **spec)
