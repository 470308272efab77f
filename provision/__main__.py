"""Allow ``python -m provision``."""

from provision.cli import command_line

command_line()
