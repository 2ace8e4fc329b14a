"""The documentation site's hook, for what reads well in the repository and not on the site.

A guide's link to a file outside docs/ (``../examples/flask_shop/app.py``) has no page on the
site, so there it becomes the path in code; a link to a file that does not exist is a warning,
which the strict build turns into a failure. The gateways' guide cites its sources as ``[R2]``
(a note below it), which the API reference's cross-references would read as a name to link."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.plugins.payhooks")
OUTSIDE = re.compile(r"\[([^\]]+)\]\((\.\./[^)\s#]+)\)")
CITATION = re.compile(r"\[([A-Z][a-z]?\d+)\](?![(:])")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Each link out of docs/ as the repository path it names, in code."""
    here = Path(config["docs_dir"]) / page.file.src_path

    def plain(match: re.Match[str]) -> str:
        text, target = match.groups()
        found = (here.parent / target).resolve()
        if not found.exists():
            log.warning("%s links to %s, which does not exist", page.file.src_path, target)
        relative = found.relative_to(Path(config["docs_dir"]).resolve().parent)
        return f"{text} (`{relative}`)" if f"`{relative}" not in text else text

    return CITATION.sub(r"\\[\1\\]", OUTSIDE.sub(plain, markdown))
