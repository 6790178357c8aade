"""Spark over a tier folder: the driver plans the tier's COMMIT_LOG segments (engine.scan.tier_source)
and the data source reads them as commitlog files; the rows are the local engine's."""
import pytest

from conftest import unpack
from engine import TieredStore
from engine.scan.api import JobParams, run_job
from scan_support import spark  # noqa: F401


@pytest.mark.spark
def test_spark_jobs_over_a_tier_equal_the_local_engine(spark):
    with TieredStore.open(unpack("tiered_store") / "tiered") as tier:
        for job, params in (("topic-stats", JobParams(by_queue=True)), ("top-tags", JobParams()),
                            ("size-histogram", JobParams(split_bytes=1500))):
            want = run_job(tier, job, params, engine="local").rows
            got = run_job(tier, job, params, engine="spark", spark=spark).rows
            assert got == want and want, job
