#!/usr/bin/env python3
"""Runs the CI scripts docs/ci.md gives a user (ci/check.sh, ci/refresh.sh, ci/tolerances.txt)
as a user's repository would, so that they cannot drift from the tools (docs/ci.md, "Docs").

The scripts and the tolerance file are taken verbatim from the doc's blocks under the headings
"## ci/check.sh", "## ci/refresh.sh" and "## ci/tolerances.txt"; ci/scenarios.txt names two
bundled scenarios. In a scratch repository, for KIND=trace and KIND=summary:
  1. ci/refresh.sh on a repository with no baselines yet writes one per case (exit 0);
  2. ci/check.sh against them passes (exit 0): the simulator is deterministic;
  3. with a case changed to a 200 MB DDP bucket (exposed communication up several-fold: docs/
     tracediff.md, "Output"), ci/check.sh exits 1 and names the case.

usage: ci_scripts.py SOURCE_DIR BUILD_DIR
"""
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile


def section_block(text, heading, tag):
    """The first ```TAG block after the line HEADING."""
    at = text.index("\n" + heading + "\n")
    m = re.compile(r"^```" + tag + r"\n(.*?)^```", re.S | re.M).search(text, at)
    if not m:
        raise ValueError(f"docs/ci.md: no ```{tag} block under '{heading}'")
    return m.group(1)


def write(path, text, executable=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if executable:
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def run(cmd, cwd, env):
    p = subprocess.run(cmd, cwd=cwd, env=env, shell=True, text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=600)
    return p.returncode, p.stdout


def main():
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with open(os.path.join(source, "docs", "ci.md")) as f:
        doc = f.read()
    check = section_block(doc, "## ci/check.sh", "bash")
    refresh = section_block(doc, "## ci/refresh.sh — accepting an intended change", "bash")
    tolerances = section_block(doc, "## ci/tolerances.txt", "")
    failures = []
    for kind in ("trace", "summary"):
        work = tempfile.mkdtemp(prefix=f"csim_ci_{kind}_")
        try:
            os.symlink(os.path.join(source, "scenarios"), os.path.join(work, "scenarios"))
            write(os.path.join(work, "ci", "check.sh"), check, executable=True)
            write(os.path.join(work, "ci", "refresh.sh"), refresh, executable=True)
            write(os.path.join(work, "ci", "tolerances.txt"), tolerances)
            cases = ("ddp_4x1080ti  scenarios/dp_vs_ddp_4x1080ti.json  --set strategy.kind=ddp\n"
                     "dp_4x1080ti   scenarios/dp_vs_ddp_4x1080ti.json\n")
            write(os.path.join(work, "ci", "scenarios.txt"), cases)
            env = dict(os.environ, CSIM_BIN=os.path.join(build, "tools"), KIND=kind)

            def expect(what, cmd, code, needle=None):
                rc, out = run(cmd, work, env)
                ok = rc == code and (needle is None or needle in out)
                print(f"{'ok' if ok else 'FAIL'} ({kind}): {what}: {cmd} exited {rc}")
                if not ok:
                    failures.append(f"{kind}: {what}: exited {rc}, expected {code}"
                                    + (f" and '{needle}'" if needle else "") + f"\n{out[-2000:]}")

            expect("first refresh writes the baselines", "ci/refresh.sh", 0, "baselines refreshed: 2 files")
            expect("check against fresh baselines", "ci/check.sh", 0)
            write(os.path.join(work, "ci", "scenarios.txt"), cases.replace(
                "--set strategy.kind=ddp", "--set strategy.kind=ddp --set strategy.ddp.bucket_cap_mb=200"))
            expect("a 200 MB bucket regresses", "ci/check.sh", 1, "::error::ddp_4x1080ti regressed")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("\n--- " + f)
    print(f"\nci scripts: {'FAIL' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
