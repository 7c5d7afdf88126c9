"""Griffe extension for the API reference: the docstrings' Sphinx roles become links.

The package's docstrings are numpy style and cross-reference with Sphinx roles (``:func:`privatize```,
``:class:`~ldp_dask.summary.Summary```), which an IDE and ``help()`` show as they are. mkdocstrings would print them
as raw text, so at build time each role is replaced by an *optional* cross-reference: a link where the target is
documented on the site, its name in code font where it is not (no build warning either way). The name is resolved
in the scope of the object whose docstring holds it (its module's imports and definitions), then followed to the
object's canonical path, which is where the site documents it. ``~`` shows the last component, as in Sphinx.

mkdocs.yml loads it: ``plugins: mkdocstrings: handlers: python: options: extensions``.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

#: a Sphinx role: :class:`X`, :py:func:`~a.b`, :meth:`title <a.b.c>`
ROLE = re.compile(r":(?:py:)?(?P<role>class|func|meth|attr|mod|data|obj|exc|const):`(?P<body>[^`]+)`")


def _objects(obj: Any) -> Any:
    """``obj`` and every object defined under it (aliases, which document nothing of their own, skipped)."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _objects(member)


def _canonical(path: str, collection: Any) -> str:
    try:
        return str(collection[path].canonical_path)
    except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return path


def _resolve(target: str, scope: Any, collection: Any) -> str:
    """The full path of ``target`` as written in ``scope``'s docstring."""
    head, _, rest = target.partition(".")
    if head in collection.members:  # already absolute: ldp_dask.x.y
        return _canonical(target, collection)
    for where in (scope, getattr(scope, "parent", None)):
        if where is None:
            continue
        try:
            full = where.resolve(head)
        except (griffe.NameResolutionError, AttributeError):
            continue
        return _canonical(f"{full}.{rest}" if rest else full, collection)
    return target


def replace_roles(text: str, scope: Any, collection: Any) -> str:
    """``text`` with every Sphinx role replaced by an optional cross-reference (module docstring)."""

    def link(m: re.Match[str]) -> str:
        body = m["body"].strip()
        shown, sep, target = body.rpartition("<")
        if sep and target.endswith(">"):  # :class:`title <target>`
            shown, target = shown.strip(), target[:-1].strip()
        else:
            target, shown = body, ""
        short = target.startswith("~")
        target = target.lstrip("~.")
        if not shown:
            shown = target.rsplit(".", 1)[-1] if short else target
            if m["role"] in ("func", "meth") and not shown.endswith(")"):
                shown += "()"
        path = _resolve(target, scope, collection)
        return (f'<autoref identifier="{html.escape(path, quote=True)}" optional>'
                f"<code>{html.escape(shown)}</code></autoref>")

    return ROLE.sub(link, text)


def _run_options(collection: Any) -> list[griffe.Parameter]:
    """The run options as keyword-only parameters: ``RunKwargs``' names and types (as the source writes them, so
    that they cross-reference), ``RunOptions``' defaults."""
    import dataclasses

    from ldp_dask.options import RunOptions
    from ldp_dask.privacy import unit_of

    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
                for f in dataclasses.fields(RunOptions)}
    defaults.update(zip(("privacy_unit", "max_contributions", "unit_nulls"), unit_of.__defaults__ or ()))
    kwargs = collection["ldp_dask.options.RunKwargs"]
    return [griffe.Parameter(name, annotation=member.annotation, kind=griffe.ParameterKind.keyword_only,
                             default=repr(defaults[name]))
            for name, member in kwargs.members.items() if member.is_attribute]


class SphinxRoles(griffe.Extension):
    """Replace Sphinx roles in every docstring of a loaded package, and show ``**run: Unpack[RunKwargs]`` as the
    keyword-only run options it stands for (module docstring)."""

    def on_package(self, *, pkg: Any, loader: Any, **kwargs: Any) -> None:
        collection = loader.modules_collection
        options: list[griffe.Parameter] | None = None
        for obj in _objects(pkg):
            if obj.docstring is not None:
                obj.docstring.value = replace_roles(obj.docstring.value, obj, collection)
            if obj.is_function and any(p.kind is griffe.ParameterKind.var_keyword and "RunKwargs" in str(p.annotation)
                                        for p in obj.parameters):
                options = _run_options(collection) if options is None else options
                # the options go before **run, which stays (the docstring documents it): f(..., *, client=..., **run)
                params = list(obj.parameters)
                at = next(i for i, p in enumerate(params) if p.kind is griffe.ParameterKind.var_keyword)
                new = [p for p in options if p.name not in obj.parameters]
                obj.parameters = griffe.Parameters(*params[:at], *new, *params[at:])
