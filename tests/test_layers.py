"""The package's import graph: the layer contract of docs/architecture.md (lint-imports) and no import circle at all."""

from __future__ import annotations

import grimp


def test_no_module_imports_itself_through_others() -> None:
    # TYPE_CHECKING imports count: a circle that only type hints close is still two modules that need each other.
    graph = grimp.build_graph("llm_oncall", exclude_type_checking_imports=False)
    circles = sorted(
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if graph.chain_exists(importer=imported, imported=importer)
    )
    assert circles == []
