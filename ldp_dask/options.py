"""How a release runs, as one frozen object: where, with which key, how it is split and recorded.

Every entry point that releases something (:func:`ldp_dask.privatize`,
:func:`ldp_dask.gof.run`, :func:`ldp_dask.central.quantiles`, the CLI and the
flows) takes a :class:`RunOptions`, either whole (``options=``) or as keyword
arguments named after its fields::

    ldp_dask.privatize("data/", column="x", channel=ch, client="local", seed=1)
    opts = RunOptions(client="tcp://scheduler:8786", secret_file="/run/secrets/ldp", ledger=True)
    ldp_dask.privatize("data/", column="x", channel=ch, options=opts)
    ldp_dask.central.quantiles("data/", column="x", bounds=(0, 1), options=opts, progress=True)

The options stay on the driver: they hold the key material and are never
shipped to a Dask worker (tasks carry only their partition and their keys).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict

from ._validation import LdpDaskError, check_int
from .noise import Secret, resolve_secret
from .privacy import Person, Row, Unit, unit_of

__all__ = ["RunOptions", "RunKwargs", "Face", "faces", "DEFAULT_SPLIT_EVERY", "DEFAULT_RETRIES", "UNIT_SPELLING",
           "DEFAULT_CENTRAL_DELTA", "check_night", "tonight"]

#: The public spelling of :attr:`RunOptions.unit` accepted by :meth:`RunOptions.of` and every entry point.
UNIT_SPELLING = ("privacy_unit", "max_contributions", "unit_nulls")

#: Fan-in of the tree reduction: few levels, small combine tasks.
DEFAULT_SPLIT_EVERY = 8
#: Target rows per partition: large, because a Dask task costs milliseconds.
DEFAULT_PARTITION_ROWS = 1 << 22
#: With no cluster named (``client=None`` and none in the environment), sources of at most this many rows run in
#: this process: starting a LocalCluster costs seconds, more than the work (336,776 rows: 14.1 s with a new
#: cluster, 3.9 s in process; ``benchmarks/scaling.py`` measures it).
DEFAULT_IN_PROCESS_ROWS = 2_000_000
#: Seconds to reach a named scheduler before giving up with one line.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Dask retries per task; a retried task reproduces its output exactly (keyed noise).
DEFAULT_RETRIES = 2
#: δ of the central guarantee a summary states (:mod:`ldp_dask.amplification`), unless the run sets another
DEFAULT_CENTRAL_DELTA = 1e-9
#: the range a run's central δ may take: below 10⁻¹⁵ the computations' own tail bounds (10⁻³⁰ per side) start to
#: matter; above 10⁻³ a δ is no longer "cryptographically small" for any table worth protecting
CENTRAL_DELTA_RANGE = (1e-15, 1e-3)


def check_night(night: Any) -> str:
    """``night`` if it is an ISO date ``YYYY-MM-DD`` (the night of a longitudinal release), else an error naming it."""
    try:
        ok = isinstance(night, str) and len(night) == 10 and datetime.date.fromisoformat(night).isoformat() == night
    except ValueError:
        ok = False
    if not ok:
        raise LdpDaskError(f"The 'night' parameter must be an ISO date YYYY-MM-DD (the night a longitudinal release "
                           f"belongs to). Got {night!r} instead.")
    return night


def tonight() -> str:
    """Today's date in UTC, ISO: the night of a longitudinal release that names none."""
    return datetime.datetime.now(datetime.UTC).date().isoformat()


def cluster_in_environment() -> bool:
    """Whether the environment names a cluster: ``DASK_SCHEDULER_ADDRESS`` (Dask's ``scheduler-address``
    setting) or ``LDP_DASK_CLUSTER``."""
    if os.environ.get("DASK_SCHEDULER_ADDRESS") or os.environ.get("LDP_DASK_CLUSTER"):
        return True
    import dask

    return bool(dask.config.get("scheduler-address", None))


