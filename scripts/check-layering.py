#!/usr/bin/env python3
"""Layering check (docs/architecture.md, "Layering check"; FOLDERS.md).

Parses the #include lines of every C++ source file of the tree and fails (exit 1, one line per
violation) when a folder includes a project header it may not:

    core  <-  profiler (units/error/input files only)  <-  backends  <-  run  <-  sweep  <-  tools
    core  <-  calibration, hpo  <-  tools                  run  <-  gui

A folder may include its own headers and those of the folders below it (FOLDERS.md lists them);
tests/, bench/ and fuzz/ may include any library but not tools/, except the two in-process entry
points of the command lines they test (tools/simrun_app.hpp, tools/tracediff_app.hpp) and simrun's
progress line (tools/run_progress.hpp). Third-party
headers that pull in a heavy dependency are confined too: ImGui/GLFW/OpenGL to gui/, CLI11 to the
command lines (tools/, gui/), MPI to backends/mpi/mpi_comm_module.cpp (the MPI module), the CUDA toolkit to
backends/cuda/, profiler/cupti/ and tests/cuda/.

Usage: check-layering.py [ROOT]      check the tree at ROOT (default: the repository)
       check-layering.py --self-test  check a synthetic tree with known violations
"""
import os
import re
import sys
import tempfile

SOURCE_EXT = (".cpp", ".hpp", ".h", ".cc")
SKIP_DIRS = {"build", ".git", "shared", "third_party", "node_modules"}

# Folder -> the project folders it may include besides its own (None: any but tools/).
ALLOWED = {
    "core": set(),
    "profiler": {"core"},  # narrowed to PROFILER_CORE_HEADERS below
    "calibration": {"core"},
    "hpo": {"core"},
    "backends": {"core", "profiler"},
    "run": {"core", "profiler", "backends"},
    "replay": {"core", "profiler", "backends", "run"},  # narrowed for the importer below
    "sweep": {"core", "profiler", "backends", "run"},
    "gui": {"core", "profiler", "run"},
    "tools": {"core", "profiler", "backends", "run", "sweep", "calibration", "hpo", "replay"},
    # The clustersim Python module binds the libraries, never the command lines (docs/python.md).
    "python": {"core", "profiler", "backends", "run", "sweep", "replay"},
    "tests": None,
    "bench": None,
    "fuzz": None,
}
# profiler/ is below backends/ and uses core/ for units, errors, input files (the JSON nesting
# limit) and the progress counter (core/progress.hpp: no dependency of its own) only; its CUPTI
# part maps records to Program ops.
PROFILER_CORE_HEADERS = {"core/units.hpp", "core/error.hpp", "core/input_file.hpp",
                         "core/progress.hpp"}
PROFILER_CUPTI_CORE_HEADERS = PROFILER_CORE_HEADERS | {"core/program/program.hpp"}
# replay/: the importer (library csim_replay_import, linked alone by its fuzz target) builds a
# Program from core/ only; the pipeline beside it (gpu_whatif, replay_run) runs it through run/.
REPLAY_IMPORT_FILES = {"import_stats", "kineto_tokenizer", "trace_sorter", "kernel_class",
                       "gemm_shapes", "record_fields", "replay_program", "replay_edges"}
# core/'s own layers (core/README.md, FOLDERS.md): a file in core/<sub>/ may include core/'s root
# (the base: units, errors, progress, input files, JSON diagnostics), the scenario format's two
# headers, its own sub-folder and the sub-folders listed; a root file only the root. So the model
# and the hardware know nothing of lowering, cost or the Program, and nothing includes lowering/.
CORE_FORMAT_HEADERS = {"core/scenario/scenario.hpp", "core/scenario/transformer_config.hpp"}
CORE_LAYERS = {
    "": set(),
    "scenario": {"model", "hardware"},  # the parser builds models and reads the GPU catalog
    "model": set(),
    "hardware": set(),
    "program": set(),
    "engine": {"hardware"},
    "cost": {"hardware", "program", "engine"},
    "lowering": {"scenario", "model", "hardware", "program", "cost"},
}


