"""Reliability: interrupted runs and resume, damaged or hostile files, bad input and configs, and the bounded fuzzing
of every reader (docs/reliability.md lists each fault and its test)."""
