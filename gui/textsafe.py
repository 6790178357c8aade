"""Tooltips are the one place Qt guesses rich text (Qt::mightBeRichText). Store content put
in a tooltip goes through `tip()`, which escapes it inside an explicit rich-text wrapper,
so `<b>` or `<img src=...>` in a key or a body shows as those characters, never as markup."""
from __future__ import annotations

import html


def tip(text: str) -> str:
    if not text:
        return ""
    esc = html.escape(text, quote=False).replace("\n", "<br>")
    return f"<qt><span style='white-space:pre-wrap'>{esc}</span></qt>"
