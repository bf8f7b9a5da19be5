"""``apply_product_ops``, the products part of an apply, on SQLite and PostgreSQL: one
query for the app's rows, unchanged rows untouched, new rows in one flush, and a slug
taken after the plan refused as ``product_exists`` rather than a server error."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, event, select
from sqlalchemy.orm import Session, sessionmaker

from payments.config.apply import apply_product_ops
from payments.config.plan import Op
from payments.db import transaction
from payments.errors import ApiError
from payments.models import App, Product, ProductStatus
from tests.factories import add_app


def spec(slug: str, price: str = "10000") -> dict[str, str]:
    return {"slug": slug, "name": slug.title(), "priceAtomic": price, "status": "active"}


def seed(sessions: sessionmaker[Session]) -> dict[str, str]:
    """App ``game`` with products a, b and c; their ids by slug."""
    add_app(sessions, "game")
    with transaction(sessions) as session:
        app = session.scalars(select(App)).one()
        rows = [Product(app_id=app.id, slug=s, sku=s, name=s, price_atomic=10_000)
                for s in "abc"]
        session.add_all(rows)
        session.flush()
        return {p.slug: p.id for p in rows}


def test_ops_are_carried_out_with_a_bounded_number_of_statements(
        sessions: sessionmaker[Session]) -> None:
    ids = seed(sessions)
    ops = [Op("update", "product", "a", id=ids["a"], spec=spec("a", "20000")),
           Op("unchanged", "product", "b", id=ids["b"], spec=spec("b")),
           Op("disable", "product", "c", id=ids["c"]),
           *(Op("create", "product", f"new-{i}", spec=spec(f"new-{i}")) for i in range(30))]
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)
    with transaction(sessions) as session:
        app = session.scalars(select(App)).one()
        event.listen(Engine, "before_cursor_execute", seen)
        try:
            done = apply_product_ops(session, app, ops)
        finally:
            event.remove(Engine, "before_cursor_execute", seen)
    # One SELECT of the app's products, one UPDATE per changed row (different columns),
    # one batched INSERT of the 30 new ones; nothing for the unchanged row.
    assert [s.split()[0] for s in statements] == ["SELECT", "UPDATE", "UPDATE", "INSERT"]
    with sessions() as session:
        by_slug = {p.slug: p for p in session.scalars(select(Product))}
    assert done == {op.key: by_slug[op.key].id for op in ops}
    assert list(done) == [op.key for op in ops]
    assert by_slug["a"].price_atomic == 20_000 and by_slug["b"].price_atomic == 10_000
    assert by_slug["c"].status is ProductStatus.DISABLED
    assert len(by_slug) == 33


def test_a_slug_taken_after_the_plan_is_refused_and_nothing_is_written(
        sessions: sessionmaker[Session]) -> None:
    seed(sessions)
    ops = [Op("create", "product", "fresh", spec=spec("fresh")),
           Op("create", "product", "b", spec=spec("b"))]

    def apply() -> None:
        with transaction(sessions) as session:  # rolled back by the refusal
            apply_product_ops(session, session.scalars(select(App)).one(), ops)
    with pytest.raises(ApiError) as refused:
        apply()
    assert (refused.value.code, refused.value.status) == ("product_exists", 409)
    with sessions() as session:
        assert sorted(session.scalars(select(Product.slug))) == ["a", "b", "c"]


def test_a_rename_onto_a_slug_taken_after_the_plan_is_refused_and_nothing_is_written(
        sessions: sessionmaker[Session]) -> None:
    """An update is written in the same guarded flush as the new rows: a slug the product
    API gave another product since the plan is ``product_exists``, not a server error."""
    ids = seed(sessions)
    ops = [Op("update", "product", "b", id=ids["a"], spec=spec("b"))]

    def apply() -> None:
        with transaction(sessions) as session:
            apply_product_ops(session, session.scalars(select(App)).one(), ops)
    with pytest.raises(ApiError) as refused:
        apply()
    assert (refused.value.code, refused.value.status) == ("product_exists", 409)
    with sessions() as session:
        assert sorted(session.scalars(select(Product.slug))) == ["a", "b", "c"]
