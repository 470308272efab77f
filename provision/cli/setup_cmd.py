"""`provision setup-cluster`: run playbooks/setup-cluster.yml (or --playbook) on the inventory."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer

from provision.cli import command_table, options as opt
from provision.cli.output import command_again, stdout, warn

commands = command_table()


@commands.command(
    "setup-cluster",
    epilog="Examples:\n\n"
    "  provision setup-cluster -i inventory/hosts.yml --check --diff\n\n"
    "  provision setup-cluster --limit 'gpu:!w3' --tags users,ssh\n\n"
    "  provision setup-cluster --list-tasks --tags nfs\n\n"
    "  provision setup-cluster -e @more-vars.yml --ask-become-pass -v",
)
def setup_cluster(
    ctx: typer.Context,
    *,
    inventory: opt.Inventory,
    check: Annotated[bool, typer.Option("--check", help="Say what would change; change nothing.")] = False,
    diff: Annotated[
        bool, typer.Option("--diff", help="Show a unified diff of each file change, headed host:path (secrets masked).")
    ] = False,
    limit: Annotated[
        list[str],
        typer.Option(
            "--limit",
            "-l",
            metavar="PATTERN",
            help="Only these hosts: names, groups, racks, w1,w2, 'gpu:!w3', 'gpu:&rack1', 'w[1:3]', 'w*' (repeatable).",
        ),
    ] = None,
    tags: Annotated[
        str, typer.Option("--tags", "-t", metavar="TAGS", help="Only tasks with these tags (comma-separated; see --list-tags).")
    ] = None,
    skip_tags: Annotated[
        str, typer.Option("--skip-tags", metavar="TAGS", help="Skip tasks with these tags (comma-separated).")
    ] = None,
    start_at_task: Annotated[
        str,
        typer.Option(
            "--start-at-task",
            metavar="NAME",
            help="Skip the tasks before the first one with this name (a glob; see --list-tasks).",
        ),
    ] = None,
    extra_vars: Annotated[
        list[str],
        typer.Option(
            "-e",
            "--extra-vars",
            metavar="KEY=VALUE|@FILE",
            help="Variables over all others: KEY=VALUE or @FILE.yml (repeatable).",
        ),
    ] = None,
    playbook: Annotated[
        Path, typer.Option("--playbook", metavar="FILE", help="Run this playbook instead of the built-in one.")
    ] = None,
    templates: Annotated[
        list[Path],
        typer.Option("--templates", metavar="DIR", help="Folder whose templates override the built-in ones (repeatable)."),
    ] = None,
    ask_become_pass: Annotated[
        bool, typer.Option("--ask-become-pass", "-K", help="Ask once for the sudo password (sent on stdin).")
    ] = False,
    ask_jupyter_pass: Annotated[
        bool, typer.Option("--ask-jupyter-pass", help="Ask for the Jupyter password of each user without jupyter_password_file.")
    ] = False,
    rotate_user_keys: Annotated[
        str,
        typer.Option(
            "--rotate-user-keys", help="Replace these users' key pairs on every node (comma-separated); old keys revoked."
        ),
    ] = None,
    verify: Annotated[
        bool, typer.Option("--verify/--no-verify", help="Check BatchMode SSH between every pair of nodes afterwards.")
    ] = True,
    list_hosts: Annotated[bool, typer.Option("--list-hosts", help="List the hosts each play would run on; touch none.")] = False,
    list_tasks: Annotated[
        bool, typer.Option("--list-tasks", help="List the tasks this run would take, with their tags.")
    ] = False,
    list_tags: Annotated[bool, typer.Option("--list-tags", help="List the tags of the tasks this run would take.")] = False,
    syntax_check: Annotated[
        bool, typer.Option("--syntax-check", help="Check the playbook, inventory and variables; touch no host.")
    ] = False,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="-v: the commands each change ran on its node, all of a failure's output; -vv: all output.",
        ),
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print per-task results as JSON.")] = False,
    forks: opt.SetupForks,
    connect_timeout: opt.ConnectTimeout,
    command_timeout: opt.CommandTimeout,
    accept_new_host_keys: opt.AcceptNew,
    known_hosts: opt.KnownHosts,
    ssh_config: opt.SshConfig,
    facts_dir: opt.FactsDir,
) -> None:
    """Make the cluster ready for distributed training: the same users (uid/gid) on every node,
    passwordless SSH all-to-all, an NFS share, Anaconda in /opt with a clone per user, Jupyter,
    and (asked for) Slurm's node lines and gres.conf from the probed facts.

    Runs the built-in playbook (or --playbook) over the inventory; each role can run alone with
    --tags users|ssh|nfs|anaconda|jupyter|slurm (see --list-tags). Variables come from the inventory's
    vars:, group_vars/ and host_vars/ beside it (as in Ansible) and -e."""
    from provision.cli.setup_view import LiveView, show_run
    from provision.cluster_setup import SetupHooks, SetupRequest, setup_cluster as run_setup

    request = SetupRequest(
        inventory,
        playbook,
        tuple(extra_vars or ()),
        rotate_user_keys,
        tuple(limit or ()),
        tags,
        skip_tags,
        start_at_task,
        tuple(templates or ()),
        check,
        diff,
        verify,
        command_again(ctx, drop=("limit",)),
        list_hosts=list_hosts,
        list_tasks=list_tasks,
        list_tags=list_tags,
        syntax_check=syntax_check,
        ask_become_pass=ask_become_pass,
        ask_jupyter_pass=ask_jupyter_pass,
    )
    console = stdout()
    live = LiveView([], console, quiet=as_json, verbosity=verbose, check=check)
    # issue 8: passwords asked here are hashed on this machine, never sent, logged or shown
    hooks = SetupHooks(ask=getpass.getpass, warn=warn, started=live.start, result=live.result, host=live.host)
    try:
        outcome = run_setup(request, opt.settings(ctx), hooks)
    finally:
        live.stop()
    if outcome.done is None:  # --list-hosts, --list-tasks, --list-tags, --syntax-check: no host touched
        for line in outcome.lines:
            typer.echo(line)
        return
    show_run(console, outcome.done, as_json)
    if not outcome.done.ok:
        raise typer.Exit(1)
