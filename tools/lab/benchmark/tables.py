"""Markdown tables of measurement rows (dicts), shared by the benchmark and comparison tools."""
from __future__ import annotations


def format_value(value) -> str:
    """Floats with two decimals, or three significant digits below 1 (0.0412 img/s, not 0.04); others as str."""
    if not isinstance(value, float):
        return str(value)
    return f"{value:.2f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"


def format_row(row: dict, columns: list[str], missing: str = '-') -> str:
    """One Markdown table row of ``row``'s ``columns`` (``missing`` where a row lacks one)."""
    return '| ' + ' | '.join(format_value(row.get(c, missing)) for c in columns) + ' |'


def header_rows(columns: list[str]) -> list[str]:
    return ['| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]


def markdown(rows: list[dict], header: str, columns: list[str], missing: str = '-') -> str:
    """``header``, a blank line, then the table of ``rows``."""
    lines = [header, '', *header_rows(columns)] + [format_row(r, columns, missing) for r in rows]
    return '\n'.join(lines) + '\n'
