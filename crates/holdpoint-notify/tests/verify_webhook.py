"""Verifies one Standard Webhooks delivery with the PyPI `standardwebhooks`
package (an implementation independent of the Rust signer).

usage: verify_webhook.py SECRET BODY_FILE HEADERS_JSON_FILE
Exits 0 when the signature verifies, 1 with the reason otherwise.
"""
import json
import sys

from standardwebhooks.webhooks import Webhook

secret, body_path, headers_path = sys.argv[1:4]
with open(body_path, "rb") as f:
    body = f.read()
with open(headers_path) as f:
    headers = json.load(f)
try:
    Webhook(secret).verify(body, headers)
except Exception as e:  # noqa: BLE001 - any failure is a refusal
    print(f"refused: {e!r}", file=sys.stderr)
    sys.exit(1)
print("verified")
