"""MkDocs hook: Sphinx roles in docstrings (``:class:`Grammar```) render as plain code.

The docstrings use Sphinx-style roles, which mkdocstrings' Google-style parser leaves as text:
``:meth:`<code>from_ebnf</code>``` in the HTML. This hook drops the role prefix and the leading
``~`` of a shortened path, leaving ``<code>from_ebnf</code>``.
"""

import re

_ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):(<code>)~?")


def on_page_content(html, **kwargs):
    return _ROLE.sub(r"\1", html)
