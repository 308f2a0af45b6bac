"""``python -m obsmem`` is the ``obsmem`` command."""

from obsmem.cli import main

if __name__ == "__main__":
    main()
