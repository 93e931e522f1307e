"""The library's version on the site: ``{{ version }}`` in any page, and ``mlm_lib_version`` in the
templates' context.

The one source of the version is ``mlm_lib.__version__`` (pyproject.toml reads it too); a release is
the tag ``v<version>``, and the first cell of every chapter installs the library from that tag. So
the site says which version of the library its chapters were executed against.
"""

from __future__ import annotations

import mlm_lib


def _add_version(app, config) -> None:
    config.myst_substitutions = {**(config.myst_substitutions or {}), "version": mlm_lib.__version__}
    config.html_context = {**(config.html_context or {}), "mlm_lib_version": mlm_lib.__version__}


def setup(app):
    app.connect("config-inited", _add_version)
    return {"version": mlm_lib.__version__, "parallel_read_safe": True, "parallel_write_safe": True}
