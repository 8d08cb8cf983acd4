"""Findings: which bottleneck, which property a technique exploits, which technique, and what it could gain.

- :mod:`roofline.findings.base`: the one :class:`~roofline.findings.base.Finding` type, its gain and saving,
  the ranking, and the tile/wave arithmetic both rule sets use;
- :mod:`roofline.findings.analytic`: rules on one analytic row (:class:`~roofline.findings.analytic.AnalyticContext`);
- :mod:`roofline.findings.model`: rules on a diagnosed model's placed ops
  (:class:`~roofline.findings.model.ModelContext`).
"""
