"""The gather script: framing, splitting, and a real run on this machine."""

import os
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from provision.errors import ParseError
from provision.inventory.model import Host
from provision.probe.gather import CAPTURE_NAMES, REMOTE_COMMAND, STEPS, capture_script, gather_script, new_nonce, split_output
from provision.transport.connection import run_command
from provision.transport.options import SshOptions

OTHERS = [name for name in CAPTURE_NAMES if name != "hostname"]  # framed after hostname in these tests


def run_locally(script: str) -> str:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout


def test_real_run_splits_into_every_capture():
    nonce = new_nonce()
    captures = split_output(run_locally(gather_script(nonce)), nonce)
    assert set(captures) == set(CAPTURE_NAMES)
    assert captures["uname-m"].available and captures["uname-m"].stdout.strip()
    if not captures["ppc64_cpu-info"].available:
        assert captures["ppc64_cpu-info"].why_unavailable() == "not installed"


def test_output_cannot_forge_a_frame():
    nonce = new_nonce()
    fake = "@@" + "0" * 16 + "@@ .rc 0\n"
    text = f"@@{nonce}@@ hostname\n{fake}evil\n\n@@{nonce}@@ .rc 0\n\n"
    for name in OTHERS:
        text += f"@@{nonce}@@ {name}\n\n@@{nonce}@@ .rc 127\nnot installed\n"
    captures = split_output(text, nonce)
    assert captures["hostname"].stdout == fake + "evil\n"
    assert captures["meminfo"].exit_code == 127 and captures["meminfo"].why_unavailable() == "not installed"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello\n",
        "@@N@@ hostname\nx\n",
        "@@N@@ hostname\nx\n@@N@@ uname-m\n",
        "@@N@@ .rc 0\n",
        "@@N@@ hostname\n\n@@N@@ .rc 0\n\n",
    ],
)
def test_broken_framing(text):
    with pytest.raises(ParseError, match="probe"):
        split_output(text.replace("N", "a" * 16), "a" * 16)


def test_failed_step_keeps_its_stderr():
    nonce = new_nonce()
    text = "".join(f"@@{nonce}@@ {name}\n\n@@{nonce}@@ .rc 0\n\n" for name in CAPTURE_NAMES if name != "nvidia-smi-query")
    failure = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    text += f"@@{nonce}@@ nvidia-smi-query\n\n@@{nonce}@@ .rc 9\n{failure}\n"
    capture = split_output(text, nonce)["nvidia-smi-query"]
    assert capture.why_unavailable() == f"exit 9: {failure}"


