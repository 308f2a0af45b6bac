"""The PostgreSQL adapter (psycopg 3, pgvector): the store for several processes."""
