"""Workload programs (``python -m iodiag.workloads.convert ...``) and what others may use of them: the declared
parameters and the chunking rule.  Import these from here, not from the private ``_common``."""

from ._common import Param, build_parser, chunks_for_target, params_to_argv

__all__ = ["Param", "build_parser", "chunks_for_target", "params_to_argv"]
