"""The roles' templates render from the documented variables (exactly what a node gets)."""

import ast

from provision.templating import render_template, template_loader

ENV = template_loader([])


def render(name, **context):
    return render_template(ENV, name, context)


def test_kernel_exports_only_cluster_clients_sync_root_squash_ro_unless_rw():
    text = render(
        "nfs-exports.j2",
        nfs_exports=[{"path": "/data/imagenet"}, {"path": "/data/scratch", "mode": "rw"}],
        nfs_kind={"clients": ["10.0.0.1", "10.0.0.2"]},
    )
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == [
        "/data/imagenet 10.0.0.1(ro,sync,root_squash,no_subtree_check) 10.0.0.2(ro,sync,root_squash,no_subtree_check)",
        "/data/scratch 10.0.0.1(rw,sync,root_squash,no_subtree_check) 10.0.0.2(rw,sync,root_squash,no_subtree_check)",
    ]


def test_ganesha_export_blocks():
    text = render("ganesha.conf.j2", nfs_exports=[{"path": "/data/imagenet"}], nfs_kind={"clients": ["10.0.0.1", "10.0.0.2"]})
    assert 'Path = "/data/imagenet";' in text and 'Pseudo = "/data/imagenet";' in text
    assert "Clients = 10.0.0.1, 10.0.0.2;" in text and "Squash = Root_Squash;" in text and "Access_Type = RO;" in text
    assert "Protocols = 4;" in text and "Access_Type = None;" in text  # nobody outside the client list


def test_condarc_and_profile():
    condarc = render("condarc.j2", item={"prefix": "/opt/anaconda3", "channels": ["defaults"]})
    assert "envs_dirs:\n  - ~/.conda/envs\n" in condarc and 'channels:\n  - "defaults"\n' in condarc
    assert "channels" not in render("condarc.j2", item={"prefix": "/opt/anaconda3"}).split("auto_update_conda")[1]
    profile = render("conda-profile.sh.j2", item={"prefix": "/opt/anaconda3"})
    assert 'PATH=/opt/anaconda3/bin":$PATH"' in profile and "*:/opt/anaconda3/bin:*) ;;" in profile


def test_jupyter_config_is_valid_python_with_secure_settings():
    text = render(
        "jupyter_server_config.py.j2",
        user="alice",
        ip="localhost",
        port=8888,
        root_dir="~",
        certfile="~/.jupyter/c.crt",
        keyfile="~/.jupyter/c.key",
        hashed_password="argon2:$argon2id$x",
    )
    compile(text, "jupyter_server_config.py", "exec")
    for line in (
        'c.ServerApp.ip = "localhost"',
        "c.ServerApp.open_browser = False",
        "c.ServerApp.port = 8888",
        'c.PasswordIdentityProvider.hashed_password = "argon2:$argon2id$x"',
        "c.ServerApp.port_retries = 0",
    ):
        assert line in text


def test_condarc_channels_are_yaml_strings():
    import yaml

    condarc = render("condarc.j2", item={"prefix": "/opt/anaconda3", "channels": ["defaults", "conda-forge", "a: b"]})
    assert yaml.safe_load(condarc)["channels"] == ["defaults", "conda-forge", "a: b"]


def test_profile_quotes_the_prefix(tmp_path):
    import subprocess

    prefix = f'/opt/x"; touch {tmp_path}/pwned; "`touch {tmp_path}/pwned2`$(touch {tmp_path}/pwned3)'
    profile = tmp_path / "p.sh"
    profile.write_text(render("conda-profile.sh.j2", item={"prefix": prefix}))
    out = subprocess.run(["sh", "-c", f'. {profile}; printf %s "$PATH"'], capture_output=True, text=True, env={"PATH": "/bin"})
    assert out.returncode == 0 and out.stdout == f"{prefix}/bin:/bin"
    assert not any(tmp_path.glob("pwned*"))
    again = subprocess.run(
        ["sh", "-c", f'. {profile}; . {profile}; printf %s "$PATH"'], capture_output=True, text=True, env={"PATH": "/bin"}
    )
    assert again.stdout == f"{prefix}/bin:/bin"  # not added twice


def test_jupyter_config_string_values_are_python_literals_that_read_back_exactly():
    values = {
        "ip": "0.0.0.0",
        "root_dir": "~/it's \"here\"\\\nimport os; os.system('x')\u00e9</script>",
        "certfile": "/etc/ssl/a'b\nc.crt",
        "keyfile": '/etc/ssl/a"b\\.key',
        "hashed_password": "argon2:$argon2id$x'\nimport os\nos.system('id')\n#",
    }
    text = render("jupyter_server_config.py.j2", user="alice", port=8888, **values)
    tree = ast.parse(text)
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute):
            value = node.value.args[0] if isinstance(node.value, ast.Call) else node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found[node.targets[0].attr] = value.value
    assert found == {
        "ip": values["ip"],
        "root_dir": values["root_dir"],
        "token": "",
        "hashed_password": values["hashed_password"],
        "certfile": values["certfile"],
        "keyfile": values["keyfile"],
    }
    # nothing but the settings: no statement smuggled in through a value
    assert [type(node).__name__ for node in tree.body] == ["Import"] + ["Assign"] * 13
