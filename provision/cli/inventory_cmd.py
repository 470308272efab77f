"""`provision inventory show` and `provision inventory import`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from provision.cli import Commands, command_table, options as opt
from provision.cli.output import fail, warn, wrote

commands = command_table(help="Show or import inventories.", no_args_is_help=True, cls=Commands)


@commands.command(
    "show",
    epilog="Examples:\n\n  provision inventory show -i inventory/hosts.yml\n\n"
    "  provision inventory show --json      # as ansible-inventory --list",
)
def show(
    *,
    inventory: opt.Inventory,
    with_vars: Annotated[
        bool,
        typer.Option(
            "--vars", help="Also print the variables: vars:, group_vars/, each host's own and host_vars/, each with its file."
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print ansible-inventory --list's JSON (groups, _meta.hostvars with group_vars/ and host_vars/)."
        ),
    ] = False,
) -> None:
    """Print hosts (how they are reached), racks in order, and groups."""
    from provision.cli.inventory_view import show as show_inventory
    from provision.errors import ProvisionError
    from provision.playbook.variables import inventory_with_vars

    try:
        inv, variables = inventory_with_vars(inventory)
    except ProvisionError as problem:
        raise fail(str(problem)) from None
    show_inventory(inv, variables, with_vars=with_vars, as_json=as_json)


@commands.command("example", epilog="Example:\n\n  mkdir -p inventory && provision inventory example > inventory/hosts.yml")
def example() -> None:
    """Print the example inventory, every field explained (ships with the package)."""
    from provision.resources import resource_file

    typer.echo(resource_file("inventory/hosts.example.yml").read_text(), nl=False)


@commands.command(
    "import",
    epilog="Example:\n\n  provision inventory import /etc/ansible/hosts -o inventory/hosts.yml",
)
def import_(
    source: Annotated[Path, typer.Argument(help="Ansible inventory, INI or YAML.")],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Write here (atomically; an existing file is kept as FILE~).")
    ] = None,
) -> None:
    """Convert an Ansible inventory; groups named rack* become racks, in file order.

    [all:vars] become vars:, each group's own variables go to group_vars/<group>.yml beside the
    output, and SSH arguments (ansible_ssh_common_args...) are dropped with a warning."""
    from provision.inventory.ansible import convert

    done = convert(source, output)
    for line in done.warnings:
        warn(line)
    if output is None:
        typer.echo(done.text, nl=False)
    for what, path, kept in done.written:
        wrote(what, path, kept)
