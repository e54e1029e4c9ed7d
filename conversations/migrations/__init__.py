"""Alembic migrations of the store; run at start and by ``threadbot db upgrade``."""
