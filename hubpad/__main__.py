"""`python -m hubpad ...` runs the command line, as the `hubpad` script does."""

from hubpad.app.cli import main

main()
