"""`provision rankfile/launch/topology/slurm-nodes` as a user runs them, bad input included."""

import shutil
from pathlib import Path

import pytest

from conftest import run_cli


@pytest.fixture
def facts_dir(tmp_path):
    done = run_cli("probe", "--replay", "tests/fixtures/captures", "minsky", "epyc7451", "--facts-dir", str(tmp_path / "facts"))
    assert done.returncode == 0, done.stderr
    return tmp_path / "facts"


def one_line_error(done, *needles):
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("provision: error:") == 1 and "Traceback" not in done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


def test_rankfile_written_atomically_with_backup(facts_dir, tmp_path):
    out = tmp_path / "2x1.rf"
    out.write_text("# hand-made\n")
    done = run_cli("rankfile", "2x1x1", "--hosts", "minsky", "--facts-dir", str(facts_dir), "--allow-no-gpu", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text().endswith("rank 0=minsky slot=0:0-9\nrank 1=minsky slot=1:0-9\n")
    assert (tmp_path / "2x1.rf~").read_text() == "# hand-made\n"


@pytest.mark.parametrize("dims", ["4x2", "0x1x1", "axbxc", "4x2x3x1"])
def test_bad_dims(facts_dir, dims):
    one_line_error(run_cli("rankfile", dims, "--hosts", "minsky", "--facts-dir", str(facts_dir)), repr(dims))


def test_host_missing_from_facts(facts_dir):
    one_line_error(
        run_cli("rankfile", "2x2x1", "--hosts", "minsky,ghost", "--facts-dir", str(facts_dir), "--allow-no-gpu"),
        "ghost",
        "provision probe ghost",
    )


def test_corrupt_facts_file_named(facts_dir):
    (facts_dir / "minsky.json").write_text('{"format": 1, "host": "minsky"')
    one_line_error(run_cli("rankfile", "2x1x1", "--hosts", "minsky", "--facts-dir", str(facts_dir)), "minsky.json", "corrupt")


def test_mixed_hosts_warn_and_each_use_own_cores(facts_dir):
    done = run_cli("rankfile", "2x2x1", "--hosts", "minsky,epyc7451", "--facts-dir", str(facts_dir), "--allow-no-gpu")
    assert done.returncode == 0, done.stderr
    assert "warning" in done.stderr and "epyc7451 is 2x24x2" in done.stderr
    assert "rank 1=epyc7451 slot=0:0-23" in done.stdout and "rank 0=minsky slot=0:0-9" in done.stdout


def test_check_reports_lines_and_syntax_errors(facts_dir, tmp_path):
    bad = tmp_path / "bad.rf"
    bad.write_text("rank 0=minsky slot=0:0-11\nrank 1=minsky slot=1:0-9\n")
    done = run_cli("rankfile", "--check", str(bad), "--facts-dir", str(facts_dir))
    assert done.returncode == 1 and done.stdout.count(f"{bad}:") == 1 and f"{bad}:1:" in done.stdout
    bad.write_text("rank 0=minsky slot=0:0-4\nrank one=minsky slot=0:5-9\n")
    one_line_error(run_cli("rankfile", "--check", str(bad), "--facts-dir", str(facts_dir)), f"{bad}:2:")


def test_launch_refuses_without_openmpi_and_prints_hostfiles(facts_dir, tmp_path):
    one_line_error(
        run_cli(
            "launch",
            "2x1x1",
            "--hosts",
            "epyc7451",
            "--facts-dir",
            str(facts_dir),
            "--allow-no-gpu",
            "--rankfile",
            str(tmp_path / "x.rf"),
            "--",
            "true",
        ),
        "OpenMPI is not installed on: epyc7451",
    )
    done = run_cli(
        "launch", "2x1x1", "--hosts", "minsky", "--facts-dir", str(facts_dir), "--allow-no-gpu", "--format", "hostfile"
    )
    assert done.stdout == "minsky slots=2\n"


def test_launch_command_line(facts_dir, tmp_path):
    rf = tmp_path / "x.rf"
    done = run_cli(
        "launch",
        "4x1x1",
        "--hosts",
        "minsky",
        "--facts-dir",
        str(facts_dir),
        "--allow-no-gpu",
        "--rankfile",
        str(rf),
        "-x",
        "PYTHONPATH",
        "--ddl-mode",
        "b",
        "--dump-iter",
        "100",
        "--",
        "python",
        "train.py",
        "--lr",
        "0.1",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"mpirun -n 4 -rf {rf} -x PATH -x LD_LIBRARY_PATH -x PYTHONPATH python train.py --lr 0.1 "
        "-ddl '-mode b:4x1x1 -dump_iter 100'"
    )
    assert rf.read_text().count("rank ") == 4


def test_topology_svg_and_slurm(facts_dir, tmp_path):
    done = run_cli(
        "topology",
        "4x1x1",
        "--hosts",
        "minsky",
        "--facts-dir",
        str(facts_dir),
        "--allow-no-gpu",
        "--svg",
        str(tmp_path / "t.svg"),
    )
    assert done.returncode == 0 and "rank 3: cores 1:5-9" in done.stdout
    assert (tmp_path / "t.svg").read_text().startswith("<?xml")
    done = run_cli("slurm-nodes", "--facts-dir", str(facts_dir))
    assert "NodeName=minsky CPUs=160 Boards=1 SocketsPerBoard=2 CoresPerSocket=10 ThreadsPerCore=8" in done.stdout


@pytest.mark.parametrize("command", [["rankfile"], ["topology"], ["launch"]])
def test_probe_takes_the_ssh_options(command, tmp_path):
    from test_connection import blackhole

    inventory = tmp_path / "hosts.yml"
    (tmp_path / "ssh_config").write_text("")
    with blackhole() as port:
        inventory.write_text(f"hosts:\n  hole: {{address: 127.0.0.1, port: {port}}}\n")
        done = run_cli(
            *command,
            "1x1x1",
            "--hosts",
            "hole",
            "-i",
            str(inventory),
            "--facts-dir",
            str(tmp_path / "facts"),
            "--probe",
            "--forks",
            "2",
            "--connect-timeout",
            "0.5",
            "--command-timeout",
            "30",
            "--known-hosts",
            str(tmp_path / "kh"),
            "--accept-new-host-keys",
            "--ssh-config",
            str(tmp_path / "ssh_config"),
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.count("provision: error:") == 1 and "Traceback" not in done.stderr
    assert "hole (timeout: no SSH answer within 0.5s)" in done.stderr.replace("\n", "")


def test_unreadable_ssh_config_is_one_line(tmp_path):
    one_line_error(
        run_cli("probe", "h1", "--ssh-config", str(tmp_path / "missing")), str(tmp_path / "missing"), "cannot read ssh_config"
    )


def test_facts_file_cannot_inject_rank_file_lines(facts_dir, tmp_path):
    path = facts_dir / "minsky.json"
    path.write_text(path.read_text().replace('"hostname": "minsky"', '"hostname": "minsky\\nrank 99=evil slot=0:0"'))
    out = tmp_path / "x.rf"
    done = run_cli("rankfile", "2x1x1", "--hosts", "minsky", "--facts-dir", str(facts_dir), "--allow-no-gpu", "-o", str(out))
    one_line_error(done, "minsky.json", "'hostname'")
    assert not out.exists()
    one_line_error(run_cli("slurm-nodes", "--facts-dir", str(facts_dir)), "minsky.json")


def test_inconsistent_core_numbers_refused_even_under_python_O(facts_dir, tmp_path):
    """The check that no slot names a missing core is a real error, not an ``assert`` -O removes."""
    import json
    import subprocess
    import sys

    path = facts_dir / "minsky.json"
    data = json.loads(path.read_text())
    data["cpu"]["sockets"][0]["cores"][-1]["index"] = 12  # socket 0 numbered 0-8, 12
    path.write_text(json.dumps(data))
    out = tmp_path / "x.rf"
    done = subprocess.run(
        [
            sys.executable,
            "-O",
            "-m",
            "provision",
            "rankfile",
            "2x1x1",
            "--hosts",
            "minsky",
            "--facts-dir",
            str(facts_dir),
            "--allow-no-gpu",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    one_line_error(done, "host minsky: socket 0 has no core 9")
    assert not out.exists()


@pytest.fixture
def rack_cluster(tmp_path):
    """Facts of w1, w2, w3 (the seed's Minsky, no GPUs) and an inventory with racks rack1: [w1, w2], rack2: [w3]."""
    captures = tmp_path / "cap"
    for name in ("w1", "w2", "w3"):
        shutil.copytree("tests/fixtures/captures/minsky", captures / name)
    facts = tmp_path / "facts"
    done = run_cli("probe", "--replay", str(captures), "--facts-dir", str(facts))
    assert done.returncode == 0, done.stderr
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "hosts: {w1: {}, w2: {}, w3: {}}\nracks:\n  - {name: rack1, hosts: [w1, w2]}\n  - {name: rack2, hosts: [w3]}\n"
    )
    return inventory, facts


@pytest.mark.parametrize("dims", ["1x1x3", "1x3x1"])
def test_shapes_that_ignore_the_inventory_racks_are_refused_naming_them(rack_cluster, dims):
    inventory, facts = rack_cluster
    done = run_cli("rankfile", dims, "-i", str(inventory), "--facts-dir", str(facts), "--allow-no-gpu")
    one_line_error(done, "rack1: w1, w2", "rack2: w3", "--hosts")


def test_hosts_chosen_rack_by_rack_follow_the_inventory(rack_cluster):
    inventory, facts = rack_cluster
    common = ("-i", str(inventory), "--facts-dir", str(facts), "--allow-no-gpu")
    done = run_cli("rankfile", "1x1x2", "--hosts", "w1,w3", *common)
    assert done.returncode == 0, done.stderr
    # w1 and w2 are one rack: two rank-file racks cannot split it.
    one_line_error(run_cli("rankfile", "1x1x2", "--hosts", "w1,w2", *common), "rack1")
    # topology draws the inventory's racks: w3 under rack 2 (rack2).
    done = run_cli("topology", "1x1x2", "--hosts", "w1,w3", *common)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "rack 1 (rack1)" in text and "rack 2 (rack2)" in text
    assert text.index("rack 2 (rack2)") < text.index("w3") and text.index("w1") < text.index("rack 2 (rack2)")


def test_wrong_host_count_says_hosts_chooses_them(facts_dir):
    done = run_cli("rankfile", "1x1x1", "--hosts", "minsky,epyc7451", "--facts-dir", str(facts_dir), "--allow-no-gpu")
    one_line_error(done, "need Y·Z = 1 hosts, got 2", "--hosts")


def test_no_gpu_is_not_drawn_as_gpu_0(facts_dir, tmp_path):
    svg = tmp_path / "t.svg"
    done = run_cli("topology", "2x1x1", "--hosts", "epyc7451", "--facts-dir", str(facts_dir), "--allow-no-gpu", "--svg", str(svg))
    assert done.returncode == 0, done.stderr
    assert "-> no GPU" in done.stdout and "GPU 0" not in done.stdout
    assert "GPU 0" not in svg.read_text() and "no GPU" in svg.read_text()


def test_slurm_nodes_takes_groups_and_prints_all_or_nothing(rack_cluster, tmp_path):
    inventory, facts = rack_cluster
    inventory.write_text(inventory.read_text() + "groups: {gpu: [w1, w3]}\n")
    done = run_cli("slurm-nodes", "-i", str(inventory), "gpu", "--facts-dir", str(facts))
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["NodeName=w1", "NodeName=w3"]
    done = run_cli("slurm-nodes", "w1", "wX", "--facts-dir", str(facts))
    assert done.returncode == 2 and done.stdout == "" and "wX" in done.stderr and "nothing printed" in done.stderr


def test_slurm_gres_covers_the_inventory_by_default_as_slurm_nodes(rack_cluster, tmp_path):
    # w3 was probed once but has left the inventory: its cached facts must not reach gres.conf.
    _, facts = rack_cluster
    inventory = tmp_path / "now.yml"
    inventory.write_text("hosts: {w1: {}, w2: {}}\n")
    done = run_cli("slurm-gres", "-i", str(inventory), "--facts-dir", str(facts))
    assert done.returncode == 0, done.stderr
    assert "host w1:" in done.stderr and "host w2:" in done.stderr and "w3" not in done.stderr + done.stdout
    nodes = run_cli("slurm-nodes", "-i", str(inventory), "--facts-dir", str(facts))
    assert [line.split()[0] for line in nodes.stdout.splitlines()] == ["NodeName=w1", "NodeName=w2"]


def test_launch_says_what_it_wrote_and_where_the_users_file_went(facts_dir, tmp_path):
    mine = tmp_path / "2x1x1.rf"
    mine.write_text("# my own rank file\n")
    done = run_cli(
        "launch", "2x1x1", "--hosts", "minsky", "--facts-dir", str(facts_dir), "--allow-no-gpu", "--", "hostname", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert f"wrote rank file {mine}" in done.stderr and f"kept as {mine}~" in done.stderr
    assert (tmp_path / "2x1x1.rf~").read_text() == "# my own rank file\n"


def test_facts_are_found_beside_the_inventory_from_any_directory(tmp_path):
    """Issue 26: `rankfile -i /path/hosts.yml` from elsewhere said "run provision probe first":
    the facts folder was found from the current directory. One rule: facts/ beside the inventory."""
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    site.mkdir()
    inventory = site / "hosts.yml"
    inventory.write_text("hosts:\n  minsky: {}\n")
    captures = str(Path("tests/fixtures/captures").resolve())
    probed = run_cli("probe", "--replay", captures, "minsky", "-i", str(inventory), "--facts-dir", str(site / "facts"))
    assert probed.returncode == 0, probed.stderr
    done = run_cli("rankfile", "2x1x1", "-i", str(inventory), "--hosts", "minsky", "--allow-no-gpu", cwd=elsewhere)
    assert done.returncode == 0 and "\nrank 0=minsky slot=" in done.stdout, done.stdout + done.stderr
    (site / "facts" / "minsky.json").unlink()
    missing = run_cli("rankfile", "2x1x1", "-i", str(inventory), "--hosts", "minsky", "--allow-no-gpu", cwd=elsewhere)
    assert missing.returncode != 0 and f"looked for {site / 'facts' / 'minsky.json'}" in missing.stderr, missing.stderr


def test_the_probe_hint_of_missing_facts_names_the_inventory_and_runs_when_pasted(tmp_path):
    """Issue 34: a hint is a command that works when pasted; with -i, probe must read the same
    inventory (the host's address is there) and write where rankfile reads."""
    import re
    import shlex

    folder = tmp_path / "my cluster"
    folder.mkdir()
    (folder / "hosts.yml").write_text("hosts:\n  n1: {address: 127.0.0.1, port: 1}\nracks:\n  - {name: r1, hosts: [n1]}\n")
    done = run_cli("rankfile", "1x1x1", "-i", str(folder / "hosts.yml"), "--allow-no-gpu")
    assert done.returncode == 2, done.stdout + done.stderr
    hint = re.search(r"run `([^`]+)` first", done.stderr)
    assert hint, done.stderr
    words = shlex.split(hint.group(1))
    assert words == ["provision", "probe", "n1", "-i", str(folder / "hosts.yml"), "--facts-dir", str(folder / "facts")]
    pasted = run_cli(*words[1:], "--connect-timeout", "2")  # reaches n1 as the inventory says (closed port here)
    assert pasted.returncode == 1 and "127.0.0.1" in pasted.stdout + pasted.stderr, pasted.stdout + pasted.stderr
