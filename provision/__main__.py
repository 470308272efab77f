"""Allow ``python -m provision``."""

from provision.cli import main

main()
