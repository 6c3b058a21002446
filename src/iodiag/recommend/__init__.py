"""iodiag.recommend"""
