"""``ProductDraft``, what the config plan checks a product change on, stays a faithful copy
of a ``Product`` row: a new draft holds what an insert would write, and a draft of a row
holds the row's values, so a plan shows what apply will store."""

from __future__ import annotations

from sqlalchemy import inspect

from payments.models import Pricing, Product, ProductStatus, RiskMode
from payments.products import DRAFT_FIELDS, ProductDraft, apply_product_fields, product_view


def test_a_new_draft_holds_the_column_defaults_of_a_new_row() -> None:
    columns = {a.key: a.columns[0] for a in inspect(Product).column_attrs}
    draft = ProductDraft()
    checked = 0
    for name in DRAFT_FIELDS:
        assert name in columns, f"{name} is not a Product column"
        column = columns[name]
        default = column.default
        if name == "id" or (default is None and not column.nullable):
            continue  # the id is made at insert; a column without default must be given
        if default is None:
            expected = None  # a nullable column without default: NULL
        else:
            expected = default.arg({}) if callable(default.arg) else default.arg
        assert getattr(draft, name) == expected, name
        checked += 1
    assert checked >= 11


def test_a_draft_of_a_row_views_as_the_row_and_changes_alone() -> None:
    row = Product(id="zprod_x", app_id="zapp_x", template="zent", slug="zent", sku="zent-1",
                  name="Zent", price_atomic=10_000, risk_mode=RiskMode.SETTLED_FIRST,
                  pricing=Pricing.FIXED, min_amount_atomic=None, max_amount_atomic=None,
                  trusted_charge_enabled=True, trusted_charge_proof_required=False,
                  trusted_charge_max_atomic=50_000, fulfillment_adapter="webhook",
                  fulfillment_config={"item": "zent"}, status=ProductStatus.ACTIVE)
    draft = ProductDraft.of(row)
    assert product_view(draft, "", "") == product_view(row, "", "")
    apply_product_fields(draft, {"priceAtomic": "20000"}, creating=False)
    assert (draft.price_atomic, row.price_atomic) == (20_000, 10_000)
