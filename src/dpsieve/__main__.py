"""``python -m dpsieve``: the ``dpsieve`` command line."""

from dpsieve.cli import main

if __name__ == "__main__":
    main()
