"""iodiag.reports"""
