"""Groups and users with fixed ids (NFS and MPI need the same uid/gid on every node).

An existing user or group whose id differs is an error for that host: it is never changed
silently, since files on shared storage belong to the id, not the name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provision.errors import ArgumentError
from provision.inventory.model import check_user
from provision.operations.base import (
    UNKNOWN,
    Arg,
    GroupEntry,
    Operation,
    OperationError,
    Run,
    StateKey,
    UserEntry,
    check_path,
    quote,
)
from provision.text import shown_value

# The files the shadow tools (groupadd, useradd, usermod, userdel) rewrite: with the user or group
# they state, all such a change may alter (its scope; see provision.engine.statecache), so a path
# elsewhere stays known after it (in --check too: a dataset folder is still known absent).
ACCOUNT_FILES = ("/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/subuid", "/etc/subgid")


def _gid(args: dict) -> int:
    gid = args["gid"]
    if isinstance(gid, bool) or not isinstance(gid, int) or not 0 < gid < 2**31:
        raise ArgumentError(f"group {args['name']}: gid {shown_value(gid)} is not a positive number")
    return gid


def _group_requests(args: dict) -> list[StateKey]:
    return [StateKey("group", check_user(args["name"], "group")), StateKey("gid", str(_gid(args)))]


def _state(args: dict, what: str) -> str:
    if args.get("state", "present") not in ("present", "absent"):
        raise ArgumentError(f"{what} {args['name']}: state {shown_value(args['state'])} is not present or absent")
    return args.get("state", "present")


def plan_group(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Create the group with its gid when absent; a different gid, or the gid held by another
    group, is an error for this host. ``state: absent`` removes the group (when it still has
    that gid: another group of that name is not ours)."""
    name, gid = check_user(args["name"], "group"), _gid(args)
    entry = current.get(StateKey("group", name))
    if _state(args, "group") == "absent":
        if entry is None or entry.gid != gid:
            return []
        effects = ((StateKey("group", name), None), (StateKey("gid", str(gid)), None))
        return [Run(f"groupdel {quote(name)}", f"remove group {name} ({gid})", effects, ACCOUNT_FILES)]
    if entry is not None:
        if entry.gid != gid:
            raise OperationError(f"group {name} exists with gid {entry.gid}, wanted {gid}: not changed")
        return []
    holder = current.get(StateKey("gid", str(gid)))
    if holder is not None and holder != name:
        raise OperationError(f"gid {gid} already belongs to group {holder}")
    effects = ((StateKey("group", name), GroupEntry(name, gid)), (StateKey("gid", str(gid)), name))
    return [Run(f"groupadd -g {gid} {quote(name)}", f"create group {name} ({gid})", effects, ACCOUNT_FILES)]


def _user_args(args: dict) -> dict:
    args = dict(args)
    check_user(args["name"])
    uid = args["uid"]
    if isinstance(uid, bool) or not isinstance(uid, int) or not 0 < uid < 2**31:
        raise ArgumentError(f"user {args['name']}: uid {shown_value(uid)} is not a positive number")
    args["group"] = check_user(args["group"] or args["name"], "group")
    groups = args["groups"] or []
    if isinstance(groups, str):
        groups = [g for g in groups.split(",") if g]
    args["groups"] = [check_user(g, "group") for g in groups]
    args["home"] = check_path(args["home"] or f"/home/{args['name']}")
    if not isinstance(args["shell"], str) or not args["shell"].startswith("/") or any(c in args["shell"] for c in " \n'\""):
        raise ArgumentError(f"user {args['name']}: shell {shown_value(args['shell'])} must be an absolute path")
    return args


def _user_requests(args: dict) -> list[StateKey]:
    args = _user_args(args)
    return [StateKey("user", args["name"]), StateKey("uid", str(args["uid"])), StateKey("group", args["group"])]


