"""Bulk scans over a whole store: the commitlog read as columns, in partitions.

- `planning`  picklable partitions (commitlog slices split at record boundaries, CQ and
              index slices) computed once from an open store;
- `columns`   vectorised decoding of the records of one slice (only the fields a job needs);
- `filters`   message predicates shared by every engine;
- `local`     single-process numpy implementation of every job (the oracle);
- `jobs`      job names, parameters, and `run_job` choosing the engine;
- `spark_*`   the same jobs on PySpark: data sources, session, runner (the only modules that
              import pyspark);
- `cli`       `rmqstore scan STORE JOB ...`.
"""
