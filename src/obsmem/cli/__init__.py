"""The ``obsmem`` command.

Every command is a thin shell over a public library function: it parses its options, calls the
function, and draws the result with rich. The CLI sees obsmem the way a user does — through
``obsmem``, ``obsmem.models``, ``obsmem.embeddings``, ``obsmem.vectors``, ``obsmem.storage``
(``open_store``) and ``obsmem.worker`` — never the engine (``obsmem.om``) or a storage adapter;
an import-linter contract in ``pyproject.toml`` keeps it that way.

* :mod:`obsmem.cli.app` — the Typer app and ``obsmem version``
* :mod:`obsmem.cli.demo` — ``obsmem demo`` (over :func:`obsmem.demo.runner.run_demo`)
* :mod:`obsmem.cli.worker` — ``obsmem worker`` and ``obsmem migrate``
* :mod:`obsmem.cli.bench` — ``obsmem bench locomo|longmemeval|survival`` (over :mod:`obsmem.bench`)
"""

from __future__ import annotations

from obsmem.cli.app import app, main

__all__ = ["app", "main"]
