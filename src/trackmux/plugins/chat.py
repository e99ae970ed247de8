"""Text that a chat service renders as markup: the doctor's findings quote model output and
metric keys, which are the user's (or the model's) words, not ours.

Slack reads ``<!channel>``, ``<@U…>`` and ``<http://…|label>`` in message text as mentions
and links, so a sample that says ``<!channel>`` would ping a whole channel. Slack's own
rule is to escape ``&``, ``<`` and ``>`` as entities in any text it did not write; the
webhook backend and the alerts that wandb and trackio forward to Slack use this one helper
(trackio's ``alerts.py`` puts the text into a ``mrkdwn`` block as it is).
"""

from __future__ import annotations


def slack_escape(text: str) -> str:
    """Slack's escaping of message text: ``&``, ``<`` and ``>`` as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
