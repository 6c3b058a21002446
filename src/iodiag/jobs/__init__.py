"""iodiag.jobs"""
