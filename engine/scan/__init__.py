"""Bulk scans over a whole store: the commitlog read as columns, in partitions.

- `planning`  picklable partitions (commitlog slices split at record boundaries, CQ and
              index slices) computed once from an open store;
- `columns`   vectorised decoding of the records of one slice (only the fields a job needs);
- `filters`   message predicates shared by every engine;
- `jobs`      the job specs: names, parameters and their validation, result shapes, export rules;
- `local`     single-process numpy implementation of every job (the oracle);
- `spark_*`   the same jobs on PySpark: data sources, session, runner (the only modules that
              import pyspark); local and Spark never import each other;
- `runner`    the one runner: `scan_task` (a task yielding Progress) and `run_job` choose the engine;
- `table`     results as text (cells, tables, one-line errors);
- `api`       the public face the CLI (engine/cli/scan.py) and the GUI import.
"""
