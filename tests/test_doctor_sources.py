"""doctor's gather steps run for real by sh on this machine (the script as a node runs it),
and their parsers; the pairwise step's command and parser."""

from __future__ import annotations

import os
import subprocess

import pytest

from provision.doctor import pairwise, sources
from provision.doctor.model import Limits, NodeReport
from provision.doctor.runner import DoctorSettings, doctor_steps, gather_command
from provision.errors import ParseError, ProvisionError
from provision.inventory.model import check_user
from provision.probe.gather import gather_script, new_nonce, split_output


def _gather(settings: DoctorSettings):
    nonce = new_nonce()
    done = subprocess.run(
        ["sh", "-c", gather_command(settings)], input=gather_script(nonce, doctor_steps(False)), capture_output=True, text=True
    )
    return split_output(done.stdout, nonce, done.stderr, names=tuple(s.name for s in doctor_steps(False)))


def _tree(root, content: bytes):
    (root / "sub").mkdir(parents=True)
    (root / "a b.txt").write_bytes(b"1234")
    (root / "sub" / "c").write_bytes(content)
    for path in (root / "a b.txt", root / "sub" / "c"):
        os.utime(path, (1_700_000_000, 1_700_000_000))


def test_dataset_manifest_counts_sizes_and_hashes_for_real(tmp_path):
    _tree(tmp_path / "one", b"xyz")
    _tree(tmp_path / "two", b"XYZ")  # same names, sizes, mtimes; other bytes
    paths = (str(tmp_path / "one"), str(tmp_path / "two"), str(tmp_path / "none"))
    shallow = _gather(DoctorSettings(datasets=paths))
    one, two, none = sources.parse_datasets(shallow["doctor-dataset"].stdout, paths)
    assert (one.exists, one.files, one.size) == (True, 2, 7) and not none.exists
    assert one.listing_hash == two.listing_hash and one.content_hash == ""
    deep = _gather(DoctorSettings(datasets=paths, deep=True))
    one, two, _ = sources.parse_datasets(deep["doctor-dataset"].stdout, paths)
    assert one.content_hash and one.content_hash != two.content_hash


def test_user_limits_and_clock_steps_run_for_real():
    captures = _gather(DoctorSettings(user="root"))
    login, ids, asked = sources.parse_user(captures["doctor-user"].stdout)
    assert login == subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip() and asked
    assert ids == (0, 0)
    limits, shm = sources.parse_limits(captures["doctor-limits"].stdout)
    assert limits.nofile == int(subprocess.run(["sh", "-c", "ulimit -n"], capture_output=True, text=True).stdout)
    start = sources.parse_clock(captures["doctor-clock-0"].stdout, "c0")
    assert start <= sources.parse_clock(captures["doctor-clock-1"].stdout, "c1")
    missing = _gather(DoctorSettings(user="nosuchuser-doctor"))
    assert sources.parse_user(missing["doctor-user"].stdout)[1] is None


def test_bad_input_is_refused_at_the_edge():
    for user in ("a;b", "-x", "$(id)"):
        with pytest.raises(ProvisionError, match="--user"):
            check_user(user, "--user")
    for path in ("relative", "/a/../b", "/a'b", "/a\nb", "/a$b"):
        with pytest.raises(ProvisionError, match="--dataset"):
            sources.check_dataset(path)
    assert sources.check_dataset("/data/set/") == "/data/set"


def test_software_versions_from_file_names():
    text = (
        "driver NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
        "cudart libcudart.so.12\ncudart libcudart.so.12.2.140\nnccl libnccl.so.2\nnccl libnccl.so.2.18.3\n"
        "conda /opt/anaconda3 python-3.11.5-h955ad1f_0.json\n"
    )
    assert sources.parse_software(text) == sources.Software("535.104.05", "12.2.140", "2.18.3", "/opt/anaconda3 python 3.11.5")


def test_pairwise_command_runs_as_the_job_user():
    assert pairwise.pairwise_command("n1", ["n2"], "mpi", 1000, "mpi") == "sh -s -- n1 n2"
    assert pairwise.pairwise_command("n1", ["n2"], "root", 0, "mpi").startswith("runuser -u mpi -- sh -s")
    assert pairwise.pairwise_command("n1", ["n2"], "admin", 1001, "mpi").startswith("sudo -n -u mpi -- sh -s")


def test_pairwise_output_is_parsed_strictly():
    nonce = "ab12"
    text = (
        "@@ab12@@ resolve\nn1 10.0.0.1\n@@ab12@@ resolve\nn2 -\n@@ab12@@ resolve\nevil 1.2.3.4\n"
        "@@ab12@@ ssh 255\nn2 Warning: Permanently added 'n2' (ED25519) to the list of known hosts. "
        "mpi@n2: Permission denied (publickey).\n"
        "@@ab12@@ ssh 0\nn3 doctor-limits unlimited 1024\n@@ff@@ ssh 0\nn4 doctor-limits 1 1\n"
    )
    pairs, limits, resolved = pairwise.parse_pairwise(text, nonce, {"n1", "n2", "n3", "n4"})
    assert pairs == {"n2": "mpi@n2: Permission denied (publickey).", "n3": ""}
    assert limits == {"n3": Limits(None, 1024)} and resolved == {"n1": "10.0.0.1", "n2": ""}


@pytest.mark.parametrize("forged", ["@@ab12@@ pwned\nn2\n", "@@ab12@@ ssh\nn2 doctor-limits 1 1\n", "@@ab12@@ resolve 7\nn2 x\n"])
def test_a_pairwise_frame_the_script_cannot_print_fails_the_node(forged):
    # transport/frames.py's framing: only the node knows the nonce, and it can only print the
    # script's frames; anything else it printed is a forged frame, refused, never half believed.
    with pytest.raises(ParseError, match="pairwise"):
        pairwise.parse_pairwise("@@ab12@@ resolve\nn1 10.0.0.1\n" + forged, "ab12", {"n1", "n2"})


