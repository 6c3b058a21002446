"""Parameter sweeps of iodiag workloads: spec -> plan -> local run or batch
submission (Slurm/LSF/PBS, chained with dependencies, success markers, resume)
-> collect (CSV + parquet) -> analyze (scaling, CIs, means) and plots."""

from .spec import SweepSpec, load_spec, spec_from_dict
from .plan import Plan, Run, make_plan
from .execute import run_local, submit, status, wait
from .collect import collect, collect_rows

__all__ = ["SweepSpec", "load_spec", "spec_from_dict", "Plan", "Run", "make_plan", "run_local", "submit",
           "status", "wait", "collect", "collect_rows"]
