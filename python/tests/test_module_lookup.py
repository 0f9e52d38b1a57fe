"""Where the module looks for csim-rank and the loadable modules (docs/python.md, "Where the
module looks"): beside the module itself, found by dladdr (not beside /usr/bin/python3, the
executable), then the build tree that built it. A copy of the package in a folder of its own tells
the two apart: dladdr names the copy's folder, and a csim-rank beside the copy wins over the
build tree's."""

import os
import pathlib
import shutil
import subprocess
import sys

import clustersim as cs

PROBE = ("import clustersim as cs, json; print(json.dumps([cs._module_search_dir(), "
         "cs._rank_executable()]))")


def probe(pythonpath, extra_env=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CSIM_RANK_EXE")}
    env["PYTHONPATH"] = str(pythonpath)
    env.update(extra_env or {})
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd="/", check=True,
                         capture_output=True, text=True).stdout
    import json
    return json.loads(out)


def test_the_build_trees_module_looks_beside_itself():
    here = pathlib.Path(cs._clustersim.__file__).resolve().parent
    assert cs._module_search_dir() == str(here)
    # build/<preset>/python/clustersim: nothing at ../lib or beside it, so csim-rank is the build
    # tree's lib/csim-rank, where CMake put it.
    build = here.parent.parent
    assert cs._rank_executable() == str(build / "lib" / "csim-rank")


def test_a_copied_module_finds_what_is_beside_it_not_the_build_tree(tmp_path):
    src = pathlib.Path(cs._clustersim.__file__).resolve().parent
    build_rank = pathlib.Path(cs._rank_executable())
    pkg = tmp_path / "site" / "clustersim"
    pkg.mkdir(parents=True)
    for f in src.iterdir():
        if f.suffix in (".py", ".so"):
            shutil.copy2(f, pkg / f.name)
    # Nothing beside the copy: dladdr names the copy's folder; csim-rank falls back to the build
    # tree's.
    search, rank = probe(tmp_path / "site")
    assert search == str(pkg)
    assert rank == str(build_rank)
    # A csim-rank in ../lib beside the copy (an installed layout: site/lib/csim-rank): found
    # first, by the dladdr path, over the build tree's.
    (tmp_path / "site" / "lib").mkdir()
    shutil.copy2(build_rank, tmp_path / "site" / "lib" / "csim-rank")
    search, rank = probe(tmp_path / "site")
    assert rank == str(tmp_path / "site" / "lib" / "csim-rank")
    # $CSIM_RANK_EXE names it instead of any search.
    _, rank = probe(tmp_path / "site", {"CSIM_RANK_EXE": "/somewhere/else/csim-rank"})
    assert rank is None  # named, and not there


def test_a_copied_module_runs_its_ranks_with_the_csim_rank_beside_it(tmp_path, scenario):
    # The copy with its own csim-rank runs a processes launch end to end (DDP on 2 GPUs: 2
    # ranks), with the csim-rank beside it (that ranks are exec'd csim-rank, their /proc/PID/exe,
    # is tests_real's check).
    src = pathlib.Path(cs._clustersim.__file__).resolve().parent
    pkg = tmp_path / "site" / "clustersim"
    pkg.mkdir(parents=True)
    for f in src.iterdir():
        if f.suffix in (".py", ".so"):
            shutil.copy2(f, pkg / f.name)
    (tmp_path / "site" / "lib").mkdir()
    shutil.copy2(cs._rank_executable(), tmp_path / "site" / "lib" / "csim-rank")
    code = ("import clustersim as cs; sc = cs.load(%r, set={'strategy.kind': 'ddp'}); "
            "r = cs.simulate(sc, backend='standin', launch='processes'); "
            "print(r.complete, cs._rank_executable())") % scenario("linear_5x2_dp2.json")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CSIM_RANK_EXE")}
    env["PYTHONPATH"] = str(tmp_path / "site")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd="/", check=True,
                         capture_output=True, text=True).stdout
    assert out.split() == ["True", str(tmp_path / "site" / "lib" / "csim-rank")]
