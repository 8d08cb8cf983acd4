"""Findings: which bottleneck, which property a technique exploits, which technique, and what it could gain.

- :mod:`roofline.findings.base`: the one :class:`~roofline.findings.base.Finding` type, its gain and saving,
  the ranking, and the tile/wave arithmetic the rules use;
- :mod:`roofline.findings.registry`: every rule declared once with its metadata (id, bottleneck, properties,
  technique, --verify's mechanical technique, docs row), and the producers that find them, run by stage;
- :mod:`roofline.findings.context`: :class:`~roofline.findings.context.FindingContext`, what every producer reads;
- :mod:`roofline.findings.rules`: the rules, one module per family, and ``produce_all``, the one entry point;
- :mod:`roofline.findings.analytic`: one analytic row (:class:`~roofline.findings.analytic.AnalyticContext`);
- :mod:`roofline.findings.model`: a diagnosed model's placed ops and the patterns found in them
  (:class:`~roofline.findings.model.ModelContext`).
"""