def core_layer(path):
    """core/'s sub-folder of `path` ('' for core/'s root), or None outside core/ or unknown."""
    parts = path.split("/")
    if parts[0] != "core":
        return None
    sub = parts[1] if len(parts) > 2 else ""
    return sub if sub in CORE_LAYERS else None


def check_core_include(rel, target):
    """A violation of core/'s own layering, or None."""
    src, dst = core_layer(rel), core_layer(target)
    if src is None or dst is None or src == dst or dst == "":
        return None
    if src != "" and target in CORE_FORMAT_HEADERS:
        return None
    if dst in CORE_LAYERS[src]:
        return None
    where = f"core/{src}/" if src else "core/'s root"
    may = ", ".join(f"core/{d}/" for d in sorted(CORE_LAYERS[src]))
    return (f"{where} may include core/'s root{' and the scenario format' if src else ''}"
            f"{', ' + may if may else ''}; not {target}")


# The command lines' in-process entry points, for tests and benches whose subject is the tool
# (and simrun's progress line, tested against run() without a terminal).
TOOL_ENTRY_POINTS = {"tools/simrun_app.hpp", "tools/tracediff_app.hpp", "tools/run_progress.hpp"}

# Third-party headers (<...>) by the places allowed to include them.
THIRD_PARTY = [
    ("ImGui / GLFW / OpenGL", re.compile(r"^(imgui|GLFW/|GL/)"),
     ("gui/", "tests/test_gui", "bench/bench_gui")),
    ("CLI11", re.compile(r"^CLI/"), ("tools/", "gui/")),
    ("pybind11 / Python.h", re.compile(r"^(pybind11/|Python\.h$)"), ("python/",)),
    ("MPI", re.compile(r"^mpi\.h$"), ("backends/mpi/mpi_comm_module.cpp",)),
    ("the CUDA toolkit", re.compile(r"^(cuda|cublas|nccl|cupti|nvml)"),
     ("backends/cuda/", "profiler/cupti/", "tests/cuda/")),
]

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_rule(rel):
    """The folder whose rule applies to the file at `rel` (posix path), or None."""
    top = rel.split("/", 1)[0]
    return top if top in ALLOWED else None


def check_include(rel, target, root):
    """A violation message for `rel` including the project header `target`, or None."""
    folder = layer_rule(rel)
    if folder is None:
        return None
    # "x.hpp" next to the including file (tests' own helpers) is the folder's own.
    if os.path.exists(os.path.join(root, os.path.dirname(rel), target)):
        return None
    dep = target.split("/", 1)[0]
    if folder == "core" and dep == "core":
        return check_core_include(rel, target)
    if dep not in ALLOWED or dep == folder:
        return None  # not a project folder (a system or third-party header in quotes)
    allowed = ALLOWED[folder]
    if allowed is None:
        if dep == "tools" and target not in TOOL_ENTRY_POINTS:
            return (f"{folder}/ may include only tools/'s command-line entry points "
                    f"({', '.join(sorted(TOOL_ENTRY_POINTS))}), not {target}")
        return None
    if dep not in allowed:
        may = ", ".join(sorted(allowed)) if allowed else "nothing outside core/"
        return f"{folder}/ may include {may}; not {dep}/ ({target})"
    if folder == "replay" and dep != "core" and \
            os.path.splitext(os.path.basename(rel))[0] in REPLAY_IMPORT_FILES:
        return f"replay/'s importer ({os.path.basename(rel)}) may include core/ only; not {target}"
    if folder == "profiler":
        headers = PROFILER_CUPTI_CORE_HEADERS if rel.startswith("profiler/cupti/") else \
            PROFILER_CORE_HEADERS
        if target not in headers:
            return f"profiler/ uses core/ for {', '.join(sorted(headers))} only; not {target}"
    return None


def check_third_party(rel, target):
    for what, pattern, places in THIRD_PARTY:
        if pattern.search(target) and not rel.startswith(places):
            return f"{what} (<{target}>) is included only in {', '.join(places)}"
    return None


def source_files(root):
    for top in sorted(os.listdir(root)):
        if top in SKIP_DIRS or not os.path.isdir(os.path.join(root, top)):
            continue
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                if name.endswith(SOURCE_EXT):
                    path = os.path.join(dirpath, name)
                    yield os.path.relpath(path, root).replace(os.sep, "/")


