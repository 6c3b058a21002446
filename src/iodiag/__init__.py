"""iodiag: I/O profiling and diagnosis for HPC data workflows, built around Darshan."""

__version__ = "0.1.0"
