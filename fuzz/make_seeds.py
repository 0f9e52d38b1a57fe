#!/usr/bin/env python3
"""Builds the seed corpora of the fuzz targets from the bundled files (docs/fuzzing.md, "Seeds").

usage: fuzz/make_seeds.py OUT_DIR [MAX_SEED_BYTES]

Writes OUT_DIR/fuzz_scenario, OUT_DIR/fuzz_trace_reader, OUT_DIR/fuzz_tolerances and
OUT_DIR/fuzz_replay_importer (the Kineto excerpts) afresh.
Nothing is copied into the repository: the seeds live in the build directory.

  fuzz_scenario      scenarios/*.json, JSON files under tests/data that are scenarios
  fuzz_trace_reader  traces/*.trace.json and tests/data/diff/*.json (our traces) and the
                     PyTorch-profiler traces in ../shared/fixtures/kineto/*.json.gz (when present).
                     Files over 1 MB (compressed size for .gz) are skipped; a trace larger than
                     MAX_SEED_BYTES (default 65536, the fuzzers' -max_len) is also cut down to a
                     valid excerpt: its top-level keys and a sample of its events covering every
                     (ph, cat) pair, so the seed stays within -max_len.
  fuzz_tolerances    every tolerance file under tests/data and traces (*tolerance*), plus a few
                     hand-made lines
"""
import gzip
import hashlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FILE = 1 << 20


def write(out_dir, data, tag):
    if isinstance(data, str):
        data = data.encode()
    digest = hashlib.sha1(data).hexdigest()[:12]
    with open(os.path.join(out_dir, f"{tag}-{digest}"), "wb") as f:
        f.write(data)


def files_under(rel, pred):
    base = os.path.join(ROOT, rel)
    if not os.path.isdir(base):
        return []
    found = []
    for dirpath, _, names in os.walk(base):
        for n in sorted(names):
            p = os.path.join(dirpath, n)
            if pred(n) and os.path.getsize(p) <= MAX_FILE:
                found.append(p)
    return sorted(found)


def excerpt(doc, max_bytes):
    """A valid trace with DOC's top-level keys and a sample of its events."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        return None
    by_kind = {}
    for e in events:
        if isinstance(e, dict):
            by_kind.setdefault((str(e.get("ph")), str(e.get("cat"))), []).append(e)
    for per_kind in (8, 4, 2, 1):
        picked = [e for group in by_kind.values() for e in group[:per_kind]]
        small = {k: v for k, v in doc.items() if k != "traceEvents"}
        small["traceEvents"] = picked
        text = json.dumps(small, separators=(",", ":"))
        if len(text) <= max_bytes:
            return text
    return None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    max_seed = int(sys.argv[2]) if len(sys.argv) > 2 else 65536
    dirs = {t: os.path.join(out, t) for t in ("fuzz_scenario", "fuzz_trace_reader", "fuzz_tolerances",
                                              "fuzz_replay_importer")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
        for n in os.listdir(d):
            os.remove(os.path.join(d, n))
    counts = {t: 0 for t in dirs}

    def add(target, data, tag):
        write(dirs[target], data, tag)
        counts[target] += 1

    # Scenarios: everything under scenarios/, and test data that looks like a scenario.
    for p in files_under("scenarios", lambda n: n.endswith(".json")):
        add("fuzz_scenario", open(p, "rb").read(), "scenario")
    for p in files_under("tests/data", lambda n: n.endswith(".json")):
        raw = open(p, "rb").read()
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and ("cluster" in doc or "model" in doc):
            add("fuzz_scenario", raw, "testdata")

    # Traces: ours (traces/, tests/data) and PyTorch-profiler (Kineto) ones.
    ours = files_under("traces", lambda n: n.endswith(".trace.json"))
    ours += files_under("tests/data", lambda n: n.endswith(".json"))
    for p in ours:
        raw = open(p, "rb").read()
        if b"cluster" in raw and b"traceEvents" not in raw:
            continue  # a scenario, not a trace
        if len(raw) <= max_seed:
            add("fuzz_trace_reader", raw, "trace")
            continue
        try:
            text = excerpt(json.loads(raw), max_seed)
        except ValueError:
            text = None
        if text:
            add("fuzz_trace_reader", text, "trace-excerpt")
    kineto = os.path.join(ROOT, "..", "shared", "fixtures", "kineto")
    if os.path.isdir(kineto):
        for n in sorted(os.listdir(kineto)):
            p = os.path.join(kineto, n)
            if not n.endswith(".json.gz") or os.path.getsize(p) > MAX_FILE:
                continue
            try:
                with gzip.open(p, "rb") as f:
                    text = excerpt(json.load(f), max_seed)
            except (OSError, ValueError):
                text = None
            if text:
                add("fuzz_trace_reader", text, "kineto-excerpt")
                add("fuzz_replay_importer", text, "kineto-excerpt")
    else:
        print(f"make_seeds: {kineto} not found: no PyTorch-profiler seeds", file=sys.stderr)

    # Tolerance files.
    for rel in ("tests/data", "traces"):
        for p in files_under(rel, lambda n: "tolerance" in n.lower()):
            add("fuzz_tolerances", open(p, "rb").read(), "tolerances")
    for line in ("step_time 1%\n", "peak_memory/* 0% min=64MiB\n", "time/*/host/* ignore\n",
                 "critical_path/* 10% min=50us\n", "split/* 0.5 min=1.5ms\n",
                 "* 5% min=1GiB ignore # comment\n", "*a*b*c* 2% min=0.01\n"):
        add("fuzz_tolerances", line, "hand")

    for t, c in counts.items():
        print(f"make_seeds: {t}: {c} seed(s) in {dirs[t]}")


if __name__ == "__main__":
    main()
