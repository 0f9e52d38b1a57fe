#!/usr/bin/env python3
"""Runs every command that README.md and docs/*.md quote, so that no doc can drift (docs/ci.md,
"Docs").

Fenced blocks, by their tag:
  ```sh       commands: each logical line (backslash continuations joined) is run;
  ```console  a session: lines starting with "$ " are commands, the rest is their output, which
              must be generated (inside a <!-- fig:NAME --> marker, scripts/refresh-docs.py);
  ```text     a synopsis or output that is not run (placeholders such as SCENARIO.json);
  other tags  formulas, JSON, YAML, C++: not run.
A block with no tag whose first line reads like a command (simrun, tracediff, ./build/..., $ ...)
is an error: tag it sh to run it or text to say it is a synopsis, so that no command escapes.

Each file's commands run in order in a scratch directory of their own, which links every
top-level entry of the repository (scenarios/, scripts/, traces/, ...) and holds build/release
as a link to BUILD_DIR, so that one command's output (dp.json) feeds the next (tracediff dp.json
ddp.json); the build's tools/, gui/ and bench/ come first on PATH, so a doc may write `simrun`.
A command passes when it exits with what the doc says: 0, or the code its trailing comment names
("# exit 1: ..."). Skipped, each with its reason printed: commands that install, build or run the
test suite (the suite runs them by being the suite), an interactive window, mpirun where there
is none; a command that needs a GPU (--backend cuda, calibrate on the GPU) is run and, on a machine
without one, must exit 3 (backend unavailable) and is counted as skipped; a later command reading
an output that such a command did not write is skipped too.

usage: docs_commands.py SOURCE_DIR BUILD_DIR [FILE.md ...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
COMMAND_START = re.compile(r"^(\$ |simrun |tracediff |trace_check |simview |mpirun |\./build/|"
                           r"build/release/|scripts/|xvfb-run )")


def logical_lines(lines):
    """Joins backslash continuations; yields (text, trailing comment)."""
    cur = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        s = cur.strip()
        cur = ""
        if not s or s.startswith("#"):
            continue
        m = re.match(r"^(.*?)(?:\s{2,}#\s*(.*))?$", s)
        yield re.sub(r"\s+", " ", m.group(1).strip()), (m.group(2) or "").strip()


def block_commands(tag, body):
    if tag == "sh":
        return list(logical_lines(body.splitlines()))
    # console: "$ cmd" lines (and their continuations); the rest is output.
    cmds, pending = [], None
    for line in body.splitlines():
        if pending is not None:
            pending.append(line)
            if not line.rstrip().endswith("\\"):
                cmds += list(logical_lines(pending))
                pending = None
            continue
        if line.startswith("$ "):
            if line.rstrip().endswith("\\"):
                pending = [line[2:]]
            else:
                cmds += list(logical_lines([line[2:]]))
    return cmds


def blocks(text):
    """(tag, body, start offset) of every fenced block."""
    return [(m.group(1), m.group(2), m.start()) for m in FENCE.finditer(text)]


def inside_figure(text, offset):
    """True when offset lies between a <!-- fig:NAME --> and its <!-- /fig -->."""
    opened = text.rfind("<!-- fig:", 0, offset)
    closed = text.rfind("<!-- /fig -->", 0, offset)
    return opened > closed


def lint(rel, text):
    """Errors: untagged command blocks, typed output in console blocks."""
    errors = []
    for tag, body, at in blocks(text):
        line_no = text.count("\n", 0, at) + 1
        first = next((l for l in body.splitlines() if l.strip()), "")
        if tag == "" and COMMAND_START.match(first.lstrip()):
            errors.append(f"{rel}:{line_no}: an untagged block starts with a command ('{first[:60]}'):"
                          " tag it ```sh to run it, or ```text if it is a synopsis or output")
        if tag == "console":
            output = [l for l in body.splitlines() if l.strip() and not l.startswith("$ ")]
            if output and not inside_figure(text, at):
                errors.append(f"{rel}:{line_no}: a console block with output outside a"
                              " <!-- fig:NAME --> marker: generate it (scripts/refresh-docs.py)")
    return errors


def skip_reason(cmd):
    if ("install-deps.sh" in cmd or cmd.startswith("cmake ") or "run-tests.sh" in cmd or
            "standalone-check.sh" in cmd or "refresh-" in cmd):
        return "installs, builds or runs the test suite (the suite runs it by being the suite)"
    if "scripts/fuzz.sh" in cmd:
        return "builds the fuzz preset with clang (scripts/run-tests.sh runs it in CI)"
    if "gpu-bundle.sh" in cmd or "gpu-check.sh" in cmd:
        return "builds and runs the GPU check (needs a GPU machine: docs/gpu-check.md)"
    if "hta-check.sh" in cmd:
        return "needs a work tree of Holistic Trace Analysis (the hta:* tests run it when HTA_DIR is set)"
    if re.search(r"(^|[ /])simview( |$)", cmd) and "--screenshot" not in cmd:
        return "opens an interactive window"
    if "simview" in cmd and shutil.which("xvfb-run") is None:
        return "no xvfb-run here"
    if cmd.startswith("mpirun") and shutil.which("mpirun") is None:
        return "no mpirun here"
    return None


def needs_gpu(cmd):
    return "--backend cuda" in cmd or (re.search(r"\bcalibrate\b", cmd) is not None and
                                       "--backend standin" not in cmd)


def expected_codes(cmd, comment):
    m = re.match(r"exit (\d+)", comment)
    if m:
        return {int(m.group(1))}
    if needs_gpu(cmd):
        return {0, 3}  # 3: backend unavailable (no GPU here), as the docs state
    return {0}


def scratch_dir(source, build):
    work = tempfile.mkdtemp(prefix="csim_docs_cmd_")
    for name in os.listdir(source):
        if name in ("build", ".git") or name.startswith("."):
            continue
        os.symlink(os.path.join(source, name), os.path.join(work, name))
    os.makedirs(os.path.join(work, "build"))
    os.symlink(build, os.path.join(work, "build", "release"))
    return work


def run_file(source, build, path, env, report):
    rel = os.path.relpath(path, source)
    with open(path) as f:
        text = f.read()
    report["errors"] += lint(rel, text)
    cmds = [c for tag, body, _ in blocks(text) if tag in ("sh", "console")
            for c in block_commands(tag, body)]
    if not cmds:
        return
    work = scratch_dir(source, build)
    unavailable = set()  # outputs of commands that could not run here (no GPU: exit 3)
    try:
        for cmd, comment in cmds:
            why = skip_reason(cmd)
            needs = [f for f in unavailable if re.search(r"(^|\s)" + re.escape(f) + r"(\s|$)", cmd)]
            if not why and needs:
                why = f"reads {needs[0]}, which a command above writes only on a GPU"
            if why:
                print(f"skip ({why}): {rel}: {cmd}")
                report["skipped"] += 1
                continue
            try:
                p = subprocess.run(cmd, shell=True, cwd=work, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=600)
                code, out = p.returncode, p.stdout
            except subprocess.TimeoutExpired as e:
                code, out = "timeout (600 s)", (e.stdout or b"").decode(errors="replace")
            ok = code in expected_codes(cmd, comment)
            if ok and code == 3 and needs_gpu(cmd):
                unavailable.update(re.findall(r"(?:^|\s)-o\s+(\S+)", cmd))
                print(f"skip (needs a GPU; exited 3, backend unavailable, as documented): {rel}: {cmd}")
                report["skipped"] += 1
                continue
            report["ran"] += 1
            print(f"{'ok' if ok else 'FAIL'} (exit {code}): {rel}: {cmd}")
            if not ok:
                report["failures"].append((rel, cmd, code, out[-2000:]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    files = [os.path.abspath(f) for f in sys.argv[3:]]
    if not files:
        files = [os.path.join(source, "README.md")] + [
            os.path.join(source, "docs", n) for n in sorted(os.listdir(os.path.join(source, "docs")))
            if n.endswith(".md")]
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(os.path.join(build, d) for d in ("tools", "gui", "bench")) + \
        os.pathsep + env.get("PATH", "")
    report = {"ran": 0, "skipped": 0, "failures": [], "errors": []}
    for path in files:
        run_file(source, build, path, env, report)
    for rel, cmd, code, out in report["failures"]:
        print(f"\n--- {rel}: {cmd} exited {code}:\n{out}")
    for e in report["errors"]:
        print(e)
    failed = len(report["failures"])
    print(f"\ndocs commands: {report['ran'] - failed} passed, {failed} failed, "
          f"{report['skipped']} skipped; {len(report['errors'])} block errors")
    return 1 if failed or report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
