"""provision: prepare GPU clusters for distributed deep-learning training.

The package reads as the data flow, lowest layer first (:data:`LAYERS`; ``tests/test_layers.py``
enforces it): a module imports from its own layer and the layers before it, never from a later one.
"""

__version__ = "0.1.0"

# The one statement of the layer order. Each entry is a set of packages or modules of one layer.
LAYERS = (
    # shared ground: errors, shipped resources, files written safely
    {
        "provision",
        "provision.errors",
        "provision.defaults",
        "provision.resources",
        "provision.sandbox",
        "provision.yaml_lines",
        "provision.files",
        "provision.text",
    },
    {"provision.inventory"},  # hosts, groups, variables from the user's inventory
    {"provision.transport"},  # SSH: connections, host keys, fan-out
    {"provision.facts"},  # pure parsers of what a node prints
    {"provision.probe"},  # one round trip per node, its captures stored and derived into facts
    {"provision.plans"},  # pure planning from facts: dims, rank files, NICs, gres, pictures; the service that gathers them
    {"provision.launch"},  # from a rank plan to a job: mpirun and the other launchers, run on the first host
    {"provision.templating"},  # Jinja2 for playbooks, values kept out of shell code
    {"provision.operations"},  # wanted state vs current state -> commands
    {"provision.playbook"},  # the YAML playbooks and their variables
    {"provision.engine"},  # runs playbooks on hosts: state reads, decisions, changes
    # checks across nodes; setup-cluster run and checked; launch's flow (doctor's checks, then mpirun)
    {"provision.checks", "provision.doctor", "provision.cluster_setup", "provision.launch.service"},
    {"provision.cli", "provision.__main__"},  # options in, one call, results out
)
