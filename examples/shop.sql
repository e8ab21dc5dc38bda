-- The example shop, as SQLite. `scripts/make-example-db.sh` builds
-- examples/shop.db from this file; the built file is committed so the demo
-- runs on a fresh checkout with no extra step. Data is generated, deterministic.
PRAGMA foreign_keys = ON;

CREATE TABLE customers (
  customer_id   INTEGER PRIMARY KEY,
  email         TEXT NOT NULL UNIQUE,
  name          TEXT NOT NULL,
  password_hash TEXT NOT NULL,
  created_at    DATETIME NOT NULL,
  vip           BOOLEAN NOT NULL,
  country       TEXT,
  prefs         JSON
);

CREATE TABLE products (
  sku        TEXT PRIMARY KEY,
  title      TEXT NOT NULL,
  price      REAL NOT NULL,
  weight_kg  REAL,
  thumbnail  BLOB
);

CREATE TABLE orders (
  order_id    INTEGER PRIMARY KEY,
  customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
  created_at  DATETIME NOT NULL,
  status      TEXT NOT NULL,
  total       REAL NOT NULL
);

CREATE TABLE order_lines (
  order_id INTEGER NOT NULL REFERENCES orders(order_id),
  line_no  INTEGER NOT NULL,
  sku      TEXT NOT NULL REFERENCES products(sku),
  qty      INTEGER NOT NULL,
  price    REAL NOT NULL,
  PRIMARY KEY (order_id, line_no)
);

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
INSERT INTO customers
SELECT i,
       'customer' || i || '@example.com',
       'Customer ' || i,
       'pbkdf2$' || printf('%08x', i * 2654435761 % 4294967296),
       datetime('2024-01-01 00:00:00', '+' || (i * 7919 % 31536000) || ' seconds'),
       i % 10 = 0,
       CASE i % 4 WHEN 0 THEN 'FR' WHEN 1 THEN 'DE' WHEN 2 THEN 'US' ELSE NULL END,
       CASE WHEN i % 3 = 0 THEN json_object('newsletter', json('true'), 'lang', 'en', 'tags', json_array('a', i)) END
FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50)
INSERT INTO products
SELECT printf('SKU-%04d', i),
       'Product ' || i,
       round(1 + (i * 37 % 500) / 4.0, 2),
       CASE WHEN i % 5 = 0 THEN NULL ELSE (i * 13 % 100) / 10.0 END,
       CASE WHEN i % 10 = 0 THEN zeroblob(16) END
FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
INSERT INTO orders
SELECT i,
       1 + (i * 31 % 500),
       datetime('2024-06-01 00:00:00', '+' || (i * 3607) || ' seconds'),
       CASE i % 5 WHEN 0 THEN 'cancelled' WHEN 1 THEN 'placed' ELSE 'shipped' END,
       0
FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000)
INSERT INTO order_lines
SELECT 1 + ((i - 1) / 3),
       1 + ((i - 1) % 3),
       printf('SKU-%04d', 1 + (i * 7 % 50)),
       1 + (i % 4),
       (SELECT price FROM products WHERE sku = printf('SKU-%04d', 1 + (i * 7 % 50)))
FROM n;

UPDATE orders SET total = (SELECT round(sum(qty * price), 2) FROM order_lines l WHERE l.order_id = orders.order_id);
