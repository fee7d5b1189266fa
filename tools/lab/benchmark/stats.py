"""Repeated runs summarised: mean, standard deviation, a 95% confidence interval, and which backbones differ.

Why a paired t-test over seeds (and not a bootstrap over validation images): in :mod:`lab.benchmark.compare`
seed k gives every backbone the same data order and augmentation draws, so run k of backbone A and run k of B
differ by the architecture (and its initialisation) only; the differences d_k = A_k - B_k remove the noise the
seeds share. The spread that makes one run per backbone unreliable is training noise (order, augmentation, init),
which a bootstrap over a fixed set of validation images does not see: it measures how the score would move on
other images for the same trained weights. With k backbones the k(k-1)/2 pairwise p-values are adjusted with
Holm's step-down method, so "differs" holds at the family-wise level ``alpha``.

Only the standard library and math: Student's t distribution through the regularised incomplete beta function
(a continued fraction evaluated with the modified Lentz method), checked against scipy in the tests.
"""
from __future__ import annotations

import math
from itertools import combinations
from statistics import mean, stdev


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (converges fast for x < (a + 1) / (a + b + 2))."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    value = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            value *= c * d
        if abs(c * d - 1.0) < eps:
            break
    return value


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = a * math.log(x) + b * math.log1p(-x) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (bisection on :func:`t_sf`; p in (0, 1))."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    low, high = -1e3, 1e3
    for _ in range(200):
        middle = (low + high) / 2.0
        if 1.0 - t_sf(middle, df) < p:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def summarize(values: list[float], confidence: float = 0.95) -> dict:
    """n, mean, std (n - 1 in the denominator) and the ``confidence`` interval of the mean from Student's t.
    One value: std and interval are None (a single run says nothing about its spread)."""
    n = len(values)
    if n == 0:
        raise ValueError("no values to summarise")
    m = mean(values)
    if n == 1:
        return {'n': 1, 'mean': m, 'std': None, 'ci_low': None, 'ci_high': None}
    s = stdev(values)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * s / math.sqrt(n)
    return {'n': n, 'mean': m, 'std': s, 'ci_low': m - half, 'ci_high': m + half}


def paired_t_test(a: list[float], b: list[float]) -> dict:
    """Two-sided paired t-test of mean(a - b) = 0 over seeds: mean difference, t, degrees of freedom, p.
    Identical differences (zero spread) give p = 0 when they are not all zero, else 1."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"a paired test needs two equally long lists of at least 2 runs, got {len(a)} and {len(b)}")
    diffs = [x - y for x, y in zip(a, b)]
    d, s, n = mean(diffs), stdev(diffs), len(diffs)
    if s == 0.0:
        return {'mean_diff': d, 't': math.copysign(math.inf, d) if d else 0.0, 'df': n - 1, 'p': 0.0 if d else 1.0}
    t = d / (s / math.sqrt(n))
    return {'mean_diff': d, 't': t, 'df': n - 1, 'p': min(1.0, 2.0 * t_sf(abs(t), n - 1))}


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given): the i-th smallest of m is multiplied by
    m - i, and the adjusted values are made non-decreasing in that order."""
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def pairwise_differences(runs: dict[str, dict[int, float]], alpha: float = 0.05) -> list[dict]:
    """Every pair of backbones (``runs``: backbone -> {seed: value}) paired over the seeds both have (at least 2):
    mean difference a - b, t, p, Holm-adjusted p and whether they differ at family-wise level ``alpha``."""
    rows = []
    for x, y in combinations(runs, 2):
        seeds = sorted(set(runs[x]) & set(runs[y]))
        if len(seeds) >= 2:
            test = paired_t_test([runs[x][s] for s in seeds], [runs[y][s] for s in seeds])
            rows.append({'a': x, 'b': y, 'n': len(seeds), **test})
    for row, adjusted in zip(rows, holm([r['p'] for r in rows])):
        row['p_holm'] = adjusted
        row['differs'] = adjusted < alpha
    return rows
