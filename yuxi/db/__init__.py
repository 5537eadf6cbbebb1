"""Database access: where PostgreSQL is, connection pools, migrations."""
