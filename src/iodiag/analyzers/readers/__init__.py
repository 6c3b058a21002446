"""iodiag.analyzers.readers"""
