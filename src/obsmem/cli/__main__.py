"""``python -m obsmem.cli`` is the ``obsmem`` command (as is ``python -m obsmem``)."""

from obsmem.cli import main

if __name__ == "__main__":
    main()