@dataclass(frozen=True)
class Face:
    """How one run option appears to users: its help, its command-line flags, its flow parameters.

    Declared with the field (:class:`RunOptions`), so that the command line
    (:mod:`ldp_dask.cli_parser`) and the flows (``flows/``) are generated from
    it and a new option appears everywhere at once. ``hidden`` says why a face
    lacks the option (a test requires a reason for every absence).
    """

    help: str
    cli: tuple[str, ...] = ()
    flow: tuple[str, ...] = ()
    hidden: str = ""


def _declared(default: Any, help: str, *, cli: tuple[str, ...] = (), flow: tuple[str, ...] = (),
              hidden: str = "") -> Any:
    return field(default=default, metadata={"face": Face(help, cli, flow, hidden)})


def faces() -> dict[str, Face]:
    """Every run option's :class:`Face`, by field name, in declaration order."""
    return {f.name: f.metadata["face"] for f in fields(RunOptions)}


@dataclass(frozen=True, repr=False)
class RunOptions:
    """Run options of a release, declared once for every entry point.

    Parameters
    ----------
    client : None, "local", str or distributed.Client
        Where partitions are processed. ``None``: the environment's cluster
        (``DASK_SCHEDULER_ADDRESS``, ``LDP_DASK_CLUSTER``), else this process
        for sources of at most ``in_process_rows`` rows, else a LocalCluster
        of worker processes started for the run; ``"local"``: in this process,
        without Dask; an address or a Client: that running cluster (reached
        within ``connect_timeout`` seconds, else an error). In-memory sources
        always run in this process. The result is the same wherever it runs.
    in_process_rows : int
        With ``client=None`` and no cluster in the environment, sources of at
        most this many rows run in this process (default 2,000,000; 0: always
        start a LocalCluster).
    connect_timeout : float
        Seconds to reach a named scheduler (default 10).
    secret, seed, secret_file :
        The key, at most one of them: key material (≥ 16 bytes), an insecure
        integer seed for simulations and tests, or a file holding the key.
        Without any, ``LDP_DASK_SECRET``, then ``LDP_DASK_SECRET_FILE``, else a
        fresh random key (the release is then not reproducible). See
        :func:`ldp_dask.noise.resolve_secret`.
    clip : bool
        Clamp out-of-domain values to the public domain (counted for the
        operator, never released) instead of failing.
    partition_rows : int, optional
        Target rows per partition (default 2^22; whole row groups are never split).
    storage_options : mapping, optional
        fsspec options for URL sources and outputs (credentials, endpoints).
    split_every : int
        Fan-in of the tree reduction, ≥ 2 (default 8). Results are bit-identical
        for every value.
    retries : int
        Dask retries per task, 0–100 (default 2).
    progress : bool
        Show a progress bar of the rows processed on Dask.
    ledger : Ledger, path, True or False
        The privacy budget ledger that records the release and enforces its
        budgets. True (default; None means the same): the default ledger,
        ``$LDP_DASK_LEDGER`` or ``~/.ldp_dask/ledger.sqlite``, the one the
        command line and the flows use. False: the release is not recorded
        and no budget is checked — an explicit choice, which the result's
        receipt and its summary state (``ledger: not recorded``).
    flow_run_id : str, optional
        Recorded with the release in the ledger (set by the Prefect flows).
    unit : Row or Person
        What ε is counted per (:mod:`ldp_dask.privacy`): ``Row()`` (default)
        — a person with many rows spends it many times — or
        ``Person(column, k)``: each person contributes at most k rows, chosen
        by keyed randomness, each privatized at ε/k, and ε is per person
        (docs/privacy.md, "Privacy unit"). :meth:`of` and every entry point
        also take it as ``privacy_unit="user", max_contributions=3``.
    allow_large_epsilon : bool
        Release even when ε per unit exceeds 50 (:mod:`ldp_dask.policy`
        refuses it otherwise): for simulations only.
    nulls : float or str, optional
        The null policy. None (default): a column with nulls is refused, from
        the Parquet footers before any cluster starts. A value ``V``: each
        null is replaced by the public value ``V`` (a number in the domain, or
        one of the categories) before privatization; the channel's guarantee
        covers it like any other value, and ε is unchanged (docs/how-to/parameters.md).
        Dropping nulls is not offered: the released n would be the exact count
        of non-null values, which no finite ε covers.
    central_delta : float
        δ of the central (ε, δ) guarantee a summary-mode release states beside
        its local ε (default 10⁻⁹; 10⁻¹⁵ to 10⁻³): the summary records it, and
        the ledger composes the statements of a dataset's releases
        (docs/privacy.md, "The central guarantee"). It changes what is
        stated, never what is released.
    night : str, optional
        The night a longitudinal release belongs to, an ISO date
        ``YYYY-MM-DD`` (default: today's date in UTC, read once on the
        driver). The instantaneous layer is drawn afresh for every night, so
        two nights are never bit-identical; a re-run of the same night with
        the same reports is the same release, free (docs/privacy.md,
        "Longitudinal releases"). Refused for any other release.
    """

    client: Any = _declared(None, "where partitions run: a Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS, else "
                            "this process for small sources, else a new LocalCluster); 'local': this process",
                            cli=("--scheduler", "--local"), flow=("scheduler",))
    secret: Secret | bytes | str | None = _declared(
        None, "key material", hidden="key material is never a flag (other users see a command line) nor a flow "
                                     "parameter (Prefect stores parameters): use secret_file or $LDP_DASK_SECRET")
    seed: int | None = _declared(None, "insecure integer key, for simulations and tests only",
                                 cli=("--seed",), flow=("seed",))
    secret_file: str | os.PathLike[str] | None = _declared(
        None, "file holding the release key (else $LDP_DASK_SECRET, $LDP_DASK_SECRET_FILE, else a random key)",
        cli=("--secret-file",), flow=("secret_file",))
    clip: bool = _declared(False, "clamp out-of-domain values to the domain (counted for the operator only) instead "
                                  "of failing", cli=("--clip",), flow=("clip",))
    partition_rows: int | None = _declared(None, f"target rows per partition (default {DEFAULT_PARTITION_ROWS:,})",
                                           cli=("--partition-rows",), flow=("partition_rows",))
    storage_options: Mapping[str, Any] | None = _declared(
        None, "fsspec options for URL sources and outputs, as a JSON object (credentials, endpoints)",
        cli=("--storage-options",), flow=("storage_options",))
    split_every: int = _declared(DEFAULT_SPLIT_EVERY, f"fan-in of the tree reduction (default {DEFAULT_SPLIT_EVERY})",
                                 cli=("--split-every",), flow=("split_every",))
    retries: int = _declared(DEFAULT_RETRIES, f"Dask retries per task, 0-100 (default {DEFAULT_RETRIES})",
                             cli=("--retries",), flow=("retries",))
    progress: bool = _declared(False, "a progress bar of the rows processed (default: when stderr is a terminal)",
                               cli=("--progress",), hidden="flows: the Prefect UI follows a run; a terminal bar "
                                                          "has no place in a flow's log")
    ledger: Any = _declared(True, "the privacy budget ledger: a file or a postgresql:// URL (default "
                                  "$LDP_DASK_LEDGER or ~/.ldp_dask/ledger.sqlite); none: no record, no budget",
                            cli=("--ledger", "--no-ledger"), flow=("ledger",))
    flow_run_id: str | None = _declared(None, "the Prefect flow run recorded with the release",
                                        hidden="set by the flow itself from its run, never by a caller")
    unit: Unit = _declared(Row(), "what ε is counted per: a column naming the person a row belongs to, the reports "
                                  "per person, and what a null in that column does (default: per row)",
                           cli=("--privacy-unit", "--max-contributions", "--unit-nulls"),
                           flow=("privacy_unit", "max_contributions", "unit_nulls"))
    allow_large_epsilon: bool = _declared(False, "release even with ε above 50 per unit: simulations only",
                                          cli=("--allow-large-epsilon",), flow=("allow_large_epsilon",))
    in_process_rows: int = _declared(DEFAULT_IN_PROCESS_ROWS, "with no cluster named, sources of at most this many "
                                     f"rows run in this process (default {DEFAULT_IN_PROCESS_ROWS:,})",
                                     cli=("--in-process-rows",), flow=("in_process_rows",))
    connect_timeout: float = _declared(DEFAULT_CONNECT_TIMEOUT, "seconds to reach a named scheduler (default "
                                       f"{DEFAULT_CONNECT_TIMEOUT:g})", cli=("--connect-timeout",),
                                       flow=("connect_timeout",))
    nulls: Any = _declared(None, "what a null of the column becomes: refused (default), or a public value V that "
                                 "replaces it before privatization (ε unchanged)", cli=("--nulls",), flow=("nulls",))
    central_delta: float = _declared(DEFAULT_CENTRAL_DELTA, "δ of the central (ε, δ) guarantee a summary states "
                                     f"(default {DEFAULT_CENTRAL_DELTA:g}; it changes what is stated, not what is "
                                     "released)", cli=("--central-delta",), flow=("central_delta",))
    night: str | None = _declared(None, "the night a longitudinal release belongs to, YYYY-MM-DD (default: today, "
                                        "UTC): its instantaneous layer is drawn afresh each night; longitudinal "
                                        "releases only", cli=("--night",), flow=("night",))

    def __post_init__(self) -> None:
        if not isinstance(self.unit, (Row, Person)):
            raise LdpDaskError(f"The 'unit' parameter must be Row() or Person(column, k). Got {self.unit!r} instead.")
        check_int(self.split_every, "split_every", 2, 1 << 16)
        check_int(self.retries, "retries", 0, 100)
        check_int(self.in_process_rows, "in_process_rows", 0)
        if not (isinstance(self.connect_timeout, (int, float)) and 0 < self.connect_timeout <= 3600):
            raise LdpDaskError(f"The 'connect_timeout' parameter must be a number of seconds in (0, 3600]. "
                               f"Got {self.connect_timeout!r} instead.")
        if self.partition_rows is not None:
            check_int(self.partition_rows, "partition_rows", 1)
        lo, hi = CENTRAL_DELTA_RANGE
        if not (isinstance(self.central_delta, (int, float)) and not isinstance(self.central_delta, bool)
                and lo <= self.central_delta <= hi):
            raise LdpDaskError(f"The 'central_delta' parameter must be a number in [{lo:g}, {hi:g}]. "
                               f"Got {self.central_delta!r} instead.")
        if self.night is not None:
            check_night(self.night)
        for name in ("clip", "progress", "allow_large_epsilon"):
            if not isinstance(getattr(self, name), bool):
                raise LdpDaskError(f"The {name!r} parameter must be True or False. "
                                   f"Got {getattr(self, name)!r} instead.")
        if self.storage_options is not None and not isinstance(self.storage_options, Mapping):
            raise LdpDaskError("The 'storage_options' parameter must be a mapping of fsspec options. "
                               f"Got {type(self.storage_options).__name__} instead.")
        if self.nulls is not None and (isinstance(self.nulls, bool) or not isinstance(self.nulls, (int, float, str))
                                       or (isinstance(self.nulls, float) and not math.isfinite(self.nulls))):
            raise LdpDaskError(f"The 'nulls' parameter must be None (refuse nulls) or the public value that replaces "
                               f"them, a finite number or a category. Got {self.nulls!r} instead.")
        if sum(x is not None for x in (self.secret, self.seed, self.secret_file)) > 1:
            raise LdpDaskError("Give at most one of 'secret', 'seed' and 'secret_file'.")

    def __repr__(self) -> str:  # never shows key material
        shown = []
        for f in fields(self):
            v = getattr(self, f.name)
            if v != f.default:
                shown.append(f"{f.name}={'<hidden>' if f.name == 'secret' else repr(v)}")
        return f"RunOptions({', '.join(shown)})"

    @property
    def recorded(self) -> bool:
        """Whether the release is recorded in a ledger (every release is, unless ``ledger=False``)."""
        return self.ledger is not False

    @property
    def ledger_note(self) -> str:
        """What a release's summary and details say of its record: ``"recorded"`` or ``"not recorded
        (ledger=False)"``."""
        return "recorded" if self.recorded else "not recorded (ledger=False)"

    @property
    def privacy_unit(self) -> str | None:
        """The column naming a person, or None when ε is per row."""
        return self.unit.column

    @property
    def max_contributions(self) -> int:
        """Rows kept per person (1 per row)."""
        return self.unit.k

    @property
    def unit_nulls(self) -> str:
        """What a null in the privacy unit column does: ``"error"`` or ``"drop"`` (``"error"`` per row)."""
        return getattr(self.unit, "nulls", "error")

    @classmethod
    def of(cls, options: RunOptions | None = None, /, **overrides: Any) -> RunOptions:
        """``options`` (default: all defaults) with ``overrides`` applied; unknown names are refused.

        ``privacy_unit=`` and ``max_contributions=`` are the public spelling of ``unit``: each replaces its
        half of the unit of ``options``.
        """
        if options is not None and not isinstance(options, RunOptions):
            raise LdpDaskError(f"The 'options' parameter must be a RunOptions. Got {type(options).__name__} instead.")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(overrides) - set(names) - set(UNIT_SPELLING))
        if unknown:
            raise LdpDaskError(f"Unknown run option(s) {', '.join(map(repr, unknown))}; the run options are "
                               f"{', '.join(names + list(UNIT_SPELLING))}.")
        base = options if options is not None else cls()
        if any(name in overrides for name in UNIT_SPELLING):
            if "unit" in overrides:
                raise LdpDaskError("Give either 'unit' or 'privacy_unit'/'max_contributions', not both.")
            column = overrides.pop("privacy_unit", base.privacy_unit)
            k = overrides.pop("max_contributions", base.max_contributions if column is not None else 1)
            nulls = overrides.pop("unit_nulls", base.unit_nulls if column is not None else "error")
            overrides["unit"] = unit_of(column, k, nulls)
        return dataclasses.replace(base, **overrides) if overrides else base

    @property
    def in_process(self) -> bool:
        """Whether partitions run in this process (``client="local"``)."""
        return isinstance(self.client, str) and self.client == "local"

    def runs_in_process(self, rows: int) -> bool:
        """Whether a source of ``rows`` rows runs in this process: ``client="local"``, or no cluster named (here or
        in the environment) and at most ``in_process_rows`` rows."""
        if self.in_process:
            return True
        return self.client is None and rows <= self.in_process_rows and not cluster_in_environment()

    def key(self) -> Secret:
        """The run's key, resolved on the driver (see :func:`ldp_dask.noise.resolve_secret`)."""
        return resolve_secret(self.secret, self.seed, self.secret_file)


class RunKwargs(TypedDict, total=False):
    """The run options as keyword arguments of every releasing function (``privatize``, ``release_plan``,
    ``gof.run``, ``central.quantiles``, ``central.bounds``): each field of :class:`RunOptions` by name, with its type
    (its meaning and default are there), and ``privacy_unit``, ``max_contributions``, ``unit_nulls``, the public
    spelling of ``unit``. Declared as a ``TypedDict`` so that an editor completes and type-checks them
    (``**run: Unpack[RunKwargs]``, PEP 692); ``tests/unit/test_public_api.py`` holds it to :class:`RunOptions`."""

    client: Any
    secret: Secret | bytes | str | None
    seed: int | None
    secret_file: str | os.PathLike[str] | None
    clip: bool
    partition_rows: int | None
    storage_options: Mapping[str, Any] | None
    split_every: int
    retries: int
    progress: bool
    ledger: Any
    flow_run_id: str | None
    unit: Unit
    allow_large_epsilon: bool
    in_process_rows: int
    connect_timeout: float
    nulls: Any
    central_delta: float
    night: str | None
    privacy_unit: str | None
    max_contributions: int
    unit_nulls: str
