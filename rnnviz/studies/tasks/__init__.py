"""Training tasks: the synthetic long-range benchmarks (:mod:`~rnnviz.studies.tasks.synthetic`)
and a data set as a task (:mod:`~rnnviz.studies.tasks.data`)."""
