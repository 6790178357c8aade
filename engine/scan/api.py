"""The public face of engine.scan, for the CLI and the GUI: job specs, filters, the runner
and the text of results. Everything else in engine.scan is the engines' inside."""
from __future__ import annotations

from engine.scan.filters import MessageFilter
from engine.scan.jobs import DEFAULT_FILTER_LIMIT, DEFAULT_TOP, EXPORT_FORMATS, JOBS, JobParams, JobResult, validate
from engine.scan.remote import open_scan_store, redacted
from engine.scan.runner import (ENGINES, run_job, scan_task, spark_session, spark_state, stop_spark,
                               warm_up_task)
from engine.scan.stores import ScanStore, StoreRef, resolve_stores
from engine.scan.table import FILTER_TABLE_COLUMNS, columns_of, display_width, format_cell, format_table, one_line

__all__ = ["DEFAULT_FILTER_LIMIT", "DEFAULT_TOP", "ENGINES", "EXPORT_FORMATS", "FILTER_TABLE_COLUMNS", "JOBS",
           "JobParams", "JobResult", "MessageFilter", "columns_of", "display_width", "format_cell", "format_table",
           "one_line", "open_scan_store", "redacted", "resolve_stores", "run_job", "scan_task", "ScanStore", "spark_session",
           "spark_state", "stop_spark", "StoreRef", "validate", "warm_up_task"]
