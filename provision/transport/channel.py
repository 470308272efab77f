"""Run one command on an open paramiko transport: exec, stdin, stdout/stderr, exit status.

This replaces Fabric's (invoke's) runner, whose reader threads and 10 ms polling loops cost as
much controller CPU per host as the SSH connection itself. Here the calling thread sleeps until
paramiko hands it data (an event set by the channel's buffers), so a host costs no CPU while
its command runs. Every wait is bounded by the command's deadline; a watchdog thread (one per
process) closes the transport of a command past its deadline, so even a wait inside paramiko
that has no time limit of its own (``exec_command``'s reply) ends.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time

import paramiko

CHUNK = 65536
MAX_OUTPUT = 64 * 1024 * 1024  # per stream: a node's output is hostile input, never unbounded


class CommandTimeout(Exception):
    """The command (or sending its input) outlived its deadline."""


class ChannelFailure(Exception):
    """The command could not finish: the connection dropped, or the output passed MAX_OUTPUT."""


class _Wakeup:
    """An event both channel buffers set when data or EOF arrives; only the reader clears it
    (a buffer would clear a shared event when it alone is drained)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        pass

    def reset(self) -> None:
        self._event.clear()

    def wait(self, seconds: float) -> None:
        self._event.wait(seconds)


class _Watchdog:
    """Closes the transport of every command still running at its deadline (one thread per process)."""

    def __init__(self) -> None:
        self._ids = itertools.count()
        self._reset()

    def _reset(self) -> None:
        """Empty, thread not started: at creation and in a forked child (where the parent's thread
        does not exist and its lock may have been held at the fork)."""
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._watched: dict[int, paramiko.Transport] = {}
        self._started = False

    def watch(self, deadline: float, transport: paramiko.Transport) -> int:
        with self._cond:
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, name="provision-watchdog", daemon=True).start()
            token = next(self._ids)
            self._watched[token] = transport
            heapq.heappush(self._heap, (deadline, token))
            self._cond.notify()
            return token

    def unwatch(self, token: int) -> None:
        with self._cond:
            self._watched.pop(token, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][1] not in self._watched:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token = self._heap[0]
                now = time.monotonic()
                if now < deadline:
                    self._cond.wait(deadline - now)
                    continue
                heapq.heappop(self._heap)
                transport = self._watched.pop(token)
                threading.Thread(target=transport.close, daemon=True).start()  # close may block: not under the lock


_watchdog = _Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_watchdog._reset)


def _read_until_eof(channel: paramiko.Channel, deadline: float) -> tuple[bytes, bytes]:
    wakeup = _Wakeup()
    channel.in_buffer.set_event(wakeup)
    channel.in_stderr_buffer.set_event(wakeup)
    streams: tuple[list[bytes], list[bytes]] = ([], [])
    sizes = [0, 0]
    while True:
        wakeup.reset()
        # EOF arrives after the last data (one transport thread feeds both in order): seen first,
        # then everything buffered is read, nothing is left behind.
        finished = channel.eof_received or channel.closed
        for index, ready, read in ((0, channel.recv_ready, channel.recv), (1, channel.recv_stderr_ready, channel.recv_stderr)):
            while ready():
                chunk = read(CHUNK)
                sizes[index] += len(chunk)
                if sizes[index] > MAX_OUTPUT:
                    raise ChannelFailure(f"the command printed more than {MAX_OUTPUT // (1024 * 1024)} MiB")
                streams[index].append(chunk)
        if finished:
            return b"".join(streams[0]), b"".join(streams[1])
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CommandTimeout()
        wakeup.wait(remaining)


def run_on_channel(
    transport: paramiko.Transport, command: str, stdin: bytes, timeout: float, open_timeout: float
) -> tuple[bytes, bytes, int]:
    """Run ``command`` in a new session channel of ``transport``: write ``stdin`` and close it
    (closed at once when empty, like ``ssh -n``), read stdout and stderr to the end, return them
    with the exit status (-1 when the server sent none, e.g. the command was killed by a signal).

    Raises :class:`CommandTimeout` past ``timeout`` seconds, :class:`ChannelFailure` when the
    connection drops first; paramiko's errors (a channel that does not open within
    ``open_timeout``) pass through.
    """
    deadline = time.monotonic() + timeout
    channel = transport.open_session(timeout=open_timeout)
    token = _watchdog.watch(deadline, transport)
    try:
        channel.exec_command(command)
        if stdin:
            channel.settimeout(max(0.001, deadline - time.monotonic()))
            channel.sendall(stdin)
        channel.shutdown_write()
        stdout, stderr = _read_until_eof(channel, deadline)
        if not channel.status_event.wait(max(0.0, deadline - time.monotonic())):
            raise CommandTimeout()
        if channel.exit_status == -1 and not transport.is_active():
            if time.monotonic() >= deadline:  # the watchdog closed it
                raise CommandTimeout()
            raise ChannelFailure("the connection closed before the command finished")
        return stdout, stderr, channel.exit_status
    except (CommandTimeout, ChannelFailure):
        raise
    except Exception:
        if time.monotonic() >= deadline:  # the watchdog closed the transport under a wait
            raise CommandTimeout() from None
        raise
    finally:
        _watchdog.unwatch(token)
        channel.close()


def sftp_put(sftp: paramiko.SFTPClient, local: str, remote: str, sha256: str, deadline: float) -> int:
    """Stream the controller file ``local`` to ``remote`` (created exclusively, 0600), hashing what
    is sent: raises :class:`ChannelFailure` when its sha256 is not ``sha256`` (the file changed
    since it was checked) and :class:`CommandTimeout` past ``deadline``. Returns the bytes sent."""
    import hashlib

    digest = hashlib.sha256()
    sent = 0
    with open(local, "rb") as source, sftp.open(remote, "wbx") as target:
        target.chmod(0o600)
        target.set_pipelined(True)
        while True:
            if time.monotonic() >= deadline:
                raise CommandTimeout()
            chunk = source.read(4 * CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            target.write(chunk)
            sent += len(chunk)
    if digest.hexdigest() != sha256:
        raise ChannelFailure(f"{local} changed while it was sent (sha256 {digest.hexdigest()}, checked {sha256})")
    return sent