def test_pairwise_check_lists_the_failing_pairs_and_the_node_at_fault():
    names = ["n1", "n2", "n3"]

    def report(host: str, failing: dict[str, str]) -> NodeReport:
        return NodeReport(host, job_ids=(1000, 1000), pairwise={p: failing.get(p, "") for p in names if p != host})

    no_key = {"n1": "Permission denied (publickey).", "n2": "Permission denied (publickey)."}
    result = pairwise.check_pairwise([report("n1", {}), report("n2", {}), report("n3", no_key)], "mpi")
    assert result.status == "fail" and result.hosts == ("n3",)
    assert "n3->n1, n3->n2" in result.detail and "n3 reach no peer" in result.detail


def test_peer_order_starts_after_the_node_and_wraps_round():
    names = ["n1", "n2", "n3", "n4"]
    assert pairwise.peer_order("n3", names) == ["n4", "n1", "n2"]
    assert pairwise.peer_order("n1", names) == ["n2", "n3", "n4"]
    # at any moment each peer is the k-th of exactly one node: no peer is everyone's first
    firsts = [pairwise.peer_order(n, names)[0] for n in names]
    assert sorted(firsts) == sorted(names)


def test_the_pairwise_script_tries_every_peer_once_over_its_workers(tmp_path):
    """The real script under sh, with stand-ins for ssh and getent (named so, in this test's
    folder): every peer is tried exactly once whatever PARALLEL is (a timeout twice), a failure's
    several lines come back as one, the name of the node itself is resolved but not tried, and a client whose
    default key exchange is sntrup761 is told to prefer curve25519 (the real ssh is in
    tests/test_doctor_cluster.py)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "ssh.log"
    (bin_dir / "ssh").write_text(
        "#!/bin/sh\n# stand-in for ssh: logs its arguments; peer p7 refuses us\n"
        'if [ "$1" = -Q ]; then echo curve25519-sha256; echo sntrup761x25519-sha512; exit 0; fi\n'
        f'echo "$*" >>{log}\n'
        'for a in "$@"; do peer=$a; case $a in p*) break ;; esac; done\n'
        'if [ "$peer" = p7 ]; then printf "first line\\nmpi@p7: Permission denied (publickey).\\n" >&2; exit 255; fi\n'
        f'if [ "$peer" = p9 ] && [ ! -e {tmp_path}/p9 ]; then : >{tmp_path}/p9; '
        'echo "Connection timed out during banner exchange" >&2; exit 255; fi\n'
        "echo doctor-limits unlimited 1024\n"
    )
    (bin_dir / "getent").write_text('#!/bin/sh\n# stand-in for getent\necho "10.0.0.${2#p}  $2"\n')
    for tool in ("ssh", "getent"):
        (bin_dir / tool).chmod(0o755)
    peers = [f"p{i}" for i in range(1, 21)]
    names = ["p0", *peers]
    done = subprocess.run(
        ["sh", "-s", "--", "p0", *pairwise.peer_order("p0", names)],
        input=pairwise.pairwise_script("cafe"),
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    pairs, limits, resolved = pairwise.parse_pairwise(done.stdout, "cafe", set(names))
    assert pairs == {p: "" if p != "p7" else "first line mpi@p7: Permission denied (publickey)." for p in peers}
    assert set(limits) == set(peers) - {"p7"} and resolved == {n: f"10.0.0.{n[1:]}" for n in names}
    calls = log.read_text().splitlines()
    # p9 timed out once (a busy sshd) and is tried again; every other peer exactly once
    assert sorted(next(w for w in c.split() if w.startswith("p")) for c in calls) == sorted([*peers, "p9"])
    assert all("BatchMode=yes" in c and "KexAlgorithms=^curve25519-sha256" in c for c in calls)


def test_numbers_a_node_sends_are_ascii_digits_only():
    # '²'.isdigit() is True, yet int('²') raises: a node's odd digits are refused or ignored,
    # never a ValueError, and no number longer than 20 digits is believed.
    with pytest.raises(ParseError, match="neither a number nor unlimited"):
        sources.parse_limits("memlock ²\nnofile 1024\n")
    assert sources.parse_limits("memlock unlimited\nnofile 1024\nshm ３\n")[1] is None
    with pytest.raises(ParseError, match="unexpected line"):
        sources.parse_user("login alice 1000\njob ２ 1\n")


def test_the_inventorys_anaconda_prefix_is_looked_at_first_for_real(tmp_path):
    from provision.inventory.model import open_inventory
    from provision.playbook.variables import Variables

    prefix = tmp_path / "sw" / "anaconda3"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "python-3.12.4-h5148396_1.json").write_text("{}")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f"hosts:\n  n1: {{}}\nvars:\n  anaconda:\n    - {{installer: i.sh, sha256: x, prefix: {prefix}}}\n")
    inv = open_inventory(inventory)
    prefixes = sources.anaconda_prefixes(Variables(inv), inv.resolve(["n1"]))
    assert prefixes == (str(prefix),)
    software = sources.parse_software(_gather(DoctorSettings(conda_prefixes=prefixes))["doctor-software"].stdout)
    assert software.conda_python == f"{prefix} python 3.12.4"
    inventory.write_text("hosts:\n  n1: {}\nvars:\n  anaconda:\n    - {prefix: '/opt/a;reboot'}\n")
    inv = open_inventory(inventory)
    with pytest.raises(ProvisionError, match="anaconda prefix"):
        sources.anaconda_prefixes(Variables(inv), inv.resolve(["n1"]))
