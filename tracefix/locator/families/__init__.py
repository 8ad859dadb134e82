"""One locate module per error family, named by the knowledge entry's ``locate`` field.

``<name>.py`` (``-`` spelled ``_``) holds ``run(ctx)``; see :mod:`tracefix.locator.base`.
"""
