"""obsmem inside agent frameworks: one module per framework, each behind its own extra.

Nothing here is imported by ``import obsmem``; import the module for your framework, e.g.
``from obsmem.integrations.pydantic_ai import ObservationalMemory``. Each module imports its
framework at the top, so a missing extra fails on that import with the install command.
"""
