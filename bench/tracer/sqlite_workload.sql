-- Tracer benchmark: a "realistic program" workload for Debian's sqlite3 (run as
-- `sqlite3 :memory: < sqlite_workload.sql`): a table of 200 000 generated rows inserted in one
-- transaction, an index, and aggregate queries. Deterministic: no random() or time functions.
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, category INTEGER, price REAL, note TEXT);
BEGIN;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 200000)
INSERT INTO item(id, name, category, price, note)
SELECT x, printf('item-%08d', (x * 7919) % 1000003), x % 97, (x % 1000) / 10.0,
       substr('lorem ipsum dolor sit amet consectetur adipiscing elit', 1 + x % 40)
FROM n;
COMMIT;
CREATE INDEX item_name ON item(name);
CREATE INDEX item_category_price ON item(category, price);
SELECT count(*), sum(price) FROM item WHERE name BETWEEN 'item-00100000' AND 'item-00500000';
SELECT category, count(*), avg(price), max(name) FROM item GROUP BY category ORDER BY 3 DESC LIMIT 5;
SELECT count(DISTINCT note), group_concat(DISTINCT length(note)) FROM item;
UPDATE item SET note = note || '!' WHERE category < 20;
DELETE FROM item WHERE id % 3 = 0;
SELECT count(*), total(length(note)) FROM item;
