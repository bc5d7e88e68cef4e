"""Functions the tests send to worker processes (module-level, so a worker can import them:
the workers see the tests' ``sys.path``)."""

from rnnviz.serve import jobs


def analysis_and_cache_stats(cfg_json: str):
    """One analysis, and the worker's persistent-cache counts right after it, in one job."""
    return jobs.analysis(cfg_json), jobs.compilation_cache_stats()
