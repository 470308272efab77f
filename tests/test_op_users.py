"""Group and user operations as data."""

import pytest

from provision.errors import ArgumentError
from provision.operations import OPERATIONS
from provision.operations.base import GroupEntry, OperationError, StateKey, UserEntry


def plan(op, args, facts):
    operation = OPERATIONS[op]
    return operation.plan(operation.check_args(args), facts)


ALICE = UserEntry("alice", 2001, 2001, "/home/alice", "/bin/bash", ("mpi",))

CASES = [
    ("group-new", "group", {"name": "alice", "gid": 2001}, {}, ["groupadd -g 2001 alice"]),
    ("group-ok", "group", {"name": "alice", "gid": 2001}, {StateKey("group", "alice"): GroupEntry("alice", 2001)}, []),
    (
        "user-new",
        "user",
        {"name": "alice", "uid": 2001, "groups": ["mpi"]},
        {},
        ["useradd -m -u 2001 -g alice -s /bin/bash -d /home/alice -G mpi alice"],
    ),
    ("user-ok", "user", {"name": "alice", "uid": 2001, "groups": ["mpi"]}, {StateKey("user", "alice"): ALICE}, []),
    ("user-uid-as-text", "user", {"name": "alice", "uid": "2001"}, {StateKey("user", "alice"): ALICE}, []),
    (
        "user-add-group",
        "user",
        {"name": "alice", "uid": 2001, "groups": "mpi,video"},
        {StateKey("user", "alice"): ALICE},
        ["usermod -a -G video alice"],
    ),
    (
        "user-shell",
        "user",
        {"name": "alice", "uid": 2001, "shell": "/bin/zsh"},
        {StateKey("user", "alice"): ALICE},
        ["usermod -s /bin/zsh alice"],
    ),
    # issue 15: a shared /home is made by one node; the others only add the account
    (
        "user-new-shared-home",
        "user",
        {"name": "alice", "uid": 2001, "create_home": False},
        {},
        ["useradd -M -u 2001 -g alice -s /bin/bash -d /home/alice alice"],
    ),
    # issue 15: a user who left: account gone, home kept unless remove_home, then the group
    (
        "user-absent",
        "user",
        {"name": "alice", "uid": 2001, "state": "absent"},
        {StateKey("user", "alice"): ALICE},
        ["userdel alice"],
    ),
    (
        "user-absent-home-removed",
        "user",
        {"name": "alice", "uid": 2001, "state": "absent", "remove_home": True},
        {StateKey("user", "alice"): ALICE},
        ["userdel -r alice"],
    ),
    ("user-absent-gone", "user", {"name": "alice", "uid": 2001, "state": "absent"}, {StateKey("user", "alice"): None}, []),
    (
        "group-absent",
        "group",
        {"name": "alice", "gid": 2001, "state": "absent"},
        {StateKey("group", "alice"): GroupEntry("alice", 2001)},
        ["groupdel alice"],
    ),
    (
        "group-absent-not-ours",
        "group",
        {"name": "alice", "gid": 2001, "state": "absent"},
        {StateKey("group", "alice"): GroupEntry("alice", 1500)},
        [],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_plans(case):
    _id, op, args, facts, commands = case
    assert [c.command for c in plan(op, args, facts)] == commands


HOST_ERRORS = [
    ("group", {"name": "alice", "gid": 2001}, {StateKey("group", "alice"): GroupEntry("alice", 1500)}, "exists with gid 1500"),
    ("group", {"name": "alice", "gid": 2001}, {StateKey("gid", "2001"): "bob"}, "belongs to group bob"),
    (
        "user",
        {"name": "alice", "uid": 2002},
        {StateKey("user", "alice"): ALICE},
        "exists with uid 2001, wanted 2002: not changed",
    ),
    ("user", {"name": "alice", "uid": 2001}, {StateKey("uid", "2001"): "bob"}, "uid 2001 already belongs to user bob"),
    ("user", {"name": "alice", "uid": 2005, "state": "absent"}, {StateKey("user", "alice"): ALICE}, "not 2005: not removed"),
]


@pytest.mark.parametrize("op,args,facts,text", HOST_ERRORS)
def test_never_changes_ids_silently(op, args, facts, text):
    with pytest.raises(OperationError) as caught:
        plan(op, args, facts)
    assert text in str(caught.value)


@pytest.mark.parametrize(
    "args,text",
    [
        ({"name": "al ice", "uid": 1}, "user name"),
        ({"name": "$(reboot)", "uid": 1}, "user name"),
        ({"name": "alice", "uid": -3}, "positive"),
        ({"name": "alice", "uid": 1, "shell": "bash"}, "absolute"),
        ({"name": "alice", "uid": 1, "groups": ["a;b"]}, "group name"),
        ({"name": "alice", "uid": 1, "state": "gone"}, "not present or absent"),
    ],
)
def test_bad_user_arguments(args, text):
    with pytest.raises(ArgumentError) as caught:
        plan("user", args, {})
    assert text in str(caught.value)


def test_created_user_predicted_for_later_tasks():
    (change,) = plan("user", {"name": "alice", "uid": 2001}, {})
    effects = dict(change.effects)
    assert effects[StateKey("user", "alice")].uid == 2001 and effects[StateKey("uid", "2001")] == "alice"
