"""provision: prepare GPU clusters for distributed deep-learning training.

Data flow, one package or module per step:
inventory -> connection -> facts (gather + parsers) -> plans (rank files, commands)
-> templates -> playbooks/operations -> cli.
"""

__version__ = "0.1.0"
