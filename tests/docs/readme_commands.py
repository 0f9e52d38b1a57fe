#!/usr/bin/env python3
"""Runs every command README.md quotes (docs drift, issue: "a test checks that each command
quoted in README.md runs").

Each ```sh block is run in order in a scratch directory holding links to the repository's
scenarios/ and to the build directory as build/release, so outputs of one command (dp.json) feed
the next (tracediff dp.json ddp.json). A command passes when it exits with what the README says:
0, or the code its comment names ("# exit 1: ..."), or 3 for `--backend cuda` / `calibrate`
without a GPU (the documented "backend unavailable"). Commands that open an interactive window, or
that install, build or run the test suite (the README's first two commands: the test suite runs
them by being the test suite), are listed as skipped with the reason.

usage: readme_commands.py SOURCE_DIR BUILD_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def sh_blocks(text):
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def commands(block):
    """Logical lines of a block: continuations joined, comments split off."""
    out, cur = [], ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        if cur.strip() and not cur.strip().startswith("#"):
            m = re.match(r"^(.*?)(?:\s{2,}#\s*(.*))?$", cur.strip())
            out.append((m.group(1).strip(), (m.group(2) or "").strip()))
        cur = ""
    return out


def skip_reason(cmd):
    if "install-deps.sh" in cmd or cmd.startswith("cmake ") or "run-tests.sh" in cmd:
        return "install / build / test suite"
    if "/gui/simview" in cmd and "--screenshot" not in cmd:
        return "interactive window"
    if "/gui/simview" in cmd and shutil.which("xvfb-run") is None:
        return "no xvfb-run"
    if cmd.startswith("mpirun") and shutil.which("mpirun") is None:
        return "no mpirun"
    return None


def expected_codes(cmd, comment):
    m = re.match(r"exit (\d+)", comment)
    if m:
        return {int(m.group(1))}
    if "--backend cuda" in cmd or " calibrate " in cmd:
        return {0, 3}  # 3: no GPU here (README: "says why in one line and exits 3")
    return {0}


def main():
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with open(os.path.join(source, "README.md")) as f:
        readme = f.read()
    failures, ran, skipped = [], 0, 0
    work = tempfile.mkdtemp(prefix="csim_readme_")
    try:
        os.symlink(os.path.join(source, "scenarios"), os.path.join(work, "scenarios"))
        os.makedirs(os.path.join(work, "build"))
        os.symlink(build, os.path.join(work, "build", "release"))
        env = dict(os.environ)
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        # Outputs (-o FILE) of commands that could not run here (no GPU: exit 3): a later
        # command reading one is skipped, naming it.
        unavailable = set()
        for block in sh_blocks(readme):
            for cmd, comment in commands(block):
                why = skip_reason(cmd)
                needs = [f for f in unavailable if re.search(r"(^|\s)" + re.escape(f) + r"(\s|$)", cmd)]
                if not why and needs:
                    why = f"needs {needs[0]}, which a command above writes only on a GPU"
                if why:
                    print(f"skip ({why}): {cmd}")
                    skipped += 1
                    continue
                run = cmd
                if run.startswith("mpirun"):
                    run = run.replace("mpirun", "mpirun --allow-run-as-root --oversubscribe", 1)
                p = subprocess.run(run, shell=True, cwd=work, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=600)
                ran += 1
                ok = p.returncode in expected_codes(cmd, comment)
                if p.returncode == 3:
                    unavailable.update(re.findall(r"(?:^|\s)-o\s+(\S+)", cmd))
                print(f"{'ok' if ok else 'FAIL'} (exit {p.returncode}): {cmd}")
                if not ok:
                    failures.append((cmd, p.returncode, p.stdout[-2000:]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for cmd, code, out in failures:
        print(f"\n--- {cmd} exited {code}:\n{out}")
    print(f"\nREADME commands: {ran - len(failures)} passed, {len(failures)} failed, {skipped} skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
