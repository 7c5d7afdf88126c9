"""Output steps shared by the flows: write a result's JSON and PNG, publish the PNG as an artifact."""

from __future__ import annotations

import base64
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact


@task(retries=3, retry_delay_seconds=1, persist_result=False)
def write_outputs(result: Any, out: str | None, plot: str | None, overwrite: bool) -> dict[str, str]:
    """``result.save(out)`` and ``result.plot(plot)`` (when it can plot); atomic writes, retried on I/O."""
    written = {}
    if out:
        written["json"] = result.save(out, overwrite=overwrite)
    if plot and hasattr(result, "plot"):
        result.plot(plot, overwrite=overwrite)
        written["plot"] = plot
    return written


def publish_plot(written: dict[str, str], key: str, alt: str, description: str) -> None:
    """The written PNG (if any) as a markdown artifact, embedded as a data URI."""
    if "plot" not in written:
        return
    with open(written["plot"], "rb") as fh:
        png = base64.b64encode(fh.read()).decode()
    create_markdown_artifact(key=key, markdown=f"![{alt}](data:image/png;base64,{png})", description=description)
