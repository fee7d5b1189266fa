"""The lab code the command-line tools share: benchmarks and backbone comparison (:mod:`lab.benchmark`), the
course exercises (:mod:`lab.experiments`), the evidence runs (:mod:`lab.benchmark.evidence`) and argument types
(:mod:`lab.cli`). Not installed and imported by neither zoo nor heads (tests/project/test_import_graph.py): a tool
run as ``python tools/X.py`` has tools/ first on ``sys.path``, and pytest puts it there for the tests (``pythonpath``
in pyproject.toml's ``[tool.pytest.ini_options]``)."""
