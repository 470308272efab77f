"""Who acts on the host: the one rule for paths a user controls.

setup-cluster runs as root inside homes that cluster users own. Root never acts there: a change
or a fact read that uses a ``~user/`` path runs **as that user** (``runuser -u``), so the kernel
enforces the user's own permissions at the moment of use and a link the user planted leads only
where that user could go anyway (no check-then-use race). Absolute paths are read as root without
following a final link, and refused below a folder another user can write (see
:mod:`provision.operations.state` and :func:`provision.operations.base.refuse_unsafe_paths`).

The command for another user travels on that user's shell's stdin (a quoted here-document), never
in its argv: file contents, secrets included, never show in ``ps`` or ``/proc/*/cmdline``.
"""

from __future__ import annotations

import shlex

from provision.inventory.model import check_user
from provision.operations.base import HOME_VAR

LOGIN_WORD = '"$SUDO_USER"'  # the login user, as a root script names her to runuser


def home_users(shell: str) -> list[str]:
    """The users whose home a piece of shell uses (its ``~user/`` paths), sorted."""
    return sorted({bytes.fromhex(hexname).decode() for hexname in HOME_VAR.findall(shell)})


def acting_user(shell: str, as_root: bool, become: bool = True, user: str | None = None) -> tuple[str | None, str]:
    """``(user, refusal)`` for a step or fact read in a script that runs as root when
    ``as_root``: the task's ``become_user``; else the login user (``"$SUDO_USER"``) for a step
    without become; else the one user whose home the shell uses; else None (root, or the login
    user's own script). ``refusal`` is non-empty when the shell uses several users' homes."""
    if user:
        return check_user(user), ""
    if not as_root:
        return None, ""
    if not become:
        return LOGIN_WORD, ""
    users = home_users(shell)
    if len(users) > 1:
        return None, f"uses the homes of several users ({', '.join(users)}): each must be its own task"
    return (users[0] if users else None), ""


def on_stdin(program: str, shell: str, delimiter: str) -> str:
    """``shell`` run by ``program`` (an ``sh -s`` behind its launcher: ``runuser``, ``timeout``),
    fed on its stdin as a quoted here-document, never in argv; the commands themselves read
    /dev/null (the compound command is parsed whole before it runs)."""
    body = f"( {shell}\n) </dev/null"
    if delimiter in body.splitlines():
        raise ValueError("a command holds the here-document delimiter")
    return f"{program} <<'{delimiter}'\n{body}\n{delimiter}"


def run_as(shell: str, user: str, delimiter: str) -> str:
    """``shell`` run by ``user``'s ``sh``, on its stdin (:func:`on_stdin`)."""
    return on_stdin(f"runuser -u {user_word(user)} -- sh -s", shell, delimiter)


def user_word(user: str) -> str:
    """``user`` as a shell word: :data:`LOGIN_WORD` as it is, a name checked and quoted."""
    return user if user == LOGIN_WORD else shlex.quote(check_user(user))


def refused(why: str) -> str:
    """Shell that fails its step with ``why`` (one line)."""
    return f"echo {shlex.quote('refused: this change ' + why)} >&2; exit 1"
