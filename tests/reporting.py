"""A line on pytest's terminal from a test module (fuzz counts, per-config times), shown even while pytest captures
output and left out when the module runs without a terminal reporter (e.g. under pytest-xdist's workers)."""
from __future__ import annotations


def show(request, line: str) -> None:
    """Write ``line`` (after a blank line) to the terminal of the session running ``request``'s test."""
    reporter = request.config.pluginmanager.get_plugin('terminalreporter')
    capture = request.config.pluginmanager.get_plugin('capturemanager')
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line('\n' + line)
