"""iodiag.analyzers"""
