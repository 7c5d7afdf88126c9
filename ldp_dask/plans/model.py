"""Release plans: a table's report — several statistics over several columns — with its budget split chosen.

A plan lists statistics (a TOML file, or :class:`Plan` in Python)::

    [[statistic]]
    column = "distance"
    channel = "histogram"
    domain = [0, 5000]
    bins = 50

    [[statistic]]
    column = "carrier"
    target = "frequencies"           # the channel --channel auto chooses for the target
    categories = ["AA", "DL", "UA"]
    weight = 2                       # this statistic's error counts twice in the split

What a plan *is*: its statistics, their targets, channels, groups and output names, read from TOML and checked
before anything is read. How its budget is shared and each statistic's error predicted: :mod:`.budget`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._validation import LdpDaskError, check_probability, check_q
from ..channels import Channel, build_channel

__all__ = ["Statistic", "Plan", "Discovery", "TARGET_CHANNELS", "NOT_CHANNEL", "MIN_SPLIT_ROWS"]

#: What a statistic may say besides its column, channel or target, and weight.
_KEYS = {"column", "channel", "target", "weight", "name", "domain", "bins", "categories", "other", "noise",
         "mechanism", "encoding", "group_by", "q", "null", "alpha", "haar_level", "nulls", "groups", "group_kind",
         "top", "alphabet", "max_bytes"}
#: The channel a plan runs for each target: one whose estimate has a closed-form variance (``auto`` chooses among
#: several by their predicted errors, :func:`ldp_dask.channels.choose_channel`). A distribution and its quantiles
#: come from the Laplace histogram (the square wave, ``auto``'s choice for a distribution alone, has no closed form);
#: a goodness-of-fit test from the Haar channel it is calibrated for.
TARGET_CHANNELS = {"distribution": "histogram", "quantiles": "histogram", "mean": "auto", "frequencies": "auto",
                   "gof": "haar", "heavy_hitters": "heavy-hitters"}
#: What each channel a plan may run estimates, when the statistic names the channel rather than a target.
_CHANNEL_TARGETS = {"histogram": "distribution", "mean": "mean", "hybrid-mean": "mean", "rr": "frequencies",
                    "hadamard": "frequencies", "subset": "frequencies", "haar": "gof",
                    "heavy-hitters": "heavy_hitters"}
#: A statistic's keys that are not its channel's options: what its estimate or test takes, and its null policy.
NOT_CHANNEL = _NOT_CHANNEL = ("q", "null", "alpha", "nulls", "target", "haar_level", "group_by", "groups", "group_kind",
                              "top", "alphabet")
#: What a group may be: "private" (the label is privatized with the value) or "public" (declared public by the
#: operator: each group released on its own rows, group sizes released).
GROUP_KINDS = ("private", "public")
#: The targets a private group offers: means (the group-mean channel), and shares of categories or of a
#: distribution's bins within each group (the group-histogram channel).
PRIVATE_TARGETS = ("mean", "frequencies", "distribution")
#: The most keys a group may declare (besides "other").
MAX_GROUP_KEYS = 4095
#: What a statistic's ``groups`` says when its keys are found privately (:class:`Discovery`), and how many of the
#: found keys it takes by default (``top``)
DISCOVER = "discover"
DISCOVER_TOP = 10
#: A row split is offered only when every statistic expects at least this many rows (P(none) ≤ e^-30).
MIN_SPLIT_ROWS = 30
#: The largest plan file read (10^4 statistics take about 1 MiB).
MAX_PLAN_BYTES = 16 << 20


@dataclass(frozen=True)
class Statistic:
    """One statistic of a plan: a column, a channel (or ``"auto"`` with a target) and its options, a weight.

    Parameters
    ----------
    column : str
        The column released.
    channel : str
        A channel name (``histogram``, ``mean``, ``hybrid-mean``, ``rr``, ``hadamard``, ``subset``) or ``"auto"``.
    options : mapping
        The channel's options: ``domain``, ``bins``, ``categories``, ``target`` (for ``auto``), ...
    weight : float
        How much this statistic's predicted variance counts when the budget is split (default 1).
    name : str, optional
        Its label in outputs (default ``column.channel``).
    """

    column: str
    channel: str
    options: Mapping[str, Any] = field(default_factory=dict)
    weight: float = 1.0
    name: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.column, str) and self.column):
            raise LdpDaskError(f"The 'column' of a statistic must be a column name. Got {self.column!r} instead.")
        if "q" in self.options:
            if self.target != "quantiles":
                raise LdpDaskError(f"statistic {self.label!r} gives 'q', the levels of a 'quantiles' target only")
            check_q(self.options["q"])
        if self.target == "gof":
            from ..gof.nulls import parse_null

            if "null" not in self.options:
                raise LdpDaskError(f"statistic {self.label!r} is a goodness-of-fit test: it needs its 'null' "
                                   "distribution (e.g. null = \"beta(2,2)\" or \"uniform\")")
            parse_null(self.options["null"])
            check_probability(self.options.get("alpha", 0.05), "alpha")
        elif "null" in self.options or "alpha" in self.options:
            raise LdpDaskError(f"statistic {self.label!r} gives 'null' or 'alpha', which only a 'gof' target takes")
        if self.target != "heavy_hitters" and ("alphabet" in self.options or (
                "top" in self.options and self.options.get("groups") != DISCOVER)):
            raise LdpDaskError(f"statistic {self.label!r} gives 'top' or 'alphabet', which only a 'heavy_hitters' "
                               "target takes ('top' also: the number of keys of groups = \"discover\")")
        self._check_group()
        if not (isinstance(self.weight, (int, float)) and not isinstance(self.weight, bool)
                and 0 < self.weight < math.inf):
            raise LdpDaskError(f"The 'weight' of statistic {self.label!r} must be a number > 0. "
                               f"Got {self.weight!r} instead.")

    def _check_group(self) -> None:
        o = self.options
        if "group_by" not in o:
            if "groups" in o or "group_kind" in o:
                raise LdpDaskError(f"statistic {self.label!r} gives 'groups' or 'group_kind' without a 'group_by'")
            return
        if not (isinstance(o["group_by"], str) and o["group_by"]):
            raise LdpDaskError(f"the 'group_by' of statistic {self.label!r} must be a column name. Got "
                               f"{o['group_by']!r} instead.")
        keys = o.get("groups")
        if keys == DISCOVER:
            self._check_discover()
        elif not (isinstance(keys, list) and 1 <= len(keys) <= MAX_GROUP_KEYS
                  and len(set(map(str, keys))) == len(keys)):
            raise LdpDaskError(f"statistic {self.label!r} groups by {o['group_by']!r}: it needs 'groups', the list of "
                               f"its keys (1 to {MAX_GROUP_KEYS}, distinct), declared in the plan and never read from "
                               "the data, or \"discover\" (found privately, with a share of ε); rows with any other "
                               "label, or none, form the group 'other'")
        kind = o.get("group_kind", "private")
        if kind not in GROUP_KINDS:
            raise LdpDaskError(f"the 'group_kind' of statistic {self.label!r} must be one of {', '.join(GROUP_KINDS)}."
                               f" Got {kind!r} instead.")
        if kind == "private" and (self.target not in PRIVATE_TARGETS or "target" not in o):
            raise LdpDaskError(f"statistic {self.label!r}: a private group_by is offered for the targets "
                               f"{', '.join(PRIVATE_TARGETS)} (a channel over the group and the value together), "
                               "named with target = ...; for quantiles or a test per group, declare "
                               "group_kind = \"public\" if the group label is public")
        if kind == "private" and self.target == "frequencies" and "categories" not in o:
            raise LdpDaskError(f"statistic {self.label!r}: frequencies per private group need their 'categories'")

    def _check_discover(self) -> None:
        o = self.options
        if o.get("group_kind", "private") != "private":
            raise LdpDaskError(f"statistic {self.label!r}: groups found privately are private groups (the label "
                               "column is not public: its keys are found under ε, and no group's size may be released "
                               "exactly); leave out group_kind = \"public\", or declare the public keys")
        top = o.get("top", DISCOVER_TOP)
        if not (isinstance(top, int) and not isinstance(top, bool) and 1 <= top <= MAX_GROUP_KEYS):
            raise LdpDaskError(f"the 'top' of statistic {self.label!r} (how many found keys it groups by) must be an "
                               f"integer in [1, {MAX_GROUP_KEYS}]. Got {top!r} instead.")

    @property
    def discovers(self) -> bool:
        """Whether the statistic's group keys are found privately (``groups = "discover"``, :class:`Discovery`)."""
        return self.options.get("groups") == DISCOVER and "group_by" in self.options

    @property
    def top(self) -> int:
        """How many found keys a statistic with ``groups = "discover"`` groups by (at most)."""
        return int(self.options.get("top", DISCOVER_TOP))

    @property
    def group(self) -> tuple[str, tuple[Any, ...], bool] | None:
        """``(column, keys, public)`` of a grouped statistic, or None. Keys still to be found (``"discover"``)
        stand as ``top`` placeholders, for predicting the error before anything is spent (:func:`check`): a release
        groups by the keys found (:meth:`Plan.with_found`)."""
        if "group_by" not in self.options:
            return None
        keys = (tuple(f"(found key {i + 1})" for i in range(self.top)) if self.discovers
                else tuple(self.options["groups"]))
        return (self.options["group_by"], keys, self.options.get("group_kind", "private") == "public")

    def cells(self, epsilon: float, n: int) -> int:
        """A private group's cells: its categories (and "other" when asked), or its distribution's bins (as the
        Laplace histogram chooses them for a typical group's rows when ``bins`` is "auto" or absent)."""
        if self.target == "frequencies":
            return len(self.options["categories"]) + (1 if self.options.get("other") else 0)
        bins = self.options.get("bins")
        if isinstance(bins, int):
            return bins
        domain = self.options.get("domain")
        return int(build_channel("histogram", epsilon, tuple(domain) if domain is not None else None, bins=bins,
                                 n=max(1, n // self.groups)).bins)  # type: ignore[attr-defined]

    @property
    def groups(self) -> int:
        """How many groups its estimates come in: the declared keys and "other" (1 without a group)."""
        g = self.group
        return 1 if g is None else len(g[1]) + 1

    @property
    def label(self) -> str:
        return self.name or f"{self.column}.{self.options.get('target') or self.channel}"

    @property
    def target(self) -> str:
        """What the statistic estimates: ``distribution``, ``quantiles``, ``mean``, ``frequencies``, ``gof`` or
        ``heavy_hitters``."""
        return str(self.options.get("target") or _CHANNEL_TARGETS.get(self.channel, "distribution"))

    @property
    def fill(self) -> Any:
        """The statistic's null policy: the public value that replaces a null (``nulls = 0``), or None (the
        run's own ``--nulls``)."""
        return self.options.get("nulls")

    def channel_options(self) -> dict[str, Any]:
        """The options its channel is built with (the plan's own keys removed)."""
        opts = {k: v for k, v in self.options.items() if k not in _NOT_CHANNEL}
        if self.channel == "auto":
            opts["target"] = self.options.get("target")
        if "haar_level" in self.options:
            opts["level"] = self.options["haar_level"]
        return opts

    def build(self, epsilon: float, n: int) -> Channel:
        """The statistic's channel at ``epsilon`` for ``n`` rows (a public group's: for a typical group's rows)."""
        opts = self.channel_options()
        domain = opts.pop("domain", None)
        bins = opts.pop("bins", None)
        group = self.group
        noise = {"noise": opts["noise"]} if "noise" in opts else {}
        if group is not None and not group[2] and self.target == "mean":  # a private group: (group, value) pairs
            return build_channel("group-mean", epsilon, tuple(domain) if domain is not None else None,
                                 groups=self.groups, **noise)
        if group is not None and not group[2]:  # shares within each private group: (group, cell) pairs
            return build_channel("group-histogram", epsilon, groups=self.groups, cells=self.cells(epsilon, n),
                                 **noise)
        n = max(1, n // self.groups)
        return build_channel(self.channel, epsilon, tuple(domain) if domain is not None else None, bins=bins, n=n,
                             **opts)


#: page stems a statistic may not take: the report's index page and its estimates file
RESERVED_STEMS = frozenset({"index", "estimates"})
#: the longest file name (bytes) the outputs may have: every common file system's limit
MAX_FILE_NAME = 255


@dataclass(frozen=True)
class Discovery:
    """How a plan finds the keys of its ``groups = "discover"`` columns before releasing them (a ``[discover]``
    table in its TOML file).

    Each such column's most frequent values are found by a heavy-hitters release (:class:`ldp_dask.HeavyHitters`,
    Bassily, Nissim, Stemmer & Thakurta 2017) at ``share``·ε; the statistics are then released over the keys found,
    as private groups (every row reports its (group, value) pair), at the remaining (1 − share)·ε. By basic
    composition a row (a person) spends ε in all, wherever its label falls; the keys are post-processing of the first
    release.

    Parameters
    ----------
    share : float
        The share of the plan's ε spent on finding keys, in (0, 1) (default 0.25).
    max_bytes : int
        The longest key found whole, in UTF-8 bytes (the heavy-hitters channel's ``max_bytes``; default 16): a
        longer value is found only as its prefix and cannot be a key.
    alphabet : str, optional
        The characters a key may hold (public; narrows the search, spends nothing).
    """

    share: float = 0.25
    max_bytes: int = 16
    alphabet: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.share, (int, float)) and not isinstance(self.share, bool) and 0 < self.share < 1):
            raise LdpDaskError(f"The 'share' of a plan's [discover] table (the share of ε that finds group keys) must "
                               f"be a number in (0, 1). Got {self.share!r} instead.")
        if self.alphabet is not None and not (isinstance(self.alphabet, str) and self.alphabet):
            raise LdpDaskError(f"The 'alphabet' of a plan's [discover] table must be a non-empty string. Got "
                               f"{self.alphabet!r} instead.")
        build_channel("heavy-hitters", 1.0, max_bytes=self.max_bytes)  # its own validation of max_bytes


#: what a [discover] table may say
_DISCOVER_KEYS = {"share", "max_bytes", "alphabet"}


@dataclass(frozen=True)
class Plan:
    """The statistics of a report (:func:`Plan.from_toml`, :func:`Plan.from_dict`), and how the keys of groups
    declared ``"discover"`` are found (:class:`Discovery`; its defaults when such a group has no ``[discover]``)."""

    statistics: tuple[Statistic, ...]
    discovery: Discovery | None = None

    def __post_init__(self) -> None:
        if not self.statistics:
            raise LdpDaskError("A plan needs at least one statistic ([[statistic]] tables in its TOML file).")
        if self.discovery is not None and not self.discovered:
            raise LdpDaskError("The plan has a [discover] table but no statistic with groups = \"discover\".")
        if self.discovered and self.discovery is None:
            object.__setattr__(self, "discovery", Discovery())
        seen: dict[str, int] = {}
        for s in self.statistics:
            seen[s.label] = seen.get(s.label, 0) + 1
        twice = sorted(x for x, c in seen.items() if c > 1)
        if twice:
            raise LdpDaskError(f"A plan names statistic {twice[0]!r} twice; give each a distinct 'name'.")
        self.output_stems()

    def output_stems(self) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
        """The files a release of the plan writes, checked before any work: ``(statistic, suffix, stem)`` of each
        summary (one per public group, suffix ``.KEY``) and ``(statistic, stem)`` of each page. Refuses a name
        whose files would be the report's own (``index``, ``estimates``), two statistics (or a statistic and a
        public group of another) that would write the same file, and a name too long for a file system (255
        bytes a file name)."""
        from .._io import file_stem
        from ..channels.categorical import OTHER

        summaries = [(s.label, suffix, file_stem(s.label + suffix)) for s in self.statistics
                     for suffix in ([""] if s.group is None or not s.group[2]
                                    else [f".{k}" for k in (*s.group[1], OTHER)])]
        pages = [(s.label, file_stem(s.label)) for s in self.statistics]
        for label, stem in pages:
            if stem.lower() in RESERVED_STEMS:
                raise LdpDaskError(f"statistic {label!r}: its page would be {stem}.html, which the report's own "
                                   f"{'index page' if stem.lower() == 'index' else 'estimates file'} uses; give it "
                                   "another 'name'")
        seen: dict[str, tuple[str, str]] = {}
        for label, suffix, stem in summaries:
            other = seen.setdefault(stem.lower(), (label, suffix))
            if other != (label, suffix):
                what = " and ".join(f"{lb!r}" + (f" (its public group {sf[1:]!r})" if sf else "")
                                    for lb, sf in (other, (label, suffix)))
                raise LdpDaskError(f"statistics {what} would both write {stem}.summary.parquet (a public group's key "
                                   "is appended to its statistic's name); rename one with 'name'")
            if len(f"{stem}.summary.parquet".encode()) > MAX_FILE_NAME:
                raise LdpDaskError(f"statistic {label!r}: the file name {stem[:40]}….summary.parquet would be "
                                   f"{len(f'{stem}.summary.parquet'.encode())} bytes, over the {MAX_FILE_NAME} a file "
                                   "system allows; give it a shorter 'name'")
        return summaries, pages

    def targets(self, out: str | os.PathLike[str] | None) -> dict[str, str | None]:
        """Where a release of the plan into ``out`` writes, by output label (none without ``out``)."""
        if out is None:
            return {}
        d = os.fspath(out).rstrip("/")
        targets: dict[str, str | None] = {"index": f"{d}/index.html", "estimates": f"{d}/estimates.json"}
        summaries, pages = self.output_stems()
        for label, suffix, stem in summaries:
            targets[f"summary:{label}{suffix}"] = f"{d}/{stem}.summary.parquet"
        for label, stem in pages:
            targets[f"page:{label}"] = f"{d}/{stem}.html"
        return targets

    @property
    def discovered(self) -> dict[str, int]:
        """The group columns whose keys are found privately, and the most keys a statistic takes from each."""
        out: dict[str, int] = {}
        for s in self.statistics:
            if s.discovers:
                column = s.options["group_by"]
                out[column] = max(out.get(column, 0), s.top)
        return out

    def with_found(self, found: Mapping[str, Sequence[Any]]) -> Plan:
        """The plan grouped by the keys found (``found[column]``, most frequent first): each discovering statistic
        takes its first ``top``."""
        stats = []
        for s in self.statistics:
            if s.discovers:
                opts = {k: v for k, v in s.options.items() if k != "top"}
                opts["groups"] = list(found[s.options["group_by"]])[:s.top]
                s = dataclasses.replace(s, options=opts)
            stats.append(s)
        return Plan(tuple(stats))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "the plan") -> Plan:
        items = data.get("statistic")
        if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
            raise LdpDaskError(f"{where} must hold [[statistic]] tables (a list of statistics).")
        out = []
        for i, item in enumerate(items, 1):
            unknown = sorted(set(item) - _KEYS)
            if unknown:
                raise LdpDaskError(f"statistic {i} of {where} has unknown key(s) {', '.join(map(repr, unknown))}; "
                                   f"the keys are {', '.join(sorted(_KEYS))}.")
            if ("channel" in item) == ("target" in item):
                raise LdpDaskError(f"statistic {i} of {where} must name either a 'channel' or a 'target'.")
            target = item.get("target")
            if target is not None and target not in TARGET_CHANNELS:
                raise LdpDaskError(f"statistic {i} of {where} has target {target!r}; the targets are "
                                   f"{', '.join(TARGET_CHANNELS)}.")
            channel = item.get("channel") or TARGET_CHANNELS[target]
            opts = {k: v for k, v in item.items() if k not in ("column", "channel", "weight", "name")}
            out.append(Statistic(item.get("column", ""), channel, opts, item.get("weight", 1.0), item.get("name")))
        found = data.get("discover")
        if found is not None and not isinstance(found, dict):
            raise LdpDaskError(f"the 'discover' of {where} must be a table ([discover] with share, max_bytes, "
                               "alphabet).")
        unknown = sorted(set(found or {}) - _DISCOVER_KEYS)
        if unknown:
            raise LdpDaskError(f"the [discover] table of {where} has unknown key(s) {', '.join(map(repr, unknown))}; "
                               f"its keys are {', '.join(sorted(_DISCOVER_KEYS))}.")
        return cls(tuple(out), None if found is None else Discovery(**found))

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Plan:
        where = os.fspath(path)
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_PLAN_BYTES + 1)  # never the whole of /dev/zero
        except OSError as exc:
            raise LdpDaskError(f"cannot read the plan {where!r}: {exc.strerror}") from None
        if len(raw) > MAX_PLAN_BYTES:
            raise LdpDaskError(f"the plan {where!r} is larger than {MAX_PLAN_BYTES // (1 << 20)} MiB: a plan is a "
                               "short TOML file of [[statistic]] tables")
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise LdpDaskError(f"the plan {where!r} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
        except tomllib.TOMLDecodeError as exc:
            raise LdpDaskError(f"the plan {where!r} is not valid TOML: {exc}") from None
        except RecursionError:
            raise LdpDaskError(f"the plan {where!r} nests its tables or arrays too deeply to be a plan") from None
        return cls.from_dict(data, f"the plan {where!r}")
