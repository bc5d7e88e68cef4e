"""The import path plugins use (``from rnnviz.cells.registry import CellSpec``): the cell
table of :mod:`rnnviz.tables.cells`, re-exported beside the cells it describes."""

from rnnviz.tables.cells import (
    ENTRY_POINT_GROUP,
    GROUPS,
    CellSpec,
    FusedForm,
    FusedGate,
    cell_names,
    cell_spec,
    hidden_kernels,
    load_plugins,
    plugin_errors,
    register_cell,
    unregister_cell,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "GROUPS",
    "CellSpec",
    "FusedForm",
    "FusedGate",
    "cell_names",
    "cell_spec",
    "hidden_kernels",
    "load_plugins",
    "plugin_errors",
    "register_cell",
    "unregister_cell",
]
