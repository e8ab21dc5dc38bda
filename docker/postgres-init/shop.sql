-- The example shop (examples/shop.sql) for PostgreSQL, in a database of its
-- own named `shop`. examples/shop.sql is written for SQLite (PRAGMA, printf,
-- datetime modifiers, json_object, zeroblob), so this file generates the same
-- rows with PostgreSQL's functions. Run once by the postgres image on an empty
-- data directory (/docker-entrypoint-initdb.d).
CREATE DATABASE shop;
\connect shop

CREATE TABLE customers (
  customer_id   integer PRIMARY KEY,
  email         text NOT NULL UNIQUE,
  name          text NOT NULL,
  password_hash text NOT NULL,
  created_at    timestamp NOT NULL,
  vip           boolean NOT NULL,
  country       text,
  prefs         jsonb
);

CREATE TABLE products (
  sku        text PRIMARY KEY,
  title      text NOT NULL,
  price      double precision NOT NULL,
  weight_kg  double precision,
  thumbnail  bytea
);

CREATE TABLE orders (
  order_id    integer PRIMARY KEY,
  customer_id integer NOT NULL REFERENCES customers(customer_id),
  created_at  timestamp NOT NULL,
  status      text NOT NULL,
  total       double precision NOT NULL
);

CREATE TABLE order_lines (
  order_id integer NOT NULL REFERENCES orders(order_id),
  line_no  integer NOT NULL,
  sku      text NOT NULL REFERENCES products(sku),
  qty      integer NOT NULL,
  price    double precision NOT NULL,
  PRIMARY KEY (order_id, line_no)
);

INSERT INTO customers
SELECT i,
       'customer' || i || '@example.com',
       'Customer ' || i,
       'pbkdf2$' || lpad(to_hex(i::bigint * 2654435761 % 4294967296), 8, '0'),
       timestamp '2024-01-01 00:00:00' + make_interval(secs => i * 7919 % 31536000),
       i % 10 = 0,
       CASE i % 4 WHEN 0 THEN 'FR' WHEN 1 THEN 'DE' WHEN 2 THEN 'US' ELSE NULL END,
       CASE WHEN i % 3 = 0 THEN jsonb_build_object('newsletter', true, 'lang', 'en', 'tags', jsonb_build_array('a', i)) END
FROM generate_series(1, 500) AS i;

INSERT INTO products
SELECT 'SKU-' || lpad(i::text, 4, '0'),
       'Product ' || i,
       round(1 + (i * 37 % 500) / 4.0, 2),
       CASE WHEN i % 5 = 0 THEN NULL ELSE (i * 13 % 100) / 10.0 END,
       CASE WHEN i % 10 = 0 THEN decode(repeat('00', 16), 'hex') END
FROM generate_series(1, 50) AS i;

INSERT INTO orders
SELECT i,
       1 + (i * 31 % 500),
       timestamp '2024-06-01 00:00:00' + make_interval(secs => i * 3607),
       CASE i % 5 WHEN 0 THEN 'cancelled' WHEN 1 THEN 'placed' ELSE 'shipped' END,
       0
FROM generate_series(1, 2000) AS i;

INSERT INTO order_lines
SELECT 1 + ((i - 1) / 3),
       1 + ((i - 1) % 3),
       'SKU-' || lpad((1 + (i * 7 % 50))::text, 4, '0'),
       1 + (i % 4),
       (SELECT price FROM products WHERE sku = 'SKU-' || lpad((1 + (i * 7 % 50))::text, 4, '0'))
FROM generate_series(1, 6000) AS i;

UPDATE orders SET total = (SELECT round(sum(qty * price)::numeric, 2) FROM order_lines l WHERE l.order_id = orders.order_id);
