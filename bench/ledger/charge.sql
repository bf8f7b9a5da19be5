-- One product-route charge (POST /api/pay/<app>/<product>) as plain SQL, for pgbench.
--
-- The same statements, in the same order and in ONE transaction, that
-- payments.ledger.routes_payments.PaymentRoutes.pay and charges.record_charge send:
-- the key reads (app, idempotency key, product, the consumed code, the authorization
-- before and after the reservation) and the writes (consume the payment code, reserve
-- the budget, charge, delivery, payment.delivered event, its outbox attempt, the
-- idempotency record). Run by bench/ledger_bench.py as
--   pgbench -n -M prepared -c C -j 2 -T S -f charge.sql -D app_slug=... -D product_slug=...
--           -D app_id=... -D product_id=... -D amount=... -D pay_to=...
--           -D event_payload=<JSON> -D response_body=<JSON>
-- Each transaction consumes a distinct, pre-seeded payment code: code number n comes from
-- the sequence bench_code_seq and the seeded code_hash is sha256('pgb-code-<n>'), so the
-- UPDATE finds it by its hash exactly like the product route does. If the codes run out,
-- \gset finds no row and pgbench aborts the client (the run then fails loudly).
\set k random(1, 9223372036854775806)
BEGIN;
SELECT * FROM apps WHERE slug = :app_slug;
SELECT * FROM idempotency_records WHERE app_id = :app_id AND scope = 'pay' AND key = 'pgb-' || (:k)::text;
SELECT * FROM products WHERE app_id = :app_id AND slug = :product_slug;
UPDATE auth_codes SET consumed_at = now() WHERE code_hash = (SELECT encode(sha256(convert_to('pgb-code-' || nextval('bench_code_seq')::text, 'UTF8')), 'hex')) AND kind = 'payment' AND consumed_at IS NULL AND expires_at > now() RETURNING code_hash, authorization_id \gset
SELECT * FROM auth_codes WHERE code_hash = :code_hash AND kind = 'payment';
SELECT * FROM authorizations WHERE id = :authorization_id;
UPDATE authorizations SET spent_atomic = spent_atomic + (:amount)::bigint WHERE id = :authorization_id AND status = 'active' AND deadline > now() AND spent_atomic + (:amount)::bigint <= value_atomic RETURNING owner_wallet \gset
SELECT * FROM authorizations WHERE id = :authorization_id;
INSERT INTO charges (app_id, product_id, order_id, authorization_id, owner_wallet, pay_to, amount_atomic, settlement_status, batch_id, settlement_tx_hash, source, created_at, settled_at) VALUES (:app_id, :product_id, NULL, :authorization_id, :owner_wallet, :pay_to, (:amount)::bigint, 'queued', NULL, NULL, 'product_route', now(), NULL) RETURNING seq \gset
INSERT INTO deliveries (id, app_id, product_id, order_id, charge_seq, idempotency_key, developer_user_id, wallet_address, status, fulfilled, created_at, delivered_at) VALUES ('ztdlv_pgb' || (:seq)::text, :app_id, :product_id, NULL, (:seq)::bigint, 'svc:' || 'pgb-' || (:k)::text, 'user-1', :owner_wallet, 'delivered', false, now(), now());
INSERT INTO webhook_events (id, app_id, type, delivery_id, payload, created_at) VALUES ('zevt_pgb' || (:seq)::text, :app_id, 'payment.delivered', 'ztdlv_pgb' || (:seq)::text, (:event_payload)::json, now());
INSERT INTO webhook_attempts (id, event_id, status, attempt_count, next_attempt_at, response_status, signed, updated_at) VALUES ('zwha_pgb' || (:seq)::text, 'zevt_pgb' || (:seq)::text, 'pending', 0, now(), NULL, false, now());
INSERT INTO idempotency_records (app_id, scope, key, request_hash, response_status, response_body, created_at, expires_at) VALUES (:app_id, 'pay', 'pgb-' || (:k)::text, encode(sha256(convert_to((:k)::text, 'UTF8')), 'hex'), 201, (:response_body)::json, now(), now() + interval '30 days');
END;