def check_tree(root):
    """Every violation as 'FILE:LINE: message', and the number of files read."""
    problems, files = [], 0
    for rel in source_files(root):
        files += 1
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for no, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                kind, target = m.groups()
                msg = check_include(rel, target, root) if kind == '"' else \
                    check_third_party(rel, target)
                if msg:
                    problems.append(f"{rel}:{no}: {msg}")
    return problems, files


def self_test():
    """The checker on a synthetic tree: every known violation found, nothing else."""
    tree = {
        "core/ok.cpp": '#include "core/units.hpp"\n#include <vector>\n',
        "core/up.cpp": '#include "run/run.hpp"\n',                         # bad: core -> run
        "core/cuda.cpp": "#include <cuda_runtime_api.h>\n",                # bad: CUDA in core
        "core/model/ok.cpp": '#include "core/scenario/scenario.hpp"\n#include "core/error.hpp"\n',
        "core/model/low.cpp": '#include "core/lowering/lowering.hpp"\n',  # bad: model -> lowering
        "core/model/parse.cpp": '#include "core/scenario/scenario_parser.hpp"\n',  # bad: parser
        "core/lowering/ok.cpp": '#include "core/model/flops.hpp"\n#include "core/cost/x.hpp"\n',
        "core/base.hpp": '#include "core/program/program.hpp"\n',         # bad: root -> program
        "profiler/ok.cpp": '#include "core/error.hpp"\n',
        "profiler/prog.cpp": '#include "core/program/program.hpp"\n',              # bad: beyond units/error
        "profiler/cupti/ok.cpp": '#include "core/program/program.hpp"\n#include <cupti.h>\n',
        "backends/ok.cpp": '#include "profiler/trace.hpp"\n',
        "backends/up.cpp": '#include "run/run.hpp"\n',                     # bad: backends -> run
        "run/ok.cpp": '#include "backends/sim/sim_executor.hpp"\n',
        "run/cli.cpp": "#include <CLI/CLI.hpp>\n",                         # bad: CLI11 in run
        "gui/tool.cpp": '#include "tools/simrun_app.hpp"\n',               # bad: gui -> tools
        "replay/replay_run.cpp": '#include "run/run.hpp"\n',
        "replay/replay_program.cpp": '#include "run/run.hpp"\n',          # bad: importer -> run
        "gui/backend.cpp": '#include "backends/sim/sim_executor.hpp"\n',   # bad: gui -> backends
        "sweep/gui.cpp": '#include "gui/viewer.hpp"\n',                    # bad: sideways
        "tools/ok.cpp": '#include "sweep/tune.hpp"\n#include "hpo/curves.hpp"\n',
        "tests/cli.cpp": '#include "tools/simrun_app.hpp"\n#include "helper.hpp"\n',
        "tests/helper.hpp": '#include "gui/viewer.hpp"\n',
        "tests/tool.cpp": '#include "tools/oom_advice.hpp"\n',             # bad: not an entry point
    }
    expected = {"core/up.cpp", "core/cuda.cpp", "core/model/low.cpp", "core/model/parse.cpp",
                "core/base.hpp", "profiler/prog.cpp", "backends/up.cpp",
                "run/cli.cpp", "gui/tool.cpp", "gui/backend.cpp", "sweep/gui.cpp",
                "tests/tool.cpp", "replay/replay_program.cpp"}
    with tempfile.TemporaryDirectory() as root:
        for rel, text in tree.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        problems, files = check_tree(root)
    found = {p.split(":", 1)[0] for p in problems}
    for p in problems:
        print(p)
    if found != expected or len(problems) != len(expected) or files != len(tree):
        print(f"self-test FAILED: missed {sorted(expected - found)}, "
              f"flagged wrongly {sorted(found - expected)}")
        return 1
    print(f"self-test ok: {len(expected)} planted violations found, {files} files read")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems, files = check_tree(root)
    for p in problems:
        print(p)
    if problems:
        print(f"layering: {len(problems)} violation(s) in {files} files "
              "(rules: docs/architecture.md, FOLDERS.md)")
        return 1
    print(f"layering: ok ({files} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
