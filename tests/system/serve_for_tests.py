"""Run the service for the system tests: ``python serve_for_tests.py <db-url> <port> <owner-key>``.

Uses the test-double filter loader (``system_doubles.fake_loads``) so the service can be
exercised independently of the real filters; the test-only pause hooks come from the
``DPSIEVE_TEST_*`` environment variables (see :class:`dpsieve.service.Settings`).
Binds to 127.0.0.1 only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).parent))

from system_doubles import fake_loads

from dpsieve.ledger import open_store
from dpsieve.service import Settings, create_app


def main() -> None:
    url, port, owner = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    schema = sys.argv[4] if len(sys.argv) > 4 else "dpsieve"
    settings = Settings.from_env(database_url=url, owner_key=owner, schema=schema)
    store = open_store(url, schema=schema, loads=fake_loads)
    app = create_app(settings, store=store)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", workers=1)


if __name__ == "__main__":
    main()
