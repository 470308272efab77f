"""Run a launch plan: put the rank file on the first host and run mpirun there, streaming output."""

from __future__ import annotations

import io
import sys

from provision.connection import SshOptions, describe_failure, open_connection
from provision.inventory import Host
from provision.plans.launch import quoted


def run_from_first_host(host: Host, options: SshOptions, rankfile_text: str, remote_path: str, argv: list[str]) -> int:
    """Upload the rank file to ``remote_path`` (relative to the login directory) on ``host`` and
    run ``argv`` there; output streams to this terminal. Returns mpirun's exit status."""
    connection = None
    try:
        connection = open_connection(host, options)
        connection.run("mkdir -p .provision", hide=True)
        connection.put(io.BytesIO(rankfile_text.encode()), remote=remote_path)
        print(f"[{host.name}] $ {quoted(argv)}", file=sys.stderr, flush=True)
        result = connection.run(quoted(argv), warn=True, pty=False, in_stream=False)
        return result.exited
    except Exception as error:  # noqa: BLE001 - one line for the host, never a traceback
        print(f"provision: error: {host.name}: {describe_failure(error, options)}", file=sys.stderr)
        return 1
    finally:
        if connection is not None:
            connection.close()
