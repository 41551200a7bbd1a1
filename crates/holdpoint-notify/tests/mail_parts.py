"""Prints the messages of a maildir (as aiosmtpd's Mailbox handler writes
them) as JSON: for each, its headers of interest and its decoded parts.

usage: mail_parts.py MAILDIR
"""
import email
import email.policy
import json
import mailbox
import sys

out = []
for msg in mailbox.Maildir(sys.argv[1], factory=None):
    parsed = email.message_from_bytes(msg.as_bytes(), policy=email.policy.default)
    parts = []
    for part in parsed.walk():
        if part.is_multipart():
            continue
        parts.append({"type": part.get_content_type(), "content": part.get_content()})
    out.append({
        "subject": str(parsed["subject"]),
        "to": str(parsed["to"]),
        "from": str(parsed["from"]),
        "type": parsed.get_content_type(),
        "parts": parts,
    })
print(json.dumps(out))
