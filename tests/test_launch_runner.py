"""The launcher's output scanning and its peer check (the SSH side is proven on real OpenMPI in test_mpirun_cluster.py)."""

from provision.launch.bindings import Binding
from provision.launch.runner import MAX_LINE, _BindingScanner


def test_binding_lines_split_across_chunks_are_read():
    scanner = _BindingScanner(ranks=2)
    for chunk in (
        b"node1\n[m51:00057] Rank 0 bou",
        b"nd to package[0][core:0]\n[m52:0",
        b"0058] Rank 1 bound to package[0][core:1]\n",
    ):
        scanner.feed(chunk)
    assert scanner.bindings == {0: Binding("m51", 0, ((0, 0),)), 1: Binding("m52", 1, ((0, 1),))}


def test_only_planned_ranks_and_the_first_report_count():
    scanner = _BindingScanner(ranks=1)
    scanner.feed(b"[a:1] Rank 0 bound to package[0][core:0]\n[a:1] Rank 0 bound to package[0][core:1]\n")
    scanner.feed(b"[a:1] Rank 7 bound to package[0][core:1]\n")  # a rank the plan does not have
    assert scanner.bindings == {0: Binding("a", 0, ((0, 0),))}


def test_an_endless_line_is_bounded():
    scanner = _BindingScanner(ranks=1)
    for _ in range(50):
        scanner.feed(b"x" * 65536)
    assert len(scanner.partial) <= MAX_LINE
    scanner.feed(b"\n[a:1] MCW rank 0 bound to socket 0[core 3[hwt 0]]: [...B]\n")
    assert scanner.bindings == {0: Binding("a", 0, ((0, 3),))}


class _Result:
    def __init__(self, exited: int = 0, stdout: str = "", stderr: str = ""):
        self.exited, self.stdout, self.stderr = exited, stdout, stderr


class _FirstHost:
    """The first host's connection: it reaches every peer, but the second node cannot reach the third."""

    def __init__(self, hop_stderr: str):
        self.hop_stderr = hop_stderr

    def run(self, command: str, **_kwargs) -> _Result:
        if command.startswith("i=0; for h in"):  # _unreachable: every peer answered
            return _Result()
        return _Result(255, stderr=self.hop_stderr)  # the hop node2 -> node3


def test_peers_that_cannot_reach_each_other_mean_no_tree_spawn_and_ssh_s_words_are_escaped(capsys):
    """A local name ``shown`` (the host list) once hid provision.text.shown in this function: the
    no-tree-spawn branch then raised UnboundLocalError and launch --run failed instead of going on."""
    from provision.launch.runner import _peer_reachability

    hop = "Permission denied (publickey).\x1b]52;c;cm0gLXJm\x07\n"
    assert _peer_reachability(_FirstHost(hop), "node1", ["node1", "node2", "node3"]) is True
    said = capsys.readouterr().err
    assert "node2 cannot SSH to node3 (Permission denied (publickey).\\x1b]52;c;cm0gLXJm\\x07)" in said
    assert "no tree spawn" in said and "\x1b" not in said


class _Channel:
    """A finished mpirun's channel: the chunks its ranks printed, then exit 0."""

    def __init__(self, chunks: list[bytes]):
        self.chunks = list(chunks)

    def settimeout(self, _seconds):
        pass

    def recv(self, _size):
        return self.chunks.pop(0) if self.chunks else b""

    def exit_status_ready(self):
        return True

    def recv_exit_status(self):
        return 0


def test_a_ranks_escape_sequences_are_shown_never_obeyed():
    """Issue 33 finding 6: a rank printed a window title, a clear screen and a fake verdict; the
    terminal gets every control character escaped (also one split across chunks, and a byte
    that is not UTF-8), the binding reports still read, the rest of the text as it was."""
    import io

    from provision.launch.runner import _stream

    chunks = [
        b"\x1b]0;all good\x07\x1b[2J\x1b",  # an escape sequence cut between two chunks
        b"[Hprovision: all 8 ranks bound as planned\r\n[m51:00057] Rank 0 bound to package[0][core:0]\n",
        b"loss 0.5 \xe2\x9c",  # a check mark split across chunks
        b"\x93 \x9b6n \xc2\x9b6n\ttab\n",  # a lone C1 byte (not UTF-8), C1 CSI as UTF-8, a tab
    ]
    out = io.BytesIO()
    scanner = _BindingScanner(ranks=1)
    assert _stream(_Channel(chunks), scanner, out) == 0
    text = out.getvalue().decode()
    assert text == (
        "\\x1b]0;all good\\x07\\x1b[2J\\x1b[Hprovision: all 8 ranks bound as planned\\x0d\n"
        "[m51:00057] Rank 0 bound to package[0][core:0]\n"
        "loss 0.5 \u2713 \\x9b6n \\x9b6n\ttab\n"
    )
    assert scanner.bindings == {0: Binding("m51", 0, ((0, 0),))}
