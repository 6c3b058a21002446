"""iodiag.analyzers.detectors"""
