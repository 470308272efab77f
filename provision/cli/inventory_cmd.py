"""`provision inventory show` and `provision inventory import`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from provision.cli import Commands, command_table, options as opt
from provision.cli.output import fail, stdout, warn, wrote

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
    from rich.markup import escape
    from rich.table import Table

    from provision.inventory.model import DEFAULT_INVENTORY, ansible_list, open_inventory

    inv = open_inventory(inventory)
    if inv.path is None:
        raise fail(
            f"no inventory: {DEFAULT_INVENTORY} does not exist here and no -i FILE was given; "
            "write one (`mkdir -p inventory && provision inventory example > inventory/hosts.yml`, then edit it) "
            "or convert Ansible's (`provision inventory import /etc/ansible/hosts -o inventory/hosts.yml`)"
        )
    from provision.playbook.variables import Variables

    variables = Variables(inv)  # group_vars/ and host_vars/ beside the inventory, as setup-cluster reads them
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
    import yaml

    from provision.files import write_atomic
    from provision.inventory.ansible import read_ansible_inventory
    from provision.inventory.model import inventory_to_yaml

    imported = read_ansible_inventory(source)
    for warning in imported.warnings:
        warn(warning)
    text = inventory_to_yaml(imported.inventory)
    if output is None:
        typer.echo(text, nl=False)
        if imported.group_vars:
            warn(
                f"the variables of group(s) {', '.join(imported.group_vars)} are not in this output: "
                "give -o FILE to write them to group_vars/<group>.yml beside it"
            )
        return
    wrote("inventory", output, write_atomic(output, text))
    for group, variables in imported.group_vars.items():
        target = output.parent / "group_vars" / f"{group}.yml"
        target.parent.mkdir(exist_ok=True)
        text = yaml.safe_dump(variables, sort_keys=False, default_flow_style=False)
        wrote(f"group_vars of {group}", target, write_atomic(target, text))
