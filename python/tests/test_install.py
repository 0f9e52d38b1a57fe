"""scripts/install-python.sh (docs/python.md, "Install"): a clustersim.pth in the user
site-packages of /usr/bin/python3, pointing at the build's python/ folder; no pip, no network.
Run with HOME and PYTHONUSERBASE in a scratch folder, so the real user site is never touched."""

import os
import pathlib
import subprocess
import sys

import clustersim as cs

ROOT = pathlib.Path(os.environ.get("CSIM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


def scratch_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE")}
    env["HOME"] = str(tmp_path / "home")
    env["PYTHONUSERBASE"] = str(tmp_path / "userbase")
    return env


def test_install_writes_a_pth_that_imports_the_build_trees_module(tmp_path):
    module_dir = pathlib.Path(cs.__file__).resolve().parent.parent  # build/<preset>/python
    build = module_dir.parent
    env = scratch_env(tmp_path)
    script = ROOT / "scripts" / "install-python.sh"
    subprocess.run([str(script), "--build", str(build), "--python", sys.executable], env=env,
                   check=True, capture_output=True, text=True)
    site = subprocess.run([sys.executable, "-m", "site", "--user-site"], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()
    assert site.startswith(str(tmp_path / "userbase"))  # the scratch site, not the real one
    pth = pathlib.Path(site) / "clustersim.pth"
    assert pth.read_text() == f"{module_dir}\n"
    # A fresh interpreter, elsewhere, without PYTHONPATH, imports the build's module.
    found = subprocess.run([sys.executable, "-c", "import clustersim; print(clustersim.__file__)"],
                           env=env, cwd="/", check=True, capture_output=True, text=True)
    assert pathlib.Path(found.stdout.strip()).resolve().parent.parent == module_dir
    # --uninstall removes it: the import fails again.
    subprocess.run([str(script), "--uninstall", "--python", sys.executable], env=env, check=True,
                   capture_output=True)
    assert not pth.exists()
    gone = subprocess.run([sys.executable, "-c", "import clustersim"], env=env, cwd="/",
                          capture_output=True, text=True)
    assert gone.returncode != 0 and "No module named 'clustersim'" in gone.stderr


def test_install_refuses_a_build_without_the_module(tmp_path):
    env = scratch_env(tmp_path)
    r = subprocess.run([str(ROOT / "scripts" / "install-python.sh"), "--build",
                        str(tmp_path / "nothing"), "--python", sys.executable], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "holds no built module" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "userbase").exists()  # nothing written
