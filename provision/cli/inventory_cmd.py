"""`provision inventory show` and `provision inventory import`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision.cli import inventory_app, options as opt
from provision.files import write_atomic
from provision.inventory import inventory_to_yaml, open_inventory
from provision.inventory_import import import_ansible_inventory


@inventory_app.command("show", epilog="Example:\n\n  provision inventory show -i inventory/hosts.yml")
def show(inventory: Path = opt.INVENTORY) -> None:
    """Print hosts (how they are reached), racks in order, and groups."""
    inv = open_inventory(inventory)
    console = Console()
    table = Table(title=escape(f"hosts ({inv.path or 'no inventory file'})"), title_justify="left")
    for column in ("host", "address", "user", "port", "key", "rack"):
        table.add_column(column)
    rack_of = {name: rack.name for rack in inv.racks for name in rack.hosts}
    for host in inv.hosts.values():
        table.add_row(
            *(
                escape(cell)
                for cell in (
                    host.name,
                    host.address or host.name,
                    host.user or "(ssh config)",
                    str(host.port or "(ssh config)"),
                    host.key or "-",
                    rack_of.get(host.name, "-"),
                )
            )
        )
    console.print(table)
    for index, rack in enumerate(inv.racks, start=1):
        console.print(f"rack {index} [bold]{escape(rack.name)}[/bold]: {escape(', '.join(rack.hosts))}", highlight=False)
    for group, members in inv.groups.items():
        console.print(f"group [bold]{escape(group)}[/bold]: {escape(', '.join(members))}", highlight=False)


@inventory_app.command(
    "import",
    epilog="Example:\n\n  provision inventory import /etc/ansible/hosts -o inventory/hosts.yml",
)
def import_(
    source: Path = typer.Argument(..., help="Ansible inventory, INI or YAML."),
    output: Path = typer.Option(None, "-o", "--output", help="Write here (atomically; an existing file is kept as FILE~)."),
) -> None:
    """Convert an Ansible inventory; groups named rack* become racks, in file order."""
    text = inventory_to_yaml(import_ansible_inventory(source))
    if output is None:
        typer.echo(text, nl=False)
        return
    backup = write_atomic(output, text)
    typer.echo(f"wrote {output}" + (f" (previous version kept as {backup})" if backup else ""), err=True)
