"""Tests of the measuring harness, one file per ``slower_harness`` module (a package, so that a file here may share
a name with one in tests/, as test_reproduce.py does)."""
