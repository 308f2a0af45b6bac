"""The ``obsmem`` command.

Every command is a thin shell over a public library function: it parses its options, calls the
function, and draws the result with rich. The CLI sees obsmem the way a user does — through
``obsmem``, ``obsmem.models``, ``obsmem.embeddings``, ``obsmem.vectors``, ``obsmem.storage``
(``open_store``) and ``obsmem.worker`` — never the engine (``obsmem.om``) or a storage adapter;
an import-linter contract in ``pyproject.toml`` keeps it that way.

* :mod:`obsmem.cli.app` — the Typer app, ``--version`` / ``version``, ``-h`` everywhere
* :mod:`obsmem.cli.demo` — ``obsmem demo`` (over :func:`obsmem.demo.runner.run_demo`)
* :mod:`obsmem.cli.threads` — ``obsmem threads`` and ``obsmem show``: what a store holds
* :mod:`obsmem.cli.worker` — ``obsmem worker`` and ``obsmem migrate``
* :mod:`obsmem.cli.bench` — ``obsmem bench locomo|longmemeval|survival`` (over :mod:`obsmem.bench`)
* :mod:`obsmem.cli.stores` — ``store: …``, the resolved location every command that opens a store prints
* :mod:`obsmem.cli.render` — one message as terminal text (tool calls and results included)
* :mod:`obsmem.cli.groups` — what every command group shares (``-h``, help when called bare)

``python -m obsmem`` and ``python -m obsmem.cli`` run the same app as the ``obsmem`` script.
"""

from __future__ import annotations

from obsmem.cli.app import app, main

__all__ = ["app", "main"]
