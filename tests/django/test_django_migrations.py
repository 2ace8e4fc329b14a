"""Django's ``migrate`` creates the core's table, or adopts it where payhooks already made it,
and the model Django reads it through matches the table."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, connections
from psycopg.conninfo import make_conninfo

import payhooks
from payhooks.django.models import ProcessedWebhook
from tests.django.conftest import point_django_at

Made = Callable[[str], str]


@pytest.fixture
def database_from(admin_url: str) -> Iterator[Made]:
    """``database_from(template)`` makes a database from ``template`` (``template0``: empty)
    and points Django at it."""
    made: list[str] = []

    def make(template: str) -> str:
        name = f"payhooks_djm_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'.encode())
        made.append(name)
        url = make_conninfo(admin_url, dbname=name)
        point_django_at(url)
        return url

    yield make
    connections.close_all()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {row[0] for row in rows}


def test_migrate_creates_the_core_table_in_an_empty_database(database_from):
    url = database_from("template0")
    call_command("migrate", "payhooks", verbosity=0)
    assert {"processed_webhooks", "payhooks_migrations"} <= tables(url)


def test_after_django_migrated_payhooks_migrate_finds_nothing_left_to_do(database_from):
    url = database_from("template0")
    call_command("migrate", "payhooks", verbosity=0)
    with psycopg.connect(url, autocommit=True) as conn:
        assert payhooks.migrate(conn) == []


def test_migrate_adopts_the_table_payhooks_already_made_and_keeps_its_records(
    database_from, template_db
):
    url = database_from(template_db)  # the core's table, made by payhooks' own migrate
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome,"
            " payload_sha256, body) VALUES ('razorpay', 'evt_kept', 'x', 'ignored', 'x', '')"
        )
    call_command("migrate", verbosity=0)
    assert list(ProcessedWebhook.objects.values_list("event_id", flat=True)) == ["evt_kept"]


def test_unapplying_the_migration_keeps_the_table_and_its_records(database_from, template_db):
    url = database_from(template_db)
    call_command("migrate", "payhooks", verbosity=0)
    call_command("migrate", "payhooks", "zero", verbosity=0)
    assert "processed_webhooks" in tables(url)
    call_command("migrate", "payhooks", verbosity=0)  # and applying it again adopts it


def test_the_model_has_the_tables_columns_and_nullability(django_db):
    with connection.cursor() as cursor:
        described = connection.introspection.get_table_description(cursor, "processed_webhooks")
    table = {(column.name, bool(column.null_ok)) for column in described}
    model = {(f.column, f.null) for f in ProcessedWebhook._meta.concrete_fields}
    assert model == table


def test_the_model_needs_no_migration_the_app_does_not_ship(django_db):
    call_command("makemigrations", "payhooks", "--check", "--dry-run", verbosity=0)
