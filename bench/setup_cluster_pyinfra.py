"""The same work as playbooks/setup-cluster.yml for pyinfra (3.x), used by bench/setup_vs_ansible.py.

pyinfra decides every operation from facts read before it runs, so keys generated in a run are
only visible to the next one: stage "keys" (users, ~/.ssh, key pairs), then stage "trust"
(authorized_keys and ssh_known_hosts from every host's files). Stage from data `stage`.
"""

import builtins

from gevent.lock import BoundedSemaphore
from pyinfra import host, inventory
from pyinfra.facts.files import File, FileContents
from pyinfra.facts.server import Hostname
from pyinfra.operations import files, server

USERS = host.data.cluster_users
# Every host's deploy reads the other hosts' files: fetch each (host, file) once, one at a time per
# host, or sshd's MaxSessions (10) refuses the channels when all deploys ask at once.
_CACHE = builtins.__dict__.setdefault("_setup_bench_cache", {"lock": BoundedSemaphore(1), "locks": {}, "facts": {}})


def other_fact(other, fact, **kwargs):
    """``other.get_fact(fact, **kwargs)``, fetched once per run."""
    key = (other.name, fact.__name__, tuple(sorted(kwargs.items())))
    with _CACHE["lock"]:
        lock = _CACHE["locks"].setdefault(other.name, BoundedSemaphore(1))
    with lock:
        if key not in _CACHE["facts"]:
            _CACHE["facts"][key] = other.get_fact(fact, **kwargs)
    return _CACHE["facts"][key]


if host.data.stage == "keys":
    for user in USERS:
        server.group(name=f"group {user['name']}", group=user["name"], gid=user["uid"], _sudo=True)
        server.user(
            name=f"user {user['name']}",
            user=user["name"],
            uid=user["uid"],
            group=user["name"],
            shell="/bin/bash",
            create_home=True,
            _sudo=True,
        )
        files.directory(
            name=f"~/.ssh {user['name']}",
            path=f"/home/{user['name']}/.ssh",
            user=user["name"],
            group=user["name"],
            mode="700",
            _sudo=True,
        )
        key = f"/home/{user['name']}/.ssh/id_ed25519"
        if not host.get_fact(File, path=key, _sudo=True):
            server.shell(
                name=f"key pair {user['name']}",
                commands=[f"ssh-keygen -q -t ed25519 -N '' -C {user['name']}@$(hostname) -f {key}"],
                _sudo=True,
                _sudo_user=user["name"],
            )
else:
    for user in USERS:
        keys = []
        for other in sorted(inventory.get_active_hosts(), key=lambda h: h.name):
            lines = other_fact(other, FileContents, path=f"/home/{user['name']}/.ssh/id_ed25519.pub", _sudo=True) or []
            keys.extend(line for line in lines if line.strip())
        files.block(
            name=f"authorized_keys {user['name']}",
            path=f"/home/{user['name']}/.ssh/authorized_keys",
            content="\n".join(keys),
            marker="# {mark} pyinfra cluster keys",
            _sudo=True,
        )
        files.file(
            name=f"authorized_keys mode {user['name']}",
            path=f"/home/{user['name']}/.ssh/authorized_keys",
            user=user["name"],
            group=user["name"],
            mode="600",
            _sudo=True,
        )
    entries = []
    for other in sorted(inventory.get_active_hosts(), key=lambda h: h.name):
        public = other_fact(other, FileContents, path="/etc/ssh/ssh_host_ed25519_key.pub") or []
        name = other_fact(other, Hostname)
        if public:
            kind, blob = public[0].split()[:2]
            entries.append(f"{other.name},[127.0.0.1]:{other.data.ssh_port},{name} {kind} {blob}")
    files.block(
        name="ssh_known_hosts",
        path="/etc/ssh/ssh_known_hosts",
        content="\n".join(entries),
        marker="# {mark} pyinfra known hosts",
        _sudo=True,
    )
