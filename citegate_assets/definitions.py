"""citegate's Dagster definitions: everything in defs/ (one module per stage, the resources, the automation),
loaded from the folder, and one executor. Adding an asset is adding it to a module in defs/."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import dagster as dg

from citegate_assets.lib.core.paths import source_checkout
from citegate_assets.lib.core.private import private_umask

private_umask()  # the code location's processes write run storage and the warehouse: owner-only files


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions.merge(
        _defs_folder(),
        # one process per run: DuckDB allows a single writer, and the steps share it in turn
        dg.Definitions(executor=dg.in_process_executor),
    )


@functools.cache
def loaded_defs() -> dg.Definitions:
    """defs() built once per process, for the CLI's runs: what it builds depends only on modules imported once
    (the partitions' first day is fixed at import), and building it costs a few percent of a small run."""
    return defs()


def _defs_folder() -> dg.Definitions:
    """The defs/ folder as pyproject.toml's [tool.dg] names it; an installed wheel has no pyproject.toml (and a
    parent folder's could belong to another project), so there the package's own defs module is the root."""
    project = source_checkout()
    if project is not None:
        return dg.load_from_defs_folder(path_within_project=project)
    import citegate_assets.defs

    with warnings.catch_warnings():  # as load_from_defs_folder does: its module loaders are Dagster previews
        warnings.simplefilter("ignore", dg.PreviewWarning)
        warnings.simplefilter("ignore", dg.BetaWarning)
        tree = dg.ComponentTree.from_module(defs_module=citegate_assets.defs, project_root=Path(__file__).parent)
        return tree.build_defs()
