"""iodiag.collectors"""
