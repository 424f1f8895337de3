-- calls_running only duplicated the primary key: every query that reads
-- running calls names its batch (BENCHMARKS.md, sixth round).
DROP INDEX calls_running;