def _remove_user(args: dict, entry: UserEntry | None) -> list:
    """``state: absent``: the account goes (its home too with ``remove_home``); a user of that
    name with another uid is not ours: an error, never removed."""
    name, uid = args["name"], args["uid"]
    if entry is None:
        return []
    if entry.uid != uid:
        raise OperationError(f"user {name} exists with uid {entry.uid}, not {uid}: not removed")
    command = f"userdel {'-r ' if args['remove_home'] else ''}{quote(name)}"
    # userdel may remove the primary group too: it is read again before the group task decides.
    effects = ((StateKey("user", name), None), (StateKey("uid", str(uid)), None), (StateKey("group", args["group"]), UNKNOWN))
    home = f" and its home {entry.home}" if args["remove_home"] else f" (home {entry.home} kept)"
    touches = (*ACCOUNT_FILES, f"/var/mail/{name}", *((entry.home,) if args["remove_home"] else ()))
    return [Run(command, f"remove user {name} ({uid}){home}", effects, touches)]


def plan_user(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Create the user with its uid, primary group, shell and home when absent (the home not
    made with ``create_home: false``: a shared /home made by one node); add missing
    supplementary groups and fix the shell when it exists. Another uid is an error.
    ``state: absent`` removes the account (see :func:`_remove_user`)."""
    args = _user_args(args)
    name, uid = args["name"], args["uid"]
    entry: UserEntry | None = current.get(StateKey("user", name))
    if _state(args, "user") == "absent":
        return _remove_user(args, entry)
    if entry is None:
        holder = current.get(StateKey("uid", str(uid)))
        if holder is not None and holder != name:
            raise OperationError(f"uid {uid} already belongs to user {holder}")
        group = current.get(StateKey("group", args["group"]))
        gid = group.gid if group is not None else uid
        make_home = "-m" if args["create_home"] else "-M"
        command = f"useradd {make_home} -u {uid} -g {quote(args['group'])} -s {quote(args['shell'])} -d {quote(args['home'])}"
        if args["groups"]:
            command += f" -G {quote(','.join(args['groups']))}"
        command += f" {quote(name)}"
        new = UserEntry(name, uid, gid, args["home"], args["shell"], tuple(args["groups"]))
        effects = ((StateKey("user", name), new), (StateKey("uid", str(uid)), name))
        return [Run(command, f"create user {name} ({uid})", effects, (*ACCOUNT_FILES, args["home"], f"/var/mail/{name}"))]
    if entry.uid != uid:
        raise OperationError(f"user {name} exists with uid {entry.uid}, wanted {uid}: not changed")
    changes = []
    missing = [g for g in args["groups"] if g not in entry.groups]
    if missing:
        new = UserEntry(name, uid, entry.gid, entry.home, entry.shell, entry.groups + tuple(missing))
        changes.append(
            Run(
                f"usermod -a -G {quote(','.join(missing))} {quote(name)}",
                f"add {name} to {', '.join(missing)}",
                ((StateKey("user", name), new),),
                ACCOUNT_FILES,
            )
        )
        entry = new
    if entry.shell != args["shell"]:
        new = UserEntry(name, uid, entry.gid, entry.home, args["shell"], entry.groups)
        changes.append(
            Run(
                f"usermod -s {quote(args['shell'])} {quote(name)}",
                f"shell of {name}: {args['shell']}",
                ((StateKey("user", name), new),),
                ACCOUNT_FILES,
            )
        )
    return changes


OPERATIONS = {
    "group": Operation(
        "group",
        {
            "name": Arg((str,), True, help="group name"),
            "gid": Arg((int,), True, help="the gid; a group with another gid fails the host, never changed"),
            "state": Arg((str,), default="present", help="present or absent"),
        },
        _group_requests,
        plan_group,
        doc="a group with a fixed gid",
    ),
    "user": Operation(
        "user",
        {
            "name": Arg((str,), True, help="user name"),
            "uid": Arg((int,), True, help="the uid; a user with another uid fails the host, never changed"),
            "group": Arg((str,), help="primary group (default: name)"),
            "groups": Arg((list, str), help="supplementary groups"),
            "shell": Arg((str,), default="/bin/bash", help="login shell"),
            "home": Arg((str,), help="home folder (default /home/NAME)"),
            "state": Arg((str,), default="present", help="present or absent"),
            "remove_home": Arg((bool,), default=False, help="with state absent: remove the home too"),
            "create_home": Arg((bool,), default=True, help="make the home (false: another node makes it)"),
        },
        _user_requests,
        plan_user,
        doc="a user with a fixed uid",
    ),
}
