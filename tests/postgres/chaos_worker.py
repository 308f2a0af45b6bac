"""``obsmem worker`` for the chaos test (run as a script, not collected), with a short buffer lease.

    python chaos_worker.py <lease seconds> <obsmem worker arguments…>

The buffer lease of a killed worker must run out before another worker takes its thread over;
``obsmem worker`` has no ``--lease-ttl`` yet (the lease's life is a constant of the engine), so
this wrapper shortens it for the process, then runs the real command line.
"""

from __future__ import annotations

import sys

import obsmem.om.buffering
from obsmem.cli import main

if __name__ == "__main__":
    obsmem.om.buffering.LEASE_TTL_S = float(sys.argv[1])
    sys.argv = ["obsmem", *sys.argv[2:]]
    main()
