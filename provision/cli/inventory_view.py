"""How `provision inventory show` prints an inventory: its hosts (how each is reached), racks in
order and groups, with --vars every variable and the file it comes from; or ansible-inventory
--list's JSON."""

from __future__ import annotations

import json

import typer

from provision.cli.output import stdout, warn


def show(inv, variables, *, with_vars: bool, as_json: bool) -> None:
    """Print the inventory ``inv`` with its ``variables`` (:class:`provision.playbook.variables.Variables`)."""
    from rich.markup import escape
    from rich.table import Table

    from provision.inventory.model import ansible_list

    for warning in variables.warnings:
        warn(warning)
    if as_json:
        merged = {host.name: variables.inventory_vars(host) for host in inv.hosts.values()}
        typer.echo(json.dumps(ansible_list(inv, merged), indent=2, default=str))
        return
    console = stdout()
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
    if with_vars:

        def show_var(who: str, name: str, value, where: str = "") -> None:
            source = f"  ({where})" if where else ""
            line = f"{who}var {name} = {json.dumps(value, default=str)}{source}"
            console.print(escape(line), highlight=False, soft_wrap=True)

        for name, value in inv.vars.items():
            show_var("", name, value)
        for group, files in variables.group_files.items():
            for path, data in files:
                for name, value in data.items():
                    show_var(f"group {group} ", name, value, str(path))
        for host in inv.hosts.values():
            for name, value in host.vars.items():
                show_var(f"host {host.name} ", name, value)
            for path, data in variables.host_files.get(host.name, ()):
                for name, value in data.items():
                    show_var(f"host {host.name} ", name, value, str(path))