def _path_without(tmp_path, missing: set[str], stand_ins: dict[str, str]) -> str:
    """A PATH of one folder: links to every tool on this machine's PATH except ``missing``, plus
    ``stand_ins`` (name -> sh script). The test then does not depend on what the machine has."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            target = bin_dir / entry.name
            if entry.name not in missing and entry.name not in stand_ins and not target.exists():
                target.symlink_to(entry.path)
    for name, script in stand_ins.items():
        (bin_dir / name).write_text("#!/bin/sh\n# TEST STAND-IN: prints a real capture, whatever this machine has\n" + script)
        (bin_dir / name).chmod(0o755)
    return str(bin_dir)


def test_capture_script_writes_a_folder(tmp_path):
    numa = FIXTURES / "captures" / "minsky" / "numactl-H.txt"
    path = _path_without(tmp_path, {"nvidia-smi", "numactl"}, {"numactl": f"cat '{numa}'\n"})
    out = tmp_path / "out"
    subprocess.run(
        ["/bin/sh", "-c", capture_script(), "sh", str(out)], check=True, capture_output=True, env={**os.environ, "PATH": path}
    )
    (host_dir,) = list(out.iterdir())
    assert (host_dir / "uname-m.txt").read_text() == subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout
    assert (host_dir / "numactl-H.txt").read_text() == numa.read_text()
    assert not (host_dir / "nvidia-smi-query.txt").exists()  # a tool that is not installed leaves no file


def test_sysfs_cpu_step_reads_sibling_lists_on_this_kernel():
    # The lists are binary sysfs attributes: dash's byte-wise `read` gets "" from them on recent
    # kernels, so the step greps them; a real run here must give every online CPU its lists.
    import os

    from provision.facts.sysfs_cpu import parse_sysfs_cpu
    from provision.probe.gather import STEPS

    script = next(step.command for step in STEPS if step.name == "sysfs-cpu")
    parsed = parse_sysfs_cpu(subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout)
    assert parsed.siblings and len(parsed.rows) == os.cpu_count()


def test_hwloc_step_without_hwloc_is_not_installed(tmp_path):
    from provision.probe.gather import STEPS

    script = next(step.command for step in STEPS if step.name == "hwloc-xml")
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env={"PATH": str(tmp_path)})
    assert done.returncode == 127 and done.stdout == ""


def framed(nonce: str, forged: str = "") -> str:
    """Well-framed output of every step, with ``forged`` printed by the first one (hostname)."""
    text = f"@@{nonce}@@ hostname\nnode1\n{forged}\n@@{nonce}@@ .rc 0\n"
    return text + "".join(f"@@{nonce}@@ {name}\n\n@@{nonce}@@ .rc 127\n" for name in OTHERS)


@pytest.mark.parametrize("name", ["/tmp/x", "../../x", "../x", "sub/dir", "hostname.txt", "HOSTNAME"])
def test_a_frame_that_is_not_a_capture_name_fails_the_host(name):
    # A hostile node can learn the nonce (it runs the script); a frame name becomes a file name.
    nonce = new_nonce()
    forged = f"@@{nonce}@@ .rc 0\n@@{nonce}@@ {name}\npwned"
    with pytest.raises(ParseError, match=re.escape(repr(name))):
        split_output(framed(nonce, forged), nonce)


def test_a_capture_framed_twice_fails_the_host():
    nonce = new_nonce()
    forged = f"@@{nonce}@@ .rc 0\n@@{nonce}@@ meminfo\nMemTotal: 1 kB\n@@{nonce}@@ .rc 0\n@@{nonce}@@ uname-m\nx"
    with pytest.raises(ParseError, match="'meminfo' appears twice|'uname-m' appears twice"):
        split_output(framed(nonce, forged), nonce)


def test_a_huge_exit_code_is_not_a_frame():
    nonce = new_nonce()
    text = framed(nonce).replace(f"@@{nonce}@@ .rc 0\n", f"@@{nonce}@@ .rc {'9' * 5000}\n", 1)
    with pytest.raises(ParseError, match="probe"):
        split_output(text, nonce)


def test_stderr_comes_framed_on_its_own_stream_and_is_kept_only_on_failure():
    nonce = new_nonce()
    stdout = "".join(f"@@{nonce}@@ {name}\nout\n@@{nonce}@@ .rc {1 if name == 'numactl-H' else 0}\n" for name in CAPTURE_NAMES)
    stderr = "login banner\n" + "".join(f"@@{nonce}@@ {name}\nwarning from {name}\n" for name in CAPTURE_NAMES)
    captures = split_output(stdout, nonce, stderr)
    assert captures["numactl-H"].why_unavailable() == "exit 1: warning from numactl-H"
    assert captures["lscpu"].stderr == "" and captures["lscpu"].stdout == "out"


def test_script_runs_under_sh_s_on_stdin_and_no_step_can_read_stdin(tmp_path, monkeypatch):
    # A tool that reads stdin (here a TEST STAND-IN `uname` that runs `cat` first) must neither
    # hang the host nor eat the rest of the script, which `sh -s` reads from the same stdin.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "uname").write_text("#!/bin/sh\n# TEST STAND-IN uname: reads stdin first\ncat\necho standin-arch\n")
    (bin_dir / "uname").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    nonce = new_nonce()
    result = run_command(Host("localhost"), REMOTE_COMMAND, SshOptions(command_timeout=60), stdin=gather_script(nonce))
    captures = split_output(result.stdout, nonce, result.stderr)
    assert captures["uname-m"].stdout == "standin-arch\n"
    assert set(captures) == set(CAPTURE_NAMES) and captures["meminfo"].available


def test_script_is_one_compound_command_and_uses_no_predictable_temporary_path():
    for script, last in ((gather_script(new_nonce()), "} 4>&1 </dev/null"), (capture_script(), "} </dev/null")):
        body = [line for line in script.splitlines() if line and not line.startswith("#")]
        assert body[0] == "{" and body[-1] == last
        assert "$$" not in script and "/tmp/" not in script
    assert "mktemp" not in gather_script(new_nonce())  # streaming needs no temporary files at all


@pytest.mark.parametrize("shell", ["/bin/sh", "/bin/bash"])
def test_both_streams_leave_the_node_whole_at_the_end(tmp_path, shell):
    # Issue 37: stdout and stderr are each printed once, when every step is done (a few SSH packets
    # instead of one per frame), and byte for byte as the steps printed them: the trailing blank
    # lines that a command substitution strips are kept. A TEST STAND-IN lscpu prints such lines
    # and a warning, fails, then waits until the test has seen that nothing came out yet.
    started, release = tmp_path / "started", tmp_path / "release"
    lscpu = f"printf 'CPU(s): 2\\n\\n\\n'; echo 'lscpu: warning' >&2; : >'{started}'\n"
    lscpu += f"while [ ! -e '{release}' ]; do sleep 0.05; done; exit 1\n"
    path = _path_without(tmp_path, set(), {"lscpu": lscpu})
    nonce = new_nonce()
    (tmp_path / "script").write_text(gather_script(nonce))
    with open(tmp_path / "script", "rb") as script:  # on the stdin of `sh -s`, as over SSH
        node = subprocess.Popen(
            [shell, "-s"], stdin=script, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PATH": path}
        )
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the stand-in lscpu never ran"
        ready, _, _ = select.select([node.stdout, node.stderr], [], [], 0.5)
        assert ready == []  # hwloc-xml, uname-r and lscpu itself have printed: none of it has left yet
        release.touch()
        out, err = node.communicate(timeout=60)
    finally:
        node.kill()
    captures = split_output(out.decode(), nonce, err.decode())
    assert captures["lscpu"].stdout == "CPU(s): 2\n\n\n"
    assert captures["lscpu"].why_unavailable() == "exit 1: lscpu: warning"
    assert set(captures) == set(CAPTURE_NAMES) and captures["meminfo"].available


def test_uname_r_step_prints_what_uname_r_prints():
    # Read from /proc/sys/kernel/osrelease by the shell (no process), the same string as uname -r.
    script = next(step.command for step in STEPS if step.name == "uname-r")
    mine = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    assert mine == subprocess.run(["uname", "-r"], capture_output=True, text=True, check=True).stdout


def test_every_step_is_a_fact_declared_beside_its_parser():
    # gather assembles its steps from the fact registry: every fixed fact of provision/facts/* runs,
    # each with its parser; no name is spelled twice.
    from provision.facts.registry import FACTS

    declared = {f.name: f for f in FACTS.values() if f.parse and f.parse.__module__.startswith("provision.facts.")}
    assert {step.name: step for step in STEPS} == {n: f for n, f in declared.items() if not f.takes_arg}
    assert all(FACTS[step.name] is step and step.parse is not None for step in STEPS)
    assert len(set(CAPTURE_NAMES)) == len(CAPTURE_NAMES)


# Issue 24 finding 1: the capture script writes only into a folder it makes itself.


def _run_capture(out: Path, *shell: str) -> subprocess.CompletedProcess:
    return subprocess.run([*(shell or ("/bin/sh",)), "-c", capture_script(), "sh", str(out)], capture_output=True, text=True)


@pytest.mark.parametrize("shell", ["/bin/sh", "/usr/bin/dash", "/bin/bash"])
def test_capture_script_never_writes_through_a_planted_link(tmp_path, shell):
    if not Path(shell).exists():
        pytest.skip(f"{shell} is not installed here")
    host = subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout.strip()
    victim = tmp_path / "shadow"
    victim.write_text("root:$6$hash:19000:0:99999:7:::\n")
    out = tmp_path / "cap"
    (out / host).mkdir(parents=True)
    (out / host / "hostname.txt").symlink_to(victim)  # as alice: ln -s /etc/shadow /tmp/cap/node01/hostname.txt
    done = _run_capture(out, shell)
    assert done.returncode == 1 and f"capture: {out}/{host} already exists" in done.stderr
    assert victim.read_text() == "root:$6$hash:19000:0:99999:7:::\n"
    assert [p.name for p in (out / host).iterdir()] == ["hostname.txt"]


def test_capture_script_refuses_a_folder_that_is_a_link_and_makes_a_private_one(tmp_path):
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    (tmp_path / "cap").symlink_to(elsewhere)
    done = _run_capture(tmp_path / "cap")
    assert done.returncode == 1 and "cap is a link: refused" in done.stderr and list(elsewhere.iterdir()) == []
    done = _run_capture(tmp_path / "fresh")
    assert done.returncode == 0, done.stderr
    (host_dir,) = (tmp_path / "fresh").iterdir()
    assert host_dir.stat().st_mode & 0o777 == 0o700 and not (host_dir / ".stderr").exists()
    assert {p.stat().st_mode & 0o777 for p in host_dir.iterdir()} == {0o600}
    again = _run_capture(tmp_path / "fresh")  # a second run never writes into the first one's folder
    assert again.returncode == 1 and "already exists" in again.stderr
