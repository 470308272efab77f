"""What ``-v`` shows of a change: the command that ran on the node (secrets masked, a file's
content never: a write shows its path, size, owner and mode)."""

from __future__ import annotations

from provision.operations.base import Run, Write, mask_secrets


def ran_text(change: Run | Write, no_log: bool = False) -> str:
    """The command of a change as ``-v`` prints it; ``no_log`` tasks show only what they do."""
    if no_log:  # not even what it does: a no_log task's description can hold its secret
        return "(no_log)"
    if isinstance(change, Write):
        owner = f" owner {change.owner or 'root'}:{change.group or change.owner or 'root'}"
        mode = f" mode {change.mode:04o}" if change.mode is not None else " mode 0644"
        return f"write {change.path} ({len(change.content)} bytes,{owner},{mode}; atomic rename, old copy kept as .provision~)"
    return mask_secrets(change.command)
