"""The launcher's output scanning (the SSH side is proven on real OpenMPI in test_mpirun_cluster.py)."""

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
