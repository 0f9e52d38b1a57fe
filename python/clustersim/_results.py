"""Results as data (docs/python.md, "Results"): a run's summary as attributes, rows as pandas
DataFrames when pandas is importable."""

import json as _json


class Rows(list):
    """A list of dicts (rows) with attributes, for when pandas is not importable."""

    def __init__(self, rows, attrs):
        super().__init__(rows)
        self.attrs = dict(attrs)
        for k, v in attrs.items():
            setattr(self, k, v)


def table(rows, attrs):
    """A pandas DataFrame of `rows` with `attrs` in .attrs, else Rows."""
    try:
        import pandas
    except ImportError:
        return Rows(rows, attrs)
    df = pandas.DataFrame(list(rows))
    df.attrs.update(attrs)
    return df


class Result:
    """One run (clustersim.simulate). Every figure of simrun's summary is an attribute named as
    in the --summary JSON, its unit in its name (step_time_s, samples_per_s, tokens_per_s, ...);
    oom is True when a GPU ran out of memory (oom_verdict: the verdict), complete is False when
    the run was interrupted. to_dict() is the --summary JSON."""

    def __init__(self, run):
        self._run = run
        self._summary = run.summary
        if not run.complete and run.failure == "":
            self._summary["complete"] = False

    def to_dict(self):
        """The summary simrun --summary writes (the same keys and values)."""
        return _json.loads(_json.dumps(self._summary))

    def __getattr__(self, name):
        summary = self.__dict__.get("_summary")
        if summary is not None and name in summary:
            return summary[name]
        raise AttributeError(f"Result has no figure '{name}'")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._summary))

    @property
    def oom(self):
        return self._summary.get("oom") is not None

    @property
    def oom_verdict(self):
        return self._summary.get("oom")

    @property
    def complete(self):
        return self._run.complete

    @property
    def interrupted(self):
        return self._run.interrupted

    @property
    def completed_steps(self):
        return self._run.completed_steps

    @property
    def failure(self):
        """Real runs: why a rank failed, one line ("" when none did)."""
        return self._run.failure

    @property
    def warnings(self):
        return list(self._run.warnings)

    @property
    def per_gpu(self):
        """One row per GPU (the summary's per_gpu): a DataFrame, or a list of dicts."""
        rows = [{k: v for k, v in g.items() if not isinstance(v, (list, dict))}
                for g in self._summary.get("per_gpu", [])]
        return table(rows, {})

    def write_trace(self, path):
        """The run's Chrome trace (simrun -o's bytes), built now when the run built none."""
        self._run.write_trace(str(path))

    def write_per_rank(self, directory):
        self._run.write_per_rank(str(directory))

    def __repr__(self):
        s = self._summary
        return (f"<clustersim.Result {s.get('scenario', '')} {s.get('strategy', '')}: "
                f"step {s.get('step_time_s', 0):.4g} s, {s.get('samples_per_s', 0):.4g} "
                f"samples/s, oom {self.oom}>")
